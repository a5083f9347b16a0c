// Prefill attention, kernel level, one thread, CPU time: N query tokens of one KV head (f16 K and V, head_dim 96,
// ng query heads per KV head, causal) token by token (ae_attention_kv, as decode and the old prefill) vs in blocks
// of 4 tokens (ae_attention_kv_multi, the prefill path). Prints ms per (layer, KV head); each line twice.
//   node bench/attn-prefill.mjs [N=64] [ng=1] [head_dim=96] [tokens per block=4]
import v8 from 'node:v8';
v8.setFlagsFromString('--no-liftoff');
const { loadKernels, rng, T } = await import('./lib/kernels.mjs');
const k = await loadKernels({ pages: 4096 });
const X = k.x, REF = 1;
const r = rng(3);
const N = +(process.argv[2] ?? 64), ng = +(process.argv[3] ?? 1), hd = +(process.argv[4] ?? 96), TB = +(process.argv[5] ?? 4), kt = T.F16, vt = T.F16;
const rs = X.kt_kv_row_size(kt, hd);
const K = k.alloc(N * rs), V = k.alloc(N * rs);
for (let i = 0; i < N; i++) { const row = k.putF32(Array.from({ length: hd }, () => r.normal())); X.kt_from_float(kt, REF, row, K + i * rs, hd); X.kt_from_float(vt, REF, row, V + i * rs, hd); }
const q = k.putF32(Array.from({ length: N * ng * hd }, () => r.normal() * 0.3));
const out = k.alloc(N * ng * hd * 4), att = k.alloc(TB * ng * N * 4 + 64), qbuf = k.alloc((TB * ng + 1) * 256 * 4);
const runP = k.alloc(20, 4), lohi = k.alloc(8 * TB, 4);
function cpu() { const u = process.cpuUsage(); return (u.user + u.system) / 1000; }
function single() {
  for (let p = 0; p < N; p++) {
    new Int32Array(k.memory.buffer, runP, 5).set([K, V, kt, vt, p + 1]);
    X.kt_attention_kv(0, out + p * ng * hd * 4, hd, q + p * ng * hd * 4, hd, ng, runP, 1, hd, 0.1, 0, att, N, qbuf);
  }
}
function multi() {
  new Int32Array(k.memory.buffer, runP, 5).set([K, V, kt, vt, N]);
  for (let b0 = 0; b0 < N; b0 += TB) {
    const nq = Math.min(TB, N - b0), lh = new Int32Array(k.memory.buffer, lohi, 2 * nq);
    for (let j = 0; j < nq; j++) { lh[j] = 0; lh[nq + j] = b0 + j + 1; }
    new Int32Array(k.memory.buffer, runP, 5).set([K, V, kt, vt, b0 + nq]);
    X.kt_attention_kv_multi(0, out + b0 * ng * hd * 4, hd, ng * hd, q + b0 * ng * hd * 4, hd, ng * hd, ng, nq, lohi, runP, 1, hd, 0.1, 0, att, N, qbuf);
  }
}
for (const [name, fn] of [['single', single], ['multi', multi], ['single', single], ['multi', multi]]) {
  let n = 0; const t0 = cpu(); let t;
  do { fn(); n++; t = cpu(); } while (t - t0 < 400);
  console.log(name, N, 'tokens ng', ng, 'hd', hd, name === 'multi' ? `blocks of ${TB}` : '', ((t - t0) / n).toFixed(3), 'ms per layer-head');
}
