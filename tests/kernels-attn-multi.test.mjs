// Prefill attention over a typed KV cache, several query tokens of one KV head at once (ae_attention_kv_multi,
// src/kernels/simd128/attn_kv_simd128.c): == ae_attention_kv per token on the runs clipped to the token's
// positions, bit for bit (outputs and the softmaxed score rows it leaves in att), for causal masks, sliding
// windows (tokens starting at different positions), GQA groups, padded heads, soft-cap, runs of mixed dtypes
// split anywhere; and == its scalar reference (ae_attention_kv_multi_ref) within the bound the single-token test
// uses (dot order and exp differ between SIMD and reference). Run: node --test tests/kernels-attn-multi.test.mjs
import test from 'node:test';
import assert from 'node:assert/strict';
import { loadKernels, rng, T, TYPE_NAMES, DTYPE_ROWS, f32bits, sameBits, assertBitsEqual } from './helpers/kernels.mjs';

const k = await loadKernels({ pages: 2048 });
const X = k.x;
const REF = 1, SIMD = 0;
function withMark(fn) { const m = k.mark(); try { return fn(); } finally { k.release(m); } }
const blockOf = (t) => DTYPE_ROWS.find((d) => d.ggmlId === t).blockSize;
const padTo = (hd, t) => Math.ceil(hd / blockOf(t)) * blockOf(t);

function cacheRows(r, t, n, hd) {
  const hp = padTo(hd, t), rs = X.kt_kv_row_size(t, hd), p = k.alloc(n * rs);
  let maxAbs = 0;
  for (let i = 0; i < n; i++) withMark(() => {
    const row = new Float32Array(hp);
    for (let j = 0; j < hd; j++) { row[j] = r.normal(); maxAbs = Math.max(maxAbs, Math.abs(row[j])); }
    X.kt_from_float(t, REF, k.putF32(row), p + i * rs, hp);
  });
  return { p, rs, maxAbs };
}
function writeRuns(runs) {
  const p = k.alloc(20 * runs.length, 4);
  const v = new Int32Array(k.memory.buffer, p, 5 * runs.length);
  runs.forEach((r, i) => v.set([r.k, r.v, r.kt, r.vt, r.n], 5 * i));
  return p;
}
/** runs (JS objects) clipped to union positions [s, e) */
function clip(runs, s, e, hd) {
  const out = [];
  let u0 = 0;
  for (const r of runs) {
    const a = Math.max(s, u0), b = Math.min(e, u0 + r.n);
    if (a < b) out.push({ k: r.k + (a - u0) * X.kt_kv_row_size(r.kt, hd), v: r.v + (a - u0) * X.kt_kv_row_size(r.vt, hd), kt: r.kt, vt: r.vt, n: b - a });
    u0 += r.n;
  }
  return out;
}

test('attention_kv_multi == attention_kv per token (bit for bit) and == its reference within the bound', () => {
  const r = rng(91);
  // [K dtype, V dtype] of the first run, and of a second run (mixed-precision caches), or null
  const PAIRS = [[[T.F16, T.F16]], [[T.F32, T.F32]], [[T.Q8_0, T.Q8_0]], [[T.Q4_0, T.Q4_0]], [[T.F16, T.Q8_0]],
    [[T.Q8_0, T.Q8_0], [T.F16, T.F16]], [[T.F32, T.F16], [T.F16, T.F32]]];
  let checked = 0;
  for (const pair of PAIRS) for (const hd of [48, 64, 80, 96]) for (const ng of [1, 2, 3]) for (const nq of [1, 2, 3, 4]) for (const [base, window, softcap] of [[0, 0, 0], [9, 0, 30], [37, 0, 0], [37, 5, 0], [20, 22, 0]]) withMark(() => {
    const what = `${pair.map(([a, b]) => `K ${TYPE_NAMES[a]} V ${TYPE_NAMES[b]}`).join(' + ')} hd=${hd} ng=${ng} nq=${nq} base=${base} window=${window} softcap=${softcap}`;
    const total = base + nq;   // token b is at position base + b and sees positions [lo, base + b] (causal, window)
    const cut = pair.length > 1 ? Math.max(1, Math.floor(total / 2)) : total;
    const pieces = pair.length > 1 ? [cut, total - cut] : [total];
    let maxV = 0;
    const runs = pieces.map((n, i) => {
      const [kt, vt] = pair[i];
      const K = cacheRows(r, kt, n, hd), V = cacheRows(r, vt, n, hd);
      maxV = Math.max(maxV, V.maxAbs);
      return { k: K.p, v: V.p, kt, vt, n };
    }).filter((x) => x.n > 0);
    const lo = [], hi = [];
    for (let b = 0; b < nq; b++) { hi.push(base + b + 1); lo.push(window > 0 ? Math.max(0, base + b + 1 - window) : 0); }
    const qTok = ng * hd + 7, outTok = ng * hd + 3, scale = 1 / Math.sqrt(hd), attStride = total + 5;
    const q = k.putF32(Array.from({ length: nq * qTok }, () => r.normal() * 0.5));
    const outM = k.putF32(new Float32Array(nq * outTok + 16).fill(9)), outR = k.alloc(nq * outTok * 4), outS = k.alloc(ng * hd * 4);
    const attM = k.alloc(nq * ng * attStride * 4), attR = k.alloc(nq * ng * attStride * 4), attS = k.alloc(ng * attStride * 4);
    const qbuf = k.alloc((nq * ng + 1) * 256 * 4), lohi = k.alloc(8 * nq, 4);
    new Int32Array(k.memory.buffer, lohi, 2 * nq).set([...lo, ...hi]);
    const runP = writeRuns(runs);
    X.kt_attention_kv_multi(SIMD, outM, hd, outTok, q, hd, qTok, ng, nq, lohi, runP, runs.length, hd, scale, softcap, attM, attStride, qbuf);
    X.kt_attention_kv_multi(REF, outR, hd, outTok, q, hd, qTok, ng, nq, lohi, runP, runs.length, hd, scale, softcap, attR, attStride, qbuf);
    for (let b = 0; b < nq; b++) {
      const cr = clip(runs, lo[b], hi[b], hd), len = hi[b] - lo[b];
      X.kt_attention_kv(SIMD, outS, hd, q + b * qTok * 4, hd, ng, writeRuns(cr), cr.length, hd, scale, softcap, attS, attStride, qbuf);
      for (let j = 0; j < ng; j++) {
        assertBitsEqual(k.f32(outM + (b * outTok + j * hd) * 4, hd), k.f32(outS + j * hd * 4, hd), `${what} token ${b} head ${j}: output`);
        assertBitsEqual(k.f32(attM + ((b * ng + j) * attStride) * 4, len), k.f32(attS + j * attStride * 4, len), `${what} token ${b} head ${j}: scores`);
        const M = k.f32(outM + (b * outTok + j * hd) * 4, hd), R = k.f32(outR + (b * outTok + j * hd) * 4, hd);
        for (let d = 0; d < hd; d++) assert.ok(Math.abs(M[d] - R[d]) <= 2e-5 * maxV, `${what} token ${b} head ${j} d=${d}: SIMD ${M[d]} vs ref ${R[d]}`);
      }
      // nothing written between a token's heads and the next token's
      assert.ok(k.f32(outM + (b * outTok + ng * hd) * 4, 3).every((x) => x === 9), `${what}: wrote past token ${b}'s heads`);
      checked++;
    }
  });
  assert.ok(checked > 2000, `${checked} token checks`);
});

test('attention_kv_multi with inf / NaN halves in f16 V rows (the 4-row kernel redoes such column blocks exactly) == attention_kv per token, bit for bit (NaN for NaN)', () => {
  const r = rng(92);
  let nonFinite = 0;
  for (const hd of [64, 96]) for (const nq of [4, 5, 8]) for (const special of [0x7c00, 0xfc00, 0x7e00]) withMark(() => {
    const ng = 1, base = 11, total = base + nq;
    const K = cacheRows(r, T.F16, total, hd), V = cacheRows(r, T.F16, total, hd);
    const h = new Uint16Array(k.memory.buffer, V.p, total * hd);
    const at = r.int(0, total - 1) * hd + r.int(0, hd - 1);
    h[at] = special;
    const runs = [{ k: K.p, v: V.p, kt: T.F16, vt: T.F16, n: total }];
    const lo = [], hi = [];
    for (let b = 0; b < nq; b++) { hi.push(base + b + 1); lo.push(0); }
    const qTok = hd, outTok = hd, attStride = total + 3, scale = 1 / Math.sqrt(hd);
    const q = k.putF32(Array.from({ length: nq * qTok }, () => r.normal() * 0.5));
    const outM = k.alloc(nq * outTok * 4), outS = k.alloc(hd * 4), attM = k.alloc(nq * attStride * 4), attS = k.alloc(attStride * 4);
    const qbuf = k.alloc((nq + 1) * 256 * 4), lohi = k.alloc(8 * nq, 4);
    new Int32Array(k.memory.buffer, lohi, 2 * nq).set([...lo, ...hi]);
    X.kt_attention_kv_multi(SIMD, outM, hd, outTok, q, hd, qTok, ng, nq, lohi, writeRuns(runs), 1, hd, scale, 0, attM, attStride, qbuf);
    for (let b = 0; b < nq; b++) {
      const cr = clip(runs, lo[b], hi[b], hd);
      X.kt_attention_kv(SIMD, outS, hd, q + b * qTok * 4, hd, ng, writeRuns(cr), cr.length, hd, scale, 0, attS, attStride, qbuf);
      assertBitsEqual(k.f32(outM + b * outTok * 4, hd), k.f32(outS, hd), `hd=${hd} nq=${nq} special 0x${special.toString(16)} token ${b}`);
      if (k.f32(outS, hd).some((x) => !Number.isFinite(x))) nonFinite++;
    }
  });
  assert.ok(nonFinite > 10, `${nonFinite} token outputs reached by the special value`);
});
