// Scalar reference forward in plain JS (float64 accumulation), the specification the wasm forward is
// tested against on generated tiny models of each architecture. Weights are f32 arrays in GGUF
// order: a matrix with shape [ne0, ne1] has ne1 rows of ne0 values.

const f32 = Math.fround;
/** f32 -> nearest f16 value (round to nearest even), as a number. */
function toF16(x) {
  const b = new Float32Array([x]), u = new Uint32Array(b.buffer)[0];
  const h = f16bits(u);
  const s = h & 0x8000 ? -1 : 1, e = (h >> 10) & 31, m = h & 1023;
  return e === 0 ? s * m * 2 ** -24 : e === 31 ? (m ? NaN : s * Infinity) : s * (1 + m / 1024) * 2 ** (e - 15);
}
function f16bits(u) {
  const sign = (u >>> 16) & 0x8000; let e = (u >>> 23) & 255; let m = u & 0x7fffff;
  if (e === 255) return sign | 0x7c00 | (m ? 0x200 : 0);
  e = e - 127 + 15;
  if (e >= 31) return sign | 0x7c00;
  if (e <= 0) {
    if (e < -10) return sign;
    m |= 0x800000; const shift = 14 - e; const half = 1 << (shift - 1); const rest = m & ((1 << shift) - 1);
    let r = m >>> shift; if (rest > half || (rest === half && (r & 1))) r++; return sign | r;
  }
  const rest = m & 0x1fff; let r = (e << 10) | (m >>> 13);
  if (rest > 0x1000 || (rest === 0x1000 && (r & 1))) r++;
  return sign | r;
}
/** Activation row as ggml's quantize_row_q8_0 sees it: blocks of 32, d = amax/127 (stored f16), q = round(x/d). */
export function quantizeActQ8(x) {
  const y = new Float64Array(x.length);
  for (let b = 0; b < x.length; b += 32) {
    let amax = 0;
    for (let i = b; i < b + 32; i++) amax = Math.max(amax, Math.abs(f32(x[i])));
    const d = f32(amax / 127), id = d ? f32(1 / d) : 0, dh = toF16(d);
    for (let i = b; i < b + 32; i++) { const v = f32(f32(x[i]) * id); y[i] = Math.sign(v) * Math.round(Math.abs(v)) * dh; }
  }
  return y;
}

/** Activation row as ggml's quantize_row_q8_K sees it: blocks of 256, max = first value of largest
 * magnitude, iscale = -127 / max, q = min(127, nearest-even(iscale x)), x = q / iscale (f32 d). */
export function quantizeActQ8K(x) {
  const y = new Float64Array(x.length);
  for (let b = 0; b < x.length; b += 256) {
    let amax = 0, max = 0;
    for (let i = b; i < b + 256; i++) { const a = Math.abs(f32(x[i])); if (a > amax) { amax = a; max = f32(x[i]); } }
    if (!amax) continue;
    const is = f32(-127 / max), d = f32(1 / is);
    for (let i = b; i < b + 256; i++) {
      const v = f32(is * f32(x[i])), fl = Math.floor(v), r = v - fl;
      const q = Math.min(127, r > 0.5 || (r === 0.5 && fl % 2 !== 0) ? fl + 1 : fl);
      y[i] = q * d;
    }
  }
  return y;
}
/** q8_1 (activations of q4_1 / q5_1): q8_0's values, plus per block the stored s = fp16(sum(q) * d_f32) minus
 * the exact sum of the dequantised values (the kernel multiplies the weight block's min by s). */
export function quantizeActQ8_1(x) {
  const y = quantizeActQ8(x), corr = new Float64Array(x.length / 32);
  for (let b = 0; b < x.length; b += 32) {
    let amax = 0;
    for (let i = b; i < b + 32; i++) amax = Math.max(amax, Math.abs(f32(x[i])));
    const d = f32(amax / 127), id = d ? f32(1 / d) : 0;
    let sumq = 0, sx = 0;
    for (let i = b; i < b + 32; i++) { const v = f32(f32(x[i]) * id); sumq += Math.sign(v) * Math.round(Math.abs(v)); sx += y[i]; }
    corr[b / 32] = toF16(f32(sumq * d)) - sx;
  }
  return { y, corr };
}

/**
 * @param cfg .rknot-style config: {arch, dim, n_layers, n_heads, n_kv_heads, head_dim, hidden_dim, vocab_size, norm_eps,
 *        rope_theta, rope_dim, rope_type} and the optional architecture variants (js/src/formats/rknot.ts RknotConfig):
 *        ffn_act, embd_scale, attn_scale, attn_softcap, final_softcap, rope_scaling, sliding_window, swa_layers,
 *        rope_theta_swa. q/k norms and post norms follow from the tensors present in W.
 * @param W Map name -> Float32Array (GGUF names; Gemma norms already hold 1 + w, as llama.cpp's converter writes them)
 * @param opts.quantizedActs quantise activations to q8_0 before every weight matrix (what the wasm path
 *        does for q8_0/q4_0 weights)
 * @param opts.actOf per weight array (a value of W): its activation dtype ('f32', 'q8_0', 'q8_1', 'q8_K'),
 *        overriding quantizedActs; for 'q8_1', opts.minsOf(w) gives the weight's block mins (rows x blocks)
 * @param opts.nCtx runtime context (picks LongRoPE's long factors when > rope_scaling.original_context)
 * @param opts.kvDtype KV-cache dtype the wasm side uses ('f32' default here, 'f16', 'q8_0'): K and V are stored
 *        rounded to it (q8_0: per head, in blocks of 32 padded with zeros), and for q8_0 K each query head is
 *        quantised to q8_0 before its dot products (llama.cpp's cache_type_k semantics)
 *
 * Written from the model definitions (Hugging Face transformers / llama.cpp graphs), in float64:
 *   x = embd[token] * embd_scale
 *   per layer: h = rmsnorm(x) ; q, k, v (+ biases) ; q, k per-head rmsnorm (if attn_q_norm) ; RoPE with angle
 *   pos * freq_scale * theta^(-2i/rd) / ff[i] and cos/sin times attn_factor (SWA layers: rope_theta_swa, no scaling) ;
 *   scores q.k * attn_scale, soft-capped, over positions within the window ; softmax ; o = Wo a ; o = rmsnorm(o)
 *   (post_attention_norm) ; x += o ; f = rmsnorm(x) ; act(gate f) * up f ; d = down ; d = rmsnorm(d) (post_ffw_norm) ;
 *   x += d
 *   logits = out . rmsnorm(x), soft-capped.
 */
export function createRefModel(cfg, W, opts = {}) {
  const D = cfg.dim, hd = cfg.head_dim, nh = cfg.n_heads, nkv = cfg.n_kv_heads, H = cfg.hidden_dim;
  const qd = nh * hd, kvd = nkv * hd, rd = cfg.rope_dim ?? hd;
  const kvDtype = opts.kvDtype ?? 'f32';
  /** heads of hd values as the KV cache stores them (f32: as computed in f32; f16: rounded; q8_0: quantised, padded) */
  const kvRound = (x, heads = nkv) => {
    if (kvDtype === 'f32') return Float64Array.from(x, f32);
    if (kvDtype === 'f16') return Float64Array.from(x, (v) => toF16(f32(v)));
    if (kvDtype !== 'q8_0') throw new Error(`ref forward: kvDtype ${kvDtype}`);
    const hp = Math.ceil(hd / 32) * 32, y = new Float64Array(x.length);
    for (let h = 0; h < heads; h++) {
      const row = new Float64Array(hp);
      for (let i = 0; i < hd; i++) row[i] = x[h * hd + i];
      const qr = quantizeActQ8(row);
      for (let i = 0; i < hd; i++) y[h * hd + i] = qr[i];
    }
    return y;
  };
  const kcache = [], vcache = [];
  for (let l = 0; l < cfg.n_layers; l++) { kcache.push([]); vcache.push([]); }
  const get = (n) => { const t = W.get(n); if (!t) throw new Error(`ref: missing tensor ${n}`); return t; };
  const opt = (n) => W.get(n);
  const rs = cfg.rope_scaling;
  const nCtx = opts.nCtx ?? cfg.n_ctx;
  const ff = rs?.type === 'llama3' ? get('rope_freqs.weight')
    : rs?.type === 'longrope' ? get(nCtx > rs.original_context ? 'rope_factors_long.weight' : 'rope_factors_short.weight') : null;
  const mscale = rs?.type === 'longrope' ? rs.attn_factor : 1;
  const freqScale = rs?.type === 'linear' ? 1 / rs.factor : 1;
  const attnScale = cfg.attn_scale ?? 1 / Math.sqrt(hd);
  const isSwa = (l) => !!(cfg.swa_layers?.[l] && cfg.sliding_window);

  function matvec(w, x, rows, cols) {
    const a = opts.actOf ? opts.actOf(w) : opts.quantizedActs ? 'q8_0' : 'f32';
    let corr = null;
    if (a === 'q8_0') x = quantizeActQ8(x);
    else if (a === 'q8_K') x = quantizeActQ8K(x);
    else if (a === 'q8_1') ({ y: x, corr } = quantizeActQ8_1(x));
    const y = new Float64Array(rows);
    for (let r = 0; r < rows; r++) { let s = 0; const o = r * cols; for (let c = 0; c < cols; c++) s += w[o + c] * x[c]; y[r] = s; }
    if (corr) {
      const mins = opts.minsOf(w), nb = cols / 32;
      for (let r = 0; r < rows; r++) for (let b = 0; b < nb; b++) y[r] += mins[r * nb + b] * corr[b];
    }
    return y;
  }
  function rmsnorm(x, w, off = 0, n = x.length) {
    let ss = 0; for (let i = 0; i < n; i++) ss += x[off + i] * x[off + i];
    const inv = 1 / Math.sqrt(ss / n + cfg.norm_eps);
    for (let i = 0; i < n; i++) x[off + i] = x[off + i] * inv * w[i];
    return x;
  }
  function rope(v, nheads, pos, swa) {
    const theta = swa && cfg.rope_theta_swa !== undefined ? cfg.rope_theta_swa : cfg.rope_theta;
    const scale = swa && cfg.rope_theta_swa !== undefined ? 1 : freqScale;
    for (let h = 0; h < nheads; h++) {
      const o = h * hd;
      for (let i = 0; i < rd / 2; i++) {
        const freq = Math.pow(theta, -(2 * i) / rd) / (ff ? ff[i] : 1) * scale;
        const a = pos * freq, c = Math.cos(a) * mscale, s = Math.sin(a) * mscale;
        const i0 = cfg.rope_type === 'neox' ? o + i : o + 2 * i;
        const i1 = cfg.rope_type === 'neox' ? o + i + rd / 2 : o + 2 * i + 1;
        const x0 = v[i0], x1 = v[i1];
        v[i0] = x0 * c - x1 * s; v[i1] = x0 * s + x1 * c;
      }
    }
  }
  const silu = (v) => v / (1 + Math.exp(-v));
  const gelu = (v) => 0.5 * v * (1 + Math.tanh(Math.sqrt(2 / Math.PI) * (v + 0.044715 * v * v * v)));
  const act = cfg.ffn_act === 'gelu_tanh' ? gelu : silu;
  const cap = (v, c) => (c ? c * Math.tanh(v / c) : v);

  /** Feed one token at position pos; returns the logits (Float64Array). */
  function step(token, pos) {
    let x = Float64Array.from(get('token_embd.weight').subarray(token * D, token * D + D));
    if (cfg.embd_scale !== undefined) for (let i = 0; i < D; i++) x[i] *= cfg.embd_scale;
    for (let l = 0; l < cfg.n_layers; l++) {
      const p = `blk.${l}.`;
      const xb = rmsnorm(Float64Array.from(x), get(p + 'attn_norm.weight'));
      let q, k, v;
      if (opt(p + 'attn_qkv.weight')) {
        const qkv = matvec(get(p + 'attn_qkv.weight'), xb, qd + 2 * kvd, D);
        q = qkv.slice(0, qd); k = qkv.slice(qd, qd + kvd); v = qkv.slice(qd + kvd);
      } else {
        q = matvec(get(p + 'attn_q.weight'), xb, qd, D);
        k = matvec(get(p + 'attn_k.weight'), xb, kvd, D);
        v = matvec(get(p + 'attn_v.weight'), xb, kvd, D);
      }
      const bq = opt(p + 'attn_q.bias'), bk = opt(p + 'attn_k.bias'), bv = opt(p + 'attn_v.bias');
      if (bq) for (let i = 0; i < qd; i++) q[i] += bq[i];
      if (bk) for (let i = 0; i < kvd; i++) k[i] += bk[i];
      if (bv) for (let i = 0; i < kvd; i++) v[i] += bv[i];
      const qn = opt(p + 'attn_q_norm.weight'), kn = opt(p + 'attn_k_norm.weight');
      if (qn) for (let h = 0; h < nh; h++) rmsnorm(q, qn, h * hd, hd);
      if (kn) for (let h = 0; h < nkv; h++) rmsnorm(k, kn, h * hd, hd);
      const swa = isSwa(l);
      rope(q, nh, pos, swa); rope(k, nkv, pos, swa);
      kcache[l][pos] = kvRound(k); vcache[l][pos] = kvRound(v);
      const t0 = swa ? Math.max(0, pos - cfg.sliding_window + 1) : 0;
      const att = new Float64Array(qd);
      const group = nh / nkv;
      const qk = kvDtype === 'q8_0' ? kvRound(q, nh) : q;
      for (let h = 0; h < nh; h++) {
        const g = Math.floor(h / group);
        const scores = new Float64Array(pos + 1);
        let mx = -Infinity;
        for (let t = t0; t <= pos; t++) {
          let s = 0; for (let i = 0; i < hd; i++) s += qk[h * hd + i] * kcache[l][t][g * hd + i];
          scores[t] = cap(s * attnScale, cfg.attn_softcap); if (scores[t] > mx) mx = scores[t];
        }
        let sum = 0; for (let t = t0; t <= pos; t++) { scores[t] = Math.exp(scores[t] - mx); sum += scores[t]; }
        for (let t = t0; t <= pos; t++) {
          const a = scores[t] / sum;
          for (let i = 0; i < hd; i++) att[h * hd + i] += a * vcache[l][t][g * hd + i];
        }
      }
      const o = matvec(get(p + 'attn_output.weight'), att, D, qd);
      const pan = opt(p + 'post_attention_norm.weight');
      if (pan) rmsnorm(o, pan);
      for (let i = 0; i < D; i++) x[i] += o[i];
      const xf = rmsnorm(Float64Array.from(x), get(p + 'ffn_norm.weight'));
      const g = matvec(get(p + 'ffn_gate.weight'), xf, H, D);
      const u = matvec(get(p + 'ffn_up.weight'), xf, H, D);
      const hb = Float64Array.from(g, (gv, i) => act(gv) * u[i]);
      const d = matvec(get(p + 'ffn_down.weight'), hb, D, H);
      const pfn = opt(p + 'post_ffw_norm.weight');
      if (pfn) rmsnorm(d, pfn);
      for (let i = 0; i < D; i++) x[i] += d[i];
    }
    const xn = rmsnorm(Float64Array.from(x), get('output_norm.weight'));
    lastHidden = xn;
    const out = opt('output.weight') ?? get('token_embd.weight');
    const logits = matvec(out, xn, cfg.vocab_size, D);
    if (cfg.final_softcap) for (let i = 0; i < logits.length; i++) logits[i] = cap(logits[i], cfg.final_softcap);
    return logits;
  }
  let lastHidden = null;
  /** step() also keeps the final-normed hidden state of its token (the output head's input). */
  return { step, hidden: () => lastHidden };
}
