#!/usr/bin/env node
// The f16 matvec (the kernels-test module's SIMD entry point) on rows with and without subnormal halves (below 2^-14),
// interleaved in one process: the fast half conversion (ae_h2f_fast) multiplies a subnormal float for such a half,
// which x86 runs through a microcode assist (docs/PERFORMANCE.md "Session 24").
//   node bench/f16-subnormal.mjs [--rows 1024] [--cols 2048] [--calls 200] [--rounds 3] [--plain]
// Weights uniform in +-0.04 (about 0.15% of their halves subnormal); the "normal" set moves |w| < 1e-4 to +-1e-4.
import v8 from 'node:v8';
import { args } from './lib/common.mjs';
import { loadKernels, T } from './lib/kernels.mjs';

v8.setFlagsFromString('--no-liftoff');
v8.setFlagsFromString('--experimental-wasm-relaxed-simd');
const { has, opt } = args();
const rows = Number(opt('--rows', 1024)), cols = Number(opt('--cols', 2048)), calls = Number(opt('--calls', 200)), rounds = Number(opt('--rounds', 3));
const k = await loadKernels({ pages: Math.ceil((rows * cols * 4 + cols * 4 + rows * 4) / 65536) + 64, relaxed: !has('--plain') });
const n = rows * cols;
const half = (x) => {   // f32 -> f16 bits (truncating the mantissa: any finite half will do here)
  const u = new Uint32Array(new Float32Array([x]).buffer)[0], s = (u >>> 16) & 0x8000, e = ((u >>> 23) & 255) - 112;
  return e <= 0 ? s | Math.round(Math.abs(x) * 2 ** 24) : s | (e << 10) | ((u & 0x7fffff) >>> 13);
};
function weights(keepSubnormal) {
  const w = k.alloc(n * 2), v = k.u16(w, n);
  let sub = 0;
  for (let i = 0; i < n; i++) {
    let x = (Math.random() * 2 - 1) * 0.04;
    if (!keepSubnormal && Math.abs(x) < 1e-4) x = x < 0 ? -1e-4 : 1e-4;
    v[i] = half(x);
    if ((v[i] & 0x7c00) === 0 && (v[i] & 0x3ff)) sub++;
  }
  return { w, sub };
}
const x = k.alloc(cols * 4), y = k.alloc(rows * 4);
k.f32(x, cols).set(Float32Array.from({ length: cols }, () => Math.random() - 0.5));
const sets = [['normal halves only', weights(false)], ['with subnormal halves', weights(true)]];
const best = sets.map(() => Infinity);
for (let r = 0; r < rounds; r++) sets.forEach(([, s], i) => {
  const t0 = performance.now();
  for (let c = 0; c < calls; c++) k.x.kt_matvec(T.F16, 0, s.w, cols, x, y, 0, rows);
  best[i] = Math.min(best[i], (performance.now() - t0) / calls);
});
process.stdout.write(`f16 matvec ${rows}x${cols}, ${has('--plain') ? 'plain' : 'relaxed'} build, best of ${rounds} rounds of ${calls} calls\n`);
sets.forEach(([name, s], i) => process.stdout.write(`  ${name.padEnd(22)} ${best[i].toFixed(3)} ms  (${s.sub} of ${n} halves subnormal)\n`));
