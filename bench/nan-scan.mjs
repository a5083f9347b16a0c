// CPU cost of the NaN / Inf scan of f32 / f16 weights the loader does while streaming (rknot-read.ts findNonFinite).
//   node bench/nan-scan.mjs
import { findNonFinite } from '../dist/src/formats/rknot-read.js';
const n = 8 << 20; const b = new Uint8Array(n * 4); const f = new Float32Array(b.buffer); for (let i = 0; i < n; i++) f[i] = Math.sin(i);
const h = new Uint8Array(n * 2);
for (let r = 0; r < 3; r++) {
  let c0 = process.cpuUsage(); findNonFinite('f32', b, 0, n); let c = process.cpuUsage(c0); const ms32 = (c.user + c.system) / 1000;
  c0 = process.cpuUsage(); findNonFinite('f16', h, 0, n); c = process.cpuUsage(c0); const ms16 = (c.user + c.system) / 1000;
  console.log(`f32 32 MiB: ${ms32.toFixed(1)} ms CPU (${(32 / 1024 / (ms32 / 1000)).toFixed(2)} GiB/s); f16 16 MiB: ${ms16.toFixed(1)} ms CPU (${(16 / 1024 / (ms16 / 1000)).toFixed(2)} GiB/s)`);
}
