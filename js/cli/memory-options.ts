/** Context, KV-cache and memory options shared by `aether run`, `bench` and `eval` (see js/src/runtime/engine.ts). */
import { AetherError } from '../src/errors.js';
import { KV_DTYPES, type EngineOptions, type KvDtype } from '../src/runtime/engine.js';

export const MEM_OPTION_SPEC = { ctx: 'number', 'kv-dtype': 'string', 'max-memory': 'string' } as const;

export const MEM_USAGE = `  --ctx N               context length (default: the model's, at most 4096 and what fits in memory)
  --kv-dtype T[,V]      KV-cache dtype: f32 | f16 | q8_0 | q4_0 (default f16, or the file's kv_cache.dtype);
                        two values set K and V apart (llama.cpp's cache_type_k / cache_type_v)
  --max-memory B        cap on the wasm memory, bytes or with a K/M/G suffix (default 4G, the wasm32 limit)`;

function bytes(s: string): number {
  const m = /^(\d+(?:\.\d+)?)\s*([kKmMgG]i?[bB]?)?$/.exec(s.trim());
  if (!m) throw new AetherError('invalid_argument', `--max-memory ${JSON.stringify(s)}: expected bytes, e.g. 3G or 3221225472`);
  const mul = { '': 1, k: 2 ** 10, m: 2 ** 20, g: 2 ** 30 }[(m[2] ?? '').charAt(0).toLowerCase() as '' | 'k' | 'm' | 'g'];
  return Math.floor(Number(m[1]) * mul);
}

export function memFromArgs(v: Record<string, unknown>): Pick<EngineOptions, 'nCtx' | 'kvDtype' | 'maxMemory'> {
  const out: Pick<EngineOptions, 'nCtx' | 'kvDtype' | 'maxMemory'> = {};
  if (v.ctx !== undefined) out.nCtx = v.ctx as number;
  if (v['kv-dtype'] !== undefined) {
    const parts = String(v['kv-dtype']).split(',');
    for (const p of parts) {
      if (!(KV_DTYPES as readonly string[]).includes(p)) throw new AetherError('invalid_argument', `--kv-dtype ${p}: expected one of ${KV_DTYPES.join(', ')}`);
    }
    if (parts.length > 2) throw new AetherError('invalid_argument', '--kv-dtype takes one dtype or K,V');
    out.kvDtype = parts.length === 2 ? { k: parts[0] as KvDtype, v: parts[1] as KvDtype } : parts[0] as KvDtype;
  }
  if (v['max-memory'] !== undefined) out.maxMemory = bytes(String(v['max-memory']));
  return out;
}
