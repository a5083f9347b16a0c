// A generated long-context model (random weights, llama layout) for the KV-cache benches: speed and memory only,
// its outputs mean nothing. Written once per shape into /work/gen or the OS temp folder.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { writeRknot } from '../../dist/src/formats/rknot.js';
import { encodeFromF32 } from '../../dist/src/formats/quantize.js';

/** Path of a q8_0 llama-style model with the given shape (defaults: 8 layers, dim 512, 8 heads / 4 KV heads of 64, n_ctx 4096). */
export async function longModel(shape = {}) {
  const cfg = {
    arch: 'llama', dim: 512, n_layers: 8, n_heads: 8, n_kv_heads: 4, head_dim: 64, hidden_dim: 1408, vocab_size: 512, n_ctx: 4096,
    norm_eps: 1e-5, rope_theta: 500000, rope_dim: 64, rope_type: 'norm', tie_embeddings: false, qkv_bias: false, fused_qkv: false,
    bos_token_id: 1, eos_token_id: 2, ...shape,
  };
  const dirs = ['/work/gen', os.tmpdir()].filter((d) => { try { fs.accessSync(d, fs.constants.W_OK); return true; } catch { return false; } });
  const name = `aether-long-${cfg.n_layers}x${cfg.dim}-h${cfg.n_heads}kv${cfg.n_kv_heads}x${cfg.head_dim}-ctx${cfg.n_ctx}.rknot`;
  const file = path.join(dirs[0], name);
  if (fs.existsSync(file)) return { file, cfg };
  let s = 12345;
  const r = () => { s ^= s << 13; s >>>= 0; s ^= s >>> 17; s ^= s << 5; s >>>= 0; return s / 2 ** 32; };
  const D = cfg.dim, H = cfg.hidden_dim, qd = cfg.n_heads * cfg.head_dim, kvd = cfg.n_kv_heads * cfg.head_dim;
  const specs = [];
  const add = (nm, shp, scale, matrix, offset = 0) => {
    const n = shp.reduce((x, y) => x * y, 1), v = new Float32Array(n);
    for (let i = 0; i < n; i++) v[i] = offset + (r() * 2 - 1) * scale;
    specs.push({ name: nm, shape: shp, dtype: matrix ? 'q8_0' : 'f32', bytes: encodeFromF32(matrix ? 'q8_0' : 'f32', v) });
  };
  add('token_embd.weight', [D, cfg.vocab_size], 0.5, true);
  for (let l = 0; l < cfg.n_layers; l++) {
    const p = `blk.${l}.`;
    add(p + 'attn_norm.weight', [D], 0.2, false, 1);
    add(p + 'attn_q.weight', [D, qd], 0.1, true); add(p + 'attn_k.weight', [D, kvd], 0.1, true); add(p + 'attn_v.weight', [D, kvd], 0.1, true);
    add(p + 'attn_output.weight', [qd, D], 0.05, true);
    add(p + 'ffn_norm.weight', [D], 0.2, false, 1);
    add(p + 'ffn_gate.weight', [D, H], 0.05, true); add(p + 'ffn_up.weight', [D, H], 0.05, true); add(p + 'ffn_down.weight', [H, D], 0.03, true);
  }
  add('output_norm.weight', [D], 0.2, false, 1);
  add('output.weight', [D, cfg.vocab_size], 0.1, true);
  const tokens = [], types = [];
  for (let i = 0; i < cfg.vocab_size; i++) { tokens.push(i < 3 ? ['<unk>', '<s>', '</s>'][i] : `▁t${i}`); types.push(i < 3 ? 3 : 1); }
  const tmp = file + `.${process.pid}.tmp`;
  await writeRknot(tmp, {
    config: cfg,
    tokenizer: { model: 'llama', tokens, scores: tokens.map((_, i) => -i), token_type: types, bos_token_id: 1, eos_token_id: 2, unknown_token_id: 0, add_bos_token: true },
    tensors: specs.map((x) => ({ name: x.name, dtype: x.dtype, shape: x.shape })),
  }, (spec) => specs.find((x) => x.name === spec.name).bytes);
  fs.renameSync(tmp, file);
  return { file, cfg };
}
