// Random-weight llama models at the shapes of issue 15's table, written once as .rknot into a cache folder
// (AETHER_BENCH_MODELS, default <os tmp>/aether-bench-models; never into the repository):
//   s15m  dim 288, 6 layers, 6 heads, hidden 768, vocab 32000 (the shape of stories15M)
//   phi3  dim 3072, 2 layers, 32 heads, hidden 8192, vocab 32064 (Phi-3-mini's shape, layers cut to 2)
// Weights are seeded uniform noise (speed only: the values do not matter, the shapes and dtypes do).
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { repoRoot } from './common.mjs';

export const SHAPES = {
  s15m: { dim: 288, n_layers: 6, n_heads: 6, n_kv_heads: 6, head_dim: 48, hidden_dim: 768, vocab_size: 32000, n_ctx: 512 },
  phi3: { dim: 3072, n_layers: 2, n_heads: 32, n_kv_heads: 32, head_dim: 96, hidden_dim: 8192, vocab_size: 32064, n_ctx: 512 },
};

function tokenizer(vocab) {
  const tokens = ['<unk>', '<s>', '</s>'];
  for (let b = 0; b < 256; b++) tokens.push(`<0x${b.toString(16).toUpperCase().padStart(2, '0')}>`);
  for (let i = 0; tokens.length < vocab; i++) tokens.push('▁w' + i.toString(36));
  const types = tokens.map((_, i) => (i === 0 ? 2 : i < 3 ? 3 : i < 259 ? 6 : 1));
  return { model: 'llama', tokens, scores: tokens.map((_, i) => -i), token_type: types, bos_token_id: 1, eos_token_id: 2, unknown_token_id: 0, add_bos_token: true };
}

/** Path of the model of `shape` with matrices in `dtype` (f32, f16, q8_0, q4_0), written if missing. */
export async function shapeModel(shape, dtype) {
  const s = SHAPES[shape];
  if (!s) throw new Error(`unknown shape ${shape} (${Object.keys(SHAPES).join(', ')})`);
  const dir = process.env.AETHER_BENCH_MODELS || path.join(os.tmpdir(), 'aether-bench-models');
  const file = path.join(dir, `${shape}-${dtype}.rknot`);
  if (fs.existsSync(file)) return file;
  fs.mkdirSync(dir, { recursive: true });
  const { writeRknot } = await import(path.join(repoRoot, 'dist/src/formats/rknot.js'));
  const { encodeFromF32 } = await import(path.join(repoRoot, 'dist/src/formats/quantize.js'));
  const cfg = {
    arch: 'llama', ...s, norm_eps: 1e-5, rope_theta: 10000, rope_dim: s.head_dim, rope_type: 'norm',
    tie_embeddings: false, qkv_bias: false, fused_qkv: false, bos_token_id: 1, eos_token_id: 2,
  };
  const D = s.dim, H = s.hidden_dim, V = s.vocab_size;
  const specs = [];
  const add = (name, shp, scale, matrix, offset = 0) => specs.push({ name, shape: shp, dtype: matrix ? dtype : 'f32', scale, offset });
  add('token_embd.weight', [D, V], 0.5, true);
  for (let l = 0; l < s.n_layers; l++) {
    const p = `blk.${l}.`;
    add(p + 'attn_norm.weight', [D], 0.2, false, 1);
    add(p + 'attn_q.weight', [D, D], 0.05, true);
    add(p + 'attn_k.weight', [D, D], 0.05, true);
    add(p + 'attn_v.weight', [D, D], 0.05, true);
    add(p + 'attn_output.weight', [D, D], 0.05, true);
    add(p + 'ffn_norm.weight', [D], 0.2, false, 1);
    add(p + 'ffn_gate.weight', [D, H], 0.05, true);
    add(p + 'ffn_up.weight', [D, H], 0.05, true);
    add(p + 'ffn_down.weight', [H, D], 0.03, true);
  }
  add('output_norm.weight', [D], 0.2, false, 1);
  add('output.weight', [D, V], 0.05, true);
  let seed = 0x9e3779b9;
  const next = () => { seed ^= seed << 13; seed >>>= 0; seed ^= seed >>> 17; seed ^= seed << 5; seed >>>= 0; return seed / 4294967296; };
  function* chunks(sp) {
    const n = sp.shape.reduce((a, b) => a * b, 1);
    const step = 1 << 20;
    for (let i = 0; i < n; i += step) {
      const v = new Float32Array(Math.min(step, n - i));
      for (let j = 0; j < v.length; j++) v[j] = sp.offset + (next() * 2 - 1) * sp.scale;
      yield encodeFromF32(sp.dtype, v).slice();
    }
  }
  const tmp = file + '.tmp' + process.pid;
  await writeRknot(tmp, { config: cfg, tokenizer: tokenizer(V), tensors: specs.map(({ name, dtype: dt, shape: sh }) => ({ name, dtype: dt, shape: sh })) },
    (spec) => chunks(specs.find((x) => x.name === spec.name)));
  fs.renameSync(tmp, file);
  return file;
}
