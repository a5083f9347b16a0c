// A hand-constructed (not random, not trained) one-layer model whose attention head 0 retrieves by content: the query
// token QUERY attends to the one position holding a key token (KEYS[i]) wherever it is in the context, copies the
// key's identity through V and the output projection, and the output head turns it into that key token. Head 1
// carries nothing (zero V): it stands for a head that may be compressed freely. So the greedy next token after
// QUERY is the planted key exactly when head 0 still sees the key's position: a retrieval test that separates KV
// caches keeping the whole context for head 0 from sinks + window caches (tests/retrieval.test.mjs).
import { generateModel } from './gen-model.mjs';

export const KEYS = Array.from({ length: 16 }, (_, i) => 100 + i);   // key token i: identity dim i
export const QUERY = 50;
export const FILLER = Array.from({ length: 64 }, (_, j) => 200 + j);
const D = 64, HD = 32, KEY_FLAG = 20, QUERY_FLAG = 21, BIAS = 63, Q_SCALE = 30, OUT_SCALE = 10;

function values(name, shape) {
  const [ne0, ne1] = shape;
  const v = new Float32Array(ne0 * (ne1 ?? 1));
  const set = (row, col, x) => { v[row * ne0 + col] = x; };
  if (name === 'token_embd.weight') {
    for (let t = 0; t < ne1; t++) {
      set(t, BIAS, 1);
      const k = KEYS.indexOf(t);
      if (k >= 0) { set(t, k, 1); set(t, KEY_FLAG, 1); } else if (t === QUERY) set(t, QUERY_FLAG, 1);
      else set(t, 32 + (t % 16), 1);   // fillers and the rest: one of dims 32..47
    }
    return v;
  }
  if (/norm\.weight$/.test(name)) return v.fill(1);
  if (name === 'blk.0.attn_q.weight') { set(2, QUERY_FLAG, Q_SCALE); return v; }   // head 0, dim 2 (dims 0, 1 rotate: rope_dim 2)
  if (name === 'blk.0.attn_k.weight') { set(2, KEY_FLAG, 1); return v; }
  if (name === 'blk.0.attn_v.weight') { for (let i = 0; i < KEYS.length; i++) set(2 + i, i, 1); return v; }   // head 0 dims 2..17 = key identity
  if (name === 'blk.0.attn_output.weight') { for (let i = 0; i < KEYS.length; i++) set(i, 2 + i, 1); return v; }  // back to dims 0..15
  if (name === 'output.weight') { KEYS.forEach((t, i) => set(t, i, OUT_SCALE)); return v; }
  if (/^blk\.0\.(attn_|ffn_)/.test(name)) return v;   // every other matrix zero: head 1 carries nothing, FFN adds 0
  return undefined;
}

/** Write the model (llama layout, 1 layer, 2 heads / 2 KV heads of 32, n_ctx `nCtx`) to a temp .rknot. */
export function retrievalModel(nCtx = 256) {
  return generateModel('llama', 'f32', 1, {
    shape: { dim: D, n_layers: 1, n_heads: 2, n_kv_heads: 2, head_dim: HD, hidden_dim: 64, vocab_size: 320, n_ctx: nCtx, rope_dim: 2 },
    values,
  });
}

/** A prompt of `len` filler tokens with KEYS[key] at `pos`, then QUERY (len + 1 tokens). */
export function retrievalPrompt(len, pos, key) {
  const p = Array.from({ length: len }, (_, i) => FILLER[(i * 7 + 3) % FILLER.length]);
  p[pos] = KEYS[key];
  p.push(QUERY);
  return p;
}
