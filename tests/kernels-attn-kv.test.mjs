// Attention over a typed KV cache (src/kernels/simd128/attn_kv_simd128.c vs src/kernels/ref/attn_kv_ref.c) through
// wasm/kernels-test.wasm: the weighted V sums bit for bit, the whole attention (scores through the registry's row
// kernels, softmax, V sums) SIMD vs reference within a bound, the reference against a float64 JS computation over
// the dequantised cache, GQA groups, heads padded to whole blocks (head_dim 48 in q8_0), runs split in pieces.
import test from 'node:test';
import assert from 'node:assert/strict';
import { loadKernels, rng, T, TYPE_NAMES, DTYPE_ROWS, f32bits, sameBits, assertBitsEqual } from './helpers/kernels.mjs';

const k = await loadKernels({ pages: 2048 });
const X = k.x;
const REF = 1, SIMD = 0;
function withMark(fn) { const m = k.mark(); try { return fn(); } finally { k.release(m); } }
const KV_TYPES = [T.F32, T.F16, T.Q8_0, T.Q4_0];
const blockOf = (t) => DTYPE_ROWS.find((d) => d.ggmlId === t).blockSize;
const padTo = (hd, t) => Math.ceil(hd / blockOf(t)) * blockOf(t);

/** n rows of hd random values (scale s) stored as dtype t, each padded with zeros to whole blocks; returns ptr + values. */
function cacheRows(r, t, n, hd, s = 1) {
  const hp = padTo(hd, t), rs = X.kt_kv_row_size(t, hd);
  assert.equal(rs, k.rowSize(t, hp));
  const p = k.alloc(n * rs), vals = [];
  for (let i = 0; i < n; i++) withMark(() => {
    const row = new Float32Array(hp);
    for (let j = 0; j < hd; j++) row[j] = r.normal() * s;
    X.kt_from_float(t, REF, k.putF32(row), p + i * rs, hp);
  });
  // the values as stored (dequantised by the reference)
  for (let i = 0; i < n; i++) withMark(() => {
    const y = k.alloc(hp * 4);
    X.kt_to_float(t, REF, p + i * rs, y, hp);
    vals.push(Float64Array.from(k.f32(y, hd)));
  });
  return { p, rs, vals };
}
function writeRuns(runs) {
  const sz = X.kt_kv_run_size();
  assert.equal(sz, 20);
  const p = k.alloc(sz * runs.length, 4);
  const v = new Int32Array(k.memory.buffer, p, 5 * runs.length);
  runs.forEach((r, i) => v.set([r.k, r.v, r.kt, r.vt, r.n], 5 * i));
  return p;
}

test('attn_accum: the dtypes that have it; KV dtype pairs the cache accepts', () => {
  const have = DTYPE_ROWS.filter((d) => X.kt_attn_accum_supported(d.ggmlId)).map((d) => d.ggmlId);
  assert.deepEqual(have.sort((a, b) => a - b), [...KV_TYPES].sort((a, b) => a - b));
  for (const kt of KV_TYPES) for (const vt of KV_TYPES) assert.equal(X.kt_kv_types_ok(kt, vt, 48), 1);
  assert.equal(X.kt_kv_types_ok(T.F16, T.Q4_K, 64), 0, 'V needs attn_accum');
  assert.equal(X.kt_kv_types_ok(T.Q8_K, T.F16, 64), 0, 'K must be a weight dtype');
  assert.equal(X.kt_kv_row_size(T.Q8_0, 48), 68, 'head_dim 48 in q8_0: two blocks');
  assert.equal(X.kt_kv_row_size(T.F16, 48), 96);
});

test('attn_accum: SIMD == reference bit for bit, any head_dim (padded blocks), run split anywhere', () => {
  const r = rng(81);
  for (const t of KV_TYPES) for (const hd of [2, 6, 8, 13, 16, 48, 64, 80, 96, 128, 256]) for (const n of [1, 3, 17, 130]) withMark(() => {
    const V = cacheRows(r, t, n, hd);
    const att = k.putF32(Array.from({ length: n }, () => r.next()));
    const o0 = Float32Array.from({ length: hd }, () => r.normal());
    const os = k.putF32(o0), or = k.putF32(o0), o2 = k.putF32(o0);
    const guard = k.putF32(new Float32Array(40).fill(7));   // right after the outputs: must stay untouched
    X.kt_attn_accum(SIMD, t, V.p, n, hd, att, os);
    X.kt_attn_accum(REF, t, V.p, n, hd, att, or);
    const what = `${TYPE_NAMES[t]} hd=${hd} n=${n}`;
    assertBitsEqual(k.f32(os, hd), k.f32(or, hd), what);
    const cut = Math.floor(n / 3);
    X.kt_attn_accum(SIMD, t, V.p, cut, hd, att, o2);
    X.kt_attn_accum(SIMD, t, V.p + cut * V.rs, n - cut, hd, att + 4 * cut, o2);
    assertBitsEqual(k.f32(o2, hd), k.f32(os, hd), `${what} split at ${cut}`);
    assert.ok(k.f32(guard, 40).every((x) => x === 7), `${what}: wrote past head_dim`);
    // and it is the weighted sum (float64 check)
    const a = k.f32(att, n), out = k.f32(os, hd);
    for (let d = 0; d < hd; d++) {
      let e = o0[d], mag = Math.abs(o0[d]);
      for (let i = 0; i < n; i++) { e += a[i] * V.vals[i][d]; mag += Math.abs(a[i] * V.vals[i][d]); }
      assert.ok(Math.abs(out[d] - e) <= (n + 2) * 2 ** -23 * mag + 1e-30, `${what} d=${d}: ${out[d]} vs ${e}`);
    }
  });
});

test('attn_accum f16: every kind of half (subnormal, zero, inf, NaN) in some V rows: SIMD (fast conversion, redone exactly for a column block that saw an inf / NaN) == reference bit for bit (NaN for NaN)', () => {
  const r = rng(82);
  const SPECIAL = [0x0000, 0x8000, 0x0001, 0x83ff, 0x03ff, 0x0400, 0x7bff, 0xfbff, 0x7c00, 0xfc00, 0x7e00, 0xfd01];
  let specials = 0;
  for (const hd of [8, 13, 16, 24, 96, 128]) for (const n of [1, 5, 33, 150]) for (const mode of ['finite', 'inf', 'nan', 'mixed']) withMark(() => {
    const h = new Uint16Array(n * hd);
    for (let i = 0; i < h.length; i++) {
      h[i] = r.int(0, 0x7bff) | (r.next() < 0.5 ? 0x8000 : 0);   // finite halves, subnormals included
      if (r.next() < 0.05) h[i] = SPECIAL[r.int(0, 7)];             // zeros, subnormals, extremes
    }
    if (mode !== 'finite') {
      const at = r.int(0, h.length - 1);
      h[at] = mode === 'inf' ? SPECIAL[8 + r.int(0, 1)] : mode === 'nan' ? SPECIAL[10 + r.int(0, 1)] : SPECIAL[8 + r.int(0, 3)];
      if (mode === 'mixed') h[r.int(0, h.length - 1)] = SPECIAL[10];
      specials++;
    }
    const V = k.alloc(h.length * 2);
    new Uint16Array(k.memory.buffer, V, h.length).set(h);
    const att = k.putF32(Array.from({ length: n }, () => r.next() * 1e-3));
    const o0 = Float32Array.from({ length: hd }, () => r.normal());
    const os = k.putF32(o0), or = k.putF32(o0);
    X.kt_attn_accum(SIMD, T.F16, V, n, hd, att, os);
    X.kt_attn_accum(REF, T.F16, V, n, hd, att, or);
    assertBitsEqual(k.f32(os, hd), k.f32(or, hd), `f16 hd=${hd} n=${n} ${mode}`);
    if (mode !== 'finite') assert.ok(k.f32(os, hd).some((x) => !Number.isFinite(x)), `${mode}: the special value reached the output`);
  });
  assert.ok(specials >= 50);
});

/** float64 attention of ng query heads over the stored cache (q quantised as K's vec_dot_type when that is not f32). */
function attentionF64(q, hd, ng, K, V, n, scale, softcap, kt) {
  const qt = DTYPE_ROWS.find((d) => d.ggmlId === kt).act;
  const out = [];
  for (let j = 0; j < ng; j++) {
    let qj = Array.from(q.subarray(j * hd, (j + 1) * hd));
    if (qt !== 'f32') withMark(() => {   // q as the kernels see it: quantised to q8_0 blocks (padded), dequantised
      const hp = padTo(hd, T.Q8_0), row = new Float32Array(hp); row.set(qj);
      const qq = k.alloc(k.rowSize(T.Q8_0, hp)), y = k.alloc(hp * 4);
      X.kt_from_float(T.Q8_0, REF, k.putF32(row), qq, hp); X.kt_to_float(T.Q8_0, REF, qq, y, hp);
      qj = Array.from(k.f32(y, hd));
    });
    let s = K.vals.slice(0, n).map((kr) => kr.reduce((acc, x, i) => acc + x * qj[i], 0) * scale);
    if (softcap > 0) s = s.map((x) => softcap * Math.tanh(x / softcap));
    const mx = Math.max(...s), e = s.map((x) => Math.exp(x - mx)), z = e.reduce((a, b) => a + b, 0);
    const p = e.map((x) => x / z);
    out.push(Array.from({ length: hd }, (_, d) => p.reduce((acc, pi, i) => acc + pi * V.vals[i][d], 0)));
  }
  return out;
}

test('attention_kv: SIMD vs reference vs float64, GQA groups, padded heads, soft-cap, runs split', () => {
  const r = rng(82);
  const pairs = [[T.F32, T.F32], [T.F16, T.F16], [T.Q8_0, T.Q8_0], [T.Q4_0, T.Q4_0], [T.F16, T.Q8_0], [T.Q8_0, T.F16]];
  for (const [kt, vt] of pairs) for (const hd of [48, 64, 96]) for (const ng of [1, 4]) for (const n of [1, 7, 300]) for (const softcap of [0, 50]) withMark(() => {
    const what = `K ${TYPE_NAMES[kt]} V ${TYPE_NAMES[vt]} hd=${hd} ng=${ng} n=${n} softcap=${softcap}`;
    const K = cacheRows(r, kt, n, hd), V = cacheRows(r, vt, n, hd);
    const qs = hd + 8;   // query heads with a gap between them (the forward's q_stride is head_dim; any works)
    const qv = new Float32Array(ng * qs);
    for (let i = 0; i < qv.length; i++) qv[i] = r.normal() * 0.5;
    const q = k.putF32(qv), scale = 1 / Math.sqrt(hd), attStride = n + 5;
    const one = writeRuns([{ k: K.p, v: V.p, kt, vt, n }]);
    const cut = Math.max(0, n - 3);
    const two = writeRuns([{ k: K.p, v: V.p, kt, vt, n: cut }, { k: K.p + cut * K.rs, v: V.p + cut * V.rs, kt, vt, n: n - cut }]);
    const os = k.alloc(ng * hd * 4), or = k.alloc(ng * hd * 4), o2 = k.alloc(ng * hd * 4);
    const att = k.alloc(ng * attStride * 4), qbuf = k.alloc((ng + 1) * 256 * 4);
    X.kt_attention_kv(SIMD, os, hd, q, qs, ng, one, 1, hd, scale, softcap, att, attStride, qbuf);
    X.kt_attention_kv(REF, or, hd, q, qs, ng, one, 1, hd, scale, softcap, att, attStride, qbuf);
    X.kt_attention_kv(SIMD, o2, hd, q, qs, ng, two, 2, hd, scale, softcap, att, attStride, qbuf);
    assertBitsEqual(k.f32(o2, ng * hd), k.f32(os, ng * hd), `${what}: two runs == one run`);
    const qd = new Float32Array(ng * hd);
    for (let j = 0; j < ng; j++) qd.set(qv.subarray(j * qs, j * qs + hd), j * hd);
    const want = attentionF64(qd, hd, ng, K, V, n, scale, softcap, kt);
    const maxV = Math.max(...V.vals.flatMap((row) => Array.from(row, Math.abs)));
    const S = k.f32(os, ng * hd), R = k.f32(or, ng * hd);
    for (let j = 0; j < ng; j++) for (let d = 0; d < hd; d++) {
      const i = j * hd + d;
      // SIMD and reference differ in dot order and exp (a few ulp of each score); both are float32 computations
      // of the float64 value
      assert.ok(Math.abs(S[i] - R[i]) <= 2e-5 * maxV, `${what} [${j},${d}] SIMD ${S[i]} vs ref ${R[i]}`);
      assert.ok(Math.abs(R[i] - want[j][d]) <= 2e-5 * maxV, `${what} [${j},${d}] ref ${R[i]} vs float64 ${want[j][d]}`);
    }
  });
});

test('attention_kv f16: a GQA group at once (K and V converted to floats in blocks, V 4 heads jointly) == head by head, bit for bit; finite, inf and NaN halves, runs of several blocks', () => {
  const r = rng(93);
  let specials = 0;
  for (const hd of [13, 48, 64, 96, 128]) for (const ng of [2, 3, 4, 5, 7]) for (const n of [1, 70, 300]) for (const mode of ['finite', 'k-inf', 'k-nan', 'v-inf', 'v-nan']) withMark(() => {
    const what = `hd=${hd} ng=${ng} n=${n} ${mode}`;
    const K = cacheRows(r, T.F16, n, hd), V = cacheRows(r, T.F16, n, hd);
    if (mode !== 'finite' && n > 1) {   // one special half somewhere after the first block of rows
      const C = mode[0] === 'k' ? K : V, row = r.int(Math.min(n - 1, 65), n - 1), d = r.int(0, hd - 1);
      new Uint16Array(k.memory.buffer, C.p + row * C.rs, hd)[d] = mode.endsWith('inf') ? 0xfc00 : 0x7e01;
      specials++;
    }
    const qv = new Float32Array(ng * hd);
    for (let i = 0; i < qv.length; i++) qv[i] = r.normal() * 0.5;
    const q = k.putF32(qv), scale = 1 / Math.sqrt(hd), attStride = n + 3;
    const cut = Math.floor(n / 2);
    const runs = writeRuns([{ k: K.p, v: V.p, kt: T.F16, vt: T.F16, n: cut }, { k: K.p + cut * K.rs, v: V.p + cut * V.rs, kt: T.F16, vt: T.F16, n: n - cut }]);
    const att = k.alloc(ng * attStride * 4), qbuf = k.alloc((ng + 1) * 256 * 4);
    const og = k.alloc(ng * hd * 4), oh = k.alloc(ng * hd * 4);
    X.kt_attention_kv(SIMD, og, hd, q, hd, ng, runs, 2, hd, scale, 0, att, attStride, qbuf);
    for (let j = 0; j < ng; j++) X.kt_attention_kv(SIMD, oh + j * hd * 4, hd, q + j * hd * 4, hd, 1, runs, 2, hd, scale, 0, att, attStride, qbuf);
    assertBitsEqual(k.f32(og, ng * hd), k.f32(oh, ng * hd), what);
    // an inf key gives a score of +-inf (a NaN row, or a weight of 0); NaN, and inf values, reach the output
    if (mode !== 'finite' && mode !== 'k-inf' && n > 1) assert.ok(k.f32(og, ng * hd).some((x) => !Number.isFinite(x)), `${what}: the special half reached the output`);
  });
  assert.ok(specials >= 200);
});

test('attention_kv over a local head\'s storage (sink rows + a wrapped ring in another buffer) == the same rows contiguous, bit for bit (SIMD and reference, every KV dtype)', () => {
  const r = rng(91);
  const S = 4, W = 9, CAP = 13;   // sinks, window, ring capacity (window + max_batch)
  for (const t of KV_TYPES) for (const hd of [48, 64]) for (const ng of [1, 3]) for (const n of [S + W + 1, 40, 77]) withMark(() => {
    const what = `${TYPE_NAMES[t]} hd=${hd} ng=${ng} n=${n}`;
    const K = cacheRows(r, t, n, hd), V = cacheRows(r, t, n, hd);
    const pos = [...Array(S).keys(), ...Array.from({ length: W }, (_, i) => n - W + i)];   // what a local head sees
    const mem = () => new Uint8Array(k.memory.buffer);
    const copyRows = (src, rows, dst, at) => rows.forEach((p, i) => mem().copyWithin(dst + at(i) * src.rs, src.p + p * src.rs, src.p + (p + 1) * src.rs));
    // contiguous: the visible positions' rows one after the other
    const ck = k.alloc(pos.length * K.rs), cv = k.alloc(pos.length * V.rs);
    copyRows(K, pos, ck, (i) => i); copyRows(V, pos, cv, (i) => i);
    // local storage: sinks in their own rows, window positions p at ring row p % CAP
    const sk = k.alloc(S * K.rs), sv = k.alloc(S * V.rs), rk = k.alloc(CAP * K.rs), rv = k.alloc(CAP * V.rs);
    copyRows(K, pos.slice(0, S), sk, (i) => i); copyRows(V, pos.slice(0, S), sv, (i) => i);
    const win = pos.slice(S);
    copyRows(K, win, rk, (i) => win[i] % CAP); copyRows(V, win, rv, (i) => win[i] % CAP);
    const runs = [{ k: sk, v: sv, kt: t, vt: t, n: S }];
    for (let a = win[0]; a < n;) {   // the ring's one or two pieces, as kv_runs makes them
      const row = a % CAP, m = Math.min(n - a, CAP - row);
      runs.push({ k: rk + row * K.rs, v: rv + row * V.rs, kt: t, vt: t, n: m });
      a += m;
    }
    const one = writeRuns([{ k: ck, v: cv, kt: t, vt: t, n: pos.length }]), split = writeRuns(runs);
    const qv = new Float32Array(ng * hd);
    for (let i = 0; i < qv.length; i++) qv[i] = r.normal() * 0.5;
    const q = k.putF32(qv), scale = 1 / Math.sqrt(hd), attStride = n + 5;
    const att = k.alloc(ng * attStride * 4), qbuf = k.alloc((ng + 1) * 256 * 4);
    for (const impl of [SIMD, REF]) {
      const oa = k.alloc(ng * hd * 4), ob = k.alloc(ng * hd * 4);
      X.kt_attention_kv(impl, oa, hd, q, hd, ng, one, 1, hd, scale, 0, att, attStride, qbuf);
      X.kt_attention_kv(impl, ob, hd, q, hd, ng, split, runs.length, hd, scale, 0, att, attStride, qbuf);
      assertBitsEqual(k.f32(ob, ng * hd), k.f32(oa, ng * hd), `${what} ${impl === SIMD ? 'SIMD' : 'reference'}: ${runs.length} runs == one`);
    }
  });
});

test('attn_accum f16: weights the prescaled path cannot take (|att| >= 2^16) and odd ones it takes (inf, NaN, subnormal, negative): SIMD == reference bit for bit (NaN for NaN)', () => {
  const r = rng(83);
  const odd = [65536, -65536, 65535.99, 1e30, -Infinity, Infinity, NaN, 1e-40, -3e-39, 0, -0, 2 ** -149];
  for (const hd of [8, 16, 40, 96]) for (const n of [1, 6, 37]) for (const v of odd) withMark(() => {
    const V = cacheRows(r, T.F16, n, hd);
    const a = Array.from({ length: n }, () => r.next() * 2 - 1);
    a[r.int(0, n - 1)] = v;
    const att = k.putF32(a);
    const o0 = Float32Array.from({ length: hd }, () => r.normal());
    const os = k.putF32(o0), or = k.putF32(o0);
    X.kt_attn_accum(SIMD, T.F16, V.p, n, hd, att, os);
    X.kt_attn_accum(REF, T.F16, V.p, n, hd, att, or);
    const s = k.f32(os, hd), e = k.f32(or, hd);
    for (let d = 0; d < hd; d++) {
      if (Number.isNaN(e[d])) assert.ok(Number.isNaN(s[d]), `att ${v} hd=${hd} n=${n} d=${d}: ${s[d]} vs NaN`);
      else assert.ok(Object.is(s[d], e[d]), `att ${v} hd=${hd} n=${n} d=${d}: ${s[d]} vs ${e[d]}`);
    }
  });
});
