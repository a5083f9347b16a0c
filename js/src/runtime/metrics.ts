/**
 * Runtime metrics of a loaded model (`AetherModel.metrics()`) and their Prometheus text exposition
 * (`formatPrometheus`, format version 0.0.4: `# HELP` / `# TYPE` lines, base units in the names, counters
 * ending in `_total`). Browser-safe: no Node imports (the HTTP server and the engine worker both use it).
 */

/** One KV cache storage class: its dtype, bytes allocated for every position, bytes holding cached positions. */
export interface KvDtypeMetrics { dtype: string; bytes: number; usedBytes: number }

export interface LayerMetrics {
  layer: number;
  /** FFN mode of the layer ('dense', 'fused', 'static', 'dynamic'). */
  ffnMode: string;
  /** FFN neurons computed / (tokens x hidden_dim) since the last resetMetrics(); null before any token. */
  ffnActiveFraction: number | null;
  /** Seconds per op class (qkv, rope_kv, attention, attn_out, ffn) since timing was turned on; null when off. */
  opSeconds: Record<string, number> | null;
}

export interface ModelMetrics {
  model: { name: string; arch: string; layers: number; nCtx: number; threads: number };
  /** Cumulative since load or resetMetrics(): tokens and seconds of prefill and decode, generate() calls. */
  tokens: { prefill: number; decode: number; prefillSeconds: number; decodeSeconds: number; generations: number };
  /** Rates of the last generation (tokens per second; 0 when not measured). */
  last: { prefillTokensPerSecond: number; decodeTokensPerSecond: number };
  kvCache: {
    /** Positions held in the cache, and its capacity (n_ctx). */
    positions: number;
    capacity: number;
    byDtype: KvDtypeMetrics[];
    /** Bytes the same cache would take with every position in f16 (the default), and the bytes saved against it. */
    f16Bytes: number;
    savedBytes: number;
    /** Bytes the KV heads stored locally save against storing them fully (part of savedBytes; net of their ring rows). */
    localHeadsSavedBytes: number;
  };
  memory: { wasmBytes: number; weightsBytes: number; runStateBytes: number };
  layers: LayerMetrics[];
  /** Seconds of the ops outside the layers (embed, output); null when timing is off. */
  globalOpSeconds: Record<string, number> | null;
  /** Whether the per-op time counters are on (`model.setTiming(true)`). */
  timing: boolean;
}

type Sample = { labels: Record<string, string>; value: number };
interface Family { name: string; help: string; type: 'counter' | 'gauge'; samples: Sample[] }

const NAME_RE = /^[a-zA-Z_:][a-zA-Z0-9_:]*$/;
const LABEL_RE = /^[a-zA-Z_][a-zA-Z0-9_]*$/;

function escapeLabel(v: string): string { return v.replace(/\\/g, '\\\\').replace(/\n/g, '\\n').replace(/"/g, '\\"'); }
function escapeHelp(v: string): string { return v.replace(/\\/g, '\\\\').replace(/\n/g, '\\n'); }
function num(v: number): string {
  if (Number.isNaN(v)) return 'NaN';
  if (v === Infinity) return '+Inf';
  if (v === -Infinity) return '-Inf';
  return String(v);
}

/** The metric families of one model's metrics, each sample carrying `base` labels first. */
function families(m: ModelMetrics, base: Record<string, string>): Family[] {
  const s = (value: number, labels: Record<string, string> = {}): Sample => ({ labels: { ...base, ...labels }, value });
  const f: Family[] = [
    { name: 'aether_prefill_tokens_total', type: 'counter', help: 'Prompt tokens computed (not reused from the KV cache).', samples: [s(m.tokens.prefill)] },
    { name: 'aether_decode_tokens_total', type: 'counter', help: 'Tokens generated.', samples: [s(m.tokens.decode)] },
    { name: 'aether_prefill_seconds_total', type: 'counter', help: 'Time spent in prefill.', samples: [s(m.tokens.prefillSeconds)] },
    { name: 'aether_decode_seconds_total', type: 'counter', help: 'Time spent in decode.', samples: [s(m.tokens.decodeSeconds)] },
    { name: 'aether_generations_total', type: 'counter', help: 'Generate calls finished.', samples: [s(m.tokens.generations)] },
    { name: 'aether_prefill_tokens_per_second', type: 'gauge', help: 'Prefill rate of the last generation.', samples: [s(m.last.prefillTokensPerSecond)] },
    { name: 'aether_decode_tokens_per_second', type: 'gauge', help: 'Decode rate of the last generation.', samples: [s(m.last.decodeTokensPerSecond)] },
    { name: 'aether_kv_cache_bytes', type: 'gauge', help: 'KV cache bytes allocated, by storage dtype.', samples: m.kvCache.byDtype.map((d) => s(d.bytes, { dtype: d.dtype })) },
    { name: 'aether_kv_cache_used_bytes', type: 'gauge', help: 'KV cache bytes holding cached positions, by storage dtype.', samples: m.kvCache.byDtype.map((d) => s(d.usedBytes, { dtype: d.dtype })) },
    { name: 'aether_kv_cache_saved_bytes', type: 'gauge', help: 'KV cache bytes saved against an all-f16 cache of the same capacity.', samples: [s(m.kvCache.savedBytes)] },
    { name: 'aether_kv_cache_local_heads_saved_bytes', type: 'gauge', help: 'KV cache bytes saved by KV heads stored locally (sinks + recent window only).', samples: [s(m.kvCache.localHeadsSavedBytes)] },
    { name: 'aether_kv_cache_positions', type: 'gauge', help: 'Positions held in the KV cache.', samples: [s(m.kvCache.positions)] },
    { name: 'aether_kv_cache_capacity_positions', type: 'gauge', help: 'Positions the KV cache can hold (context length).', samples: [s(m.kvCache.capacity)] },
    { name: 'aether_wasm_memory_bytes', type: 'gauge', help: 'Size of the WebAssembly memory.', samples: [s(m.memory.wasmBytes)] },
    { name: 'aether_model_weights_bytes', type: 'gauge', help: 'Bytes of model weights in wasm memory.', samples: [s(m.memory.weightsBytes)] },
    { name: 'aether_run_state_bytes', type: 'gauge', help: 'Bytes of activations, scratch and KV cache in wasm memory.', samples: [s(m.memory.runStateBytes)] },
    { name: 'aether_threads', type: 'gauge', help: 'Compute threads.', samples: [s(m.model.threads)] },
    {
      name: 'aether_ffn_active_ratio', type: 'gauge', help: 'Fraction of FFN neurons computed, per layer.',
      samples: m.layers.filter((l) => l.ffnActiveFraction !== null).map((l) => s(l.ffnActiveFraction as number, { layer: String(l.layer), mode: l.ffnMode })),
    },
  ];
  if (m.timing) {
    const samples: Sample[] = [];
    for (const l of m.layers) for (const [op, v] of Object.entries(l.opSeconds ?? {})) samples.push(s(v, { layer: String(l.layer), op }));
    for (const [op, v] of Object.entries(m.globalOpSeconds ?? {})) samples.push(s(v, { layer: 'global', op }));
    f.push({ name: 'aether_op_seconds_total', type: 'counter', help: 'Forward-pass wall time per layer and op class (timing on).', samples });
  }
  return f;
}

/**
 * Prometheus text exposition of one model's metrics, or of several (e.g. one per served model, told apart
 * by their labels). Every family gets its `# HELP` and `# TYPE` once; `labels` are added to every sample.
 */
export function formatPrometheus(input: ModelMetrics | { metrics: ModelMetrics; labels?: Record<string, string> }[],
  opts: { labels?: Record<string, string> } = {}): string {
  const entries = Array.isArray(input) ? input : [{ metrics: input, labels: {} }];
  const merged = new Map<string, Family>();
  for (const e of entries) {
    for (const fam of families(e.metrics, { ...opts.labels, ...e.labels })) {
      const have = merged.get(fam.name);
      if (have) have.samples.push(...fam.samples); else merged.set(fam.name, fam);
    }
  }
  const out: string[] = [];
  for (const fam of merged.values()) {
    if (!NAME_RE.test(fam.name)) throw new Error(`metric name '${fam.name}' is not a valid Prometheus name`);
    out.push(`# HELP ${fam.name} ${escapeHelp(fam.help)}`, `# TYPE ${fam.name} ${fam.type}`);
    for (const smp of fam.samples) {
      const ls = Object.entries(smp.labels);
      for (const [k] of ls) if (!LABEL_RE.test(k) || k.startsWith('__')) throw new Error(`label name '${k}' is not a valid Prometheus label name`);
      const lab = ls.length ? `{${ls.map(([k, v]) => `${k}="${escapeLabel(String(v))}"`).join(',')}}` : '';
      out.push(`${fam.name}${lab} ${num(smp.value)}`);
    }
  }
  return out.join('\n') + '\n';
}

/** The Content-Type of the text exposition format. */
export const PROMETHEUS_CONTENT_TYPE = 'text/plain; version=0.0.4; charset=utf-8';
