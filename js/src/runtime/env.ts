/** Environment probes and wasm module loading (Node and browsers). */
import { AetherError } from '../errors.js';

export const isNode = typeof process !== 'undefined' && !!process.versions?.node && typeof (globalThis as any).window === 'undefined'
  && typeof (globalThis as any).importScripts !== 'function';

// wasm/probes/simd.wat compiled by wat2wasm
const SIMD_PROBE = new Uint8Array([0, 97, 115, 109, 1, 0, 0, 0, 1, 5, 1, 96, 0, 1, 123, 3, 2, 1, 0, 10, 22, 1, 20, 0,
  253, 12, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 11]);
// wasm/probes/threads.wat compiled by wat2wasm --enable-threads
const THREADS_PROBE = new Uint8Array([0, 97, 115, 109, 1, 0, 0, 0, 1, 5, 1, 96, 0, 1, 127, 2, 9, 1, 1, 109, 1, 109, 2, 3, 1,
  1, 3, 2, 1, 0, 10, 12, 1, 10, 0, 65, 0, 65, 0, 254, 0, 2, 0, 11]);

// wasm/probes/relaxed.wat compiled by wat2wasm --enable-relaxed-simd: uses the two relaxed instructions of the
// kernels (i32x4.relaxed_dot_i8x16_i7x16_add_s, i16x8.relaxed_dot_i8x16_i7x16_s, f32x4.relaxed_madd); its export dot()
// must return 855 (982 from the i32 form, -127 from the i16 form).
const RELAXED_PROBE = new Uint8Array([0, 97, 115, 109, 1, 0, 0, 0, 1, 9, 2, 96, 0, 1, 127, 96, 0, 1, 123, 3, 3, 2, 0,
  1, 7, 7, 1, 3, 100, 111, 116, 0, 0, 10, 167, 1, 2, 105, 0, 253, 12, 1, 254, 3, 252, 5, 6, 7, 8, 128, 127, 0, 1, 2,
  3, 4, 5, 253, 12, 5, 6, 7, 8, 127, 127, 127, 127, 1, 2, 3, 4, 0, 0, 0, 0, 253, 12, 232, 3,
  ...new Array(14).fill(0), 253, 147, 2, 253, 27, 0, 253, 12, 128, 127, 5, 253, ...new Array(12).fill(0), 253, 12,
  127, 127, 2, ...new Array(13).fill(0), 253, 146, 2, 253, 24, 0, 106, 11, 59, 0, 253, 12, ...new Array(16).fill(0),
  253, 12, ...new Array(16).fill(0), 253, 12, ...new Array(16).fill(0), 253, 133, 2, 11]);

export interface Features {
  simd: boolean; threads: boolean; sharedArrayBuffer: boolean; crossOriginIsolated: boolean;
  /** Relaxed SIMD validates and computes right (Chrome >= 114; Node 20 only with --experimental-wasm-relaxed-simd --no-liftoff). */
  relaxedSimd: boolean;
}

/** Which build of the modules to use: 'relaxed' (<name>-relaxed.wasm), 'plain', or 'auto' (see resolveSimd). */
export type SimdMode = 'auto' | 'relaxed' | 'plain';
export const SIMD_MODES: readonly SimdMode[] = ['auto', 'relaxed', 'plain'];

/** Relaxed SIMD validates (the engine knows the instructions). */
export function relaxedSimdSupported(): boolean {
  try { return WebAssembly.validate(RELAXED_PROBE); } catch { return false; }
}

/**
 * Relaxed SIMD validates AND the probe's dot product is right when it runs. Node 20's V8 11.3 gets
 * i32x4.relaxed_dot_i8x16_i7x16_add_s wrong in its baseline compiler (Liftoff: the accumulator is dropped and the
 * products doubled; the optimising tier is right), so there relaxed SIMD is usable only with --no-liftoff
 * (which the aether CLI sets). The probe runs in the tier the kernels would start in.
 */
export function relaxedSimdWorks(): boolean {
  if (!relaxedSimdSupported()) return false;
  try {
    const inst = new WebAssembly.Instance(new WebAssembly.Module(RELAXED_PROBE));
    return (inst.exports.dot as () => number)() === 855;
  } catch { return false; }
}

/**
 * Whether 'auto' should prefer the relaxed build where it works: everywhere. The relaxed build gives the plain
 * build's bits for every dtype (relaxed integer dots only where exact: q4_0, q4_K, q6_K; q8_0, f32, f16 compile
 * their plain code there, which measured as fast or faster) and its q4_0 kernels with the load-time repack measured
 * ~1.5x the plain build's (docs/PERFORMANCE.md "Relaxed SIMD"). In Node 20 the probe passes only with
 * --experimental-wasm-relaxed-simd --no-liftoff (the aether CLI sets both); without them 'auto' is the plain build.
 */
function autoPrefersRelaxed(): boolean { return true; }

/**
 * The build to use for `mode`. 'relaxed' requires the probe to pass (else `unsupported`, naming the Node
 * flags); 'auto' takes the relaxed build where the probe passes and autoPrefersRelaxed() (docs/PERFORMANCE.md,
 * relaxed SIMD, has the measurements behind this default), the plain one elsewhere.
 */
export function resolveSimd(mode: SimdMode | undefined): 'relaxed' | 'plain' {
  const m = mode ?? 'auto';
  if (!SIMD_MODES.includes(m)) {
    throw new AetherError('invalid_argument', `simd: expected one of ${SIMD_MODES.join(', ')}, got ${JSON.stringify(mode)}`);
  }
  if (m === 'plain') return 'plain';
  const ok = relaxedSimdWorks();
  if (m === 'relaxed' && !ok) {
    const valid = relaxedSimdSupported();
    throw new AetherError('unsupported', 'simd: \'relaxed\' was asked for but ' + (valid
      ? 'this WebAssembly engine computes the relaxed i8 dot product wrongly in its baseline tier (V8 11.3 / Node 20 Liftoff)'
      : 'this WebAssembly engine does not validate relaxed SIMD') +
      (isNode ? ' (Node 20: run node with --experimental-wasm-relaxed-simd --no-liftoff, as the aether CLI does)' : ''));
  }
  return ok && (m === 'relaxed' || autoPrefersRelaxed()) ? 'relaxed' : 'plain';
}

export function probeFeatures(): Features {
  const simd = WebAssembly.validate(SIMD_PROBE);
  const sab = typeof SharedArrayBuffer !== 'undefined';
  const coi = isNode ? true : !!(globalThis as any).crossOriginIsolated;
  let threads = false;
  if (sab && coi) {
    try {
      threads = WebAssembly.validate(THREADS_PROBE) && new WebAssembly.Memory({ initial: 1, maximum: 1, shared: true }).buffer instanceof SharedArrayBuffer;
    } catch { threads = false; }
  }
  return { simd, threads, sharedArrayBuffer: sab, crossOriginIsolated: coi, relaxedSimd: relaxedSimdWorks() };
}

export function requireSimd(): void {
  if (!WebAssembly.validate(SIMD_PROBE)) {
    throw new AetherError('unsupported', 'this WebAssembly engine has no SIMD128 support, which Aether requires ' +
      '(Chrome/Edge >= 91, Firefox >= 89, Safari >= 16.4, Node >= 16.4)');
  }
}

/**
 * Node: compile wasm with the optimising tier only (V8 flags --no-liftoff --no-wasm-lazy-compilation, what the
 * aether CLI sets at start), before the first threaded module is compiled. Node 20's baseline compiler
 * (Liftoff, V8 11.3, x64) runs threaded code wrong once a thread blocks in memory.atomic.wait32: with blocking
 * waits 2 threads computed garbage (compressed FFN, 1 vs 2 threads) and a worker re-ran finished jobs (a
 * hang); the same code is right with --no-liftoff or with spinning only (src/core/pool.h, ae_wait32_once).
 * The flags stay set for the process (later compilations skip Liftoff too, as under the CLI).
 */
let topTierSet = false;
async function optimisingTierOnly(): Promise<void> {
  if (topTierSet) return;
  topTierSet = true;
  try {
    const v8 = await import('node:v8');
    v8.setFlagsFromString('--no-liftoff');
    v8.setFlagsFromString('--no-wasm-lazy-compilation');
  } catch { /* not Node's v8 module: nothing to do */ }
}

/** Base URL of the built modules (wasm/ at the package root). */
let wasmBase: URL | string = new URL('../../../wasm/', import.meta.url);
export function setWasmBaseUrl(url: URL | string): void { wasmBase = url; }

const compiled = new Map<string, Promise<WebAssembly.Module>>();

/** The file name of a module build. */
export function moduleFile(name: string, threaded: boolean, relaxed = false): string {
  return `${name}${threaded ? '' : '-st'}${relaxed ? '-relaxed' : ''}.wasm`;
}

/**
 * Compile (once per process) the module `name` ('core', 'ffn-fused', ...), threaded or single-thread,
 * plain or relaxed-SIMD build.
 */
export function compileModule(name: string, threaded: boolean, relaxed = false): Promise<WebAssembly.Module> {
  const file = moduleFile(name, threaded, relaxed);
  let p = compiled.get(file);
  if (!p) {
    p = (async () => {
      const url = new URL(file, wasmBase);
      let bytes: Uint8Array<ArrayBuffer>;
      try {
        if (isNode && url.protocol === 'file:') {
          const fs = await import('node:fs/promises');
          bytes = new Uint8Array(await fs.readFile(url));
        } else {
          const r = await fetch(url);
          if (!r.ok) throw new Error(`HTTP ${r.status}`);
          bytes = new Uint8Array(await r.arrayBuffer());
        }
      } catch (e) {
        throw new AetherError('wasm_error', `cannot read wasm module ${url.href}: ${(e as Error).message} (run 'npm run build:wasm')`);
      }
      if (threaded && isNode) await optimisingTierOnly();
      try {
        return await WebAssembly.compile(bytes);
      } catch (e) {
        throw new AetherError('wasm_error', `wasm module ${url.href} does not compile: ${(e as Error).message}`);
      }
    })();
    p.catch(() => compiled.delete(file));
    compiled.set(file, p);
  }
  return p;
}
