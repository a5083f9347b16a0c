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

export interface Features { simd: boolean; threads: boolean; sharedArrayBuffer: boolean; crossOriginIsolated: boolean }

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
  return { simd, threads, sharedArrayBuffer: sab, crossOriginIsolated: coi };
}

export function requireSimd(): void {
  if (!WebAssembly.validate(SIMD_PROBE)) {
    throw new AetherError('unsupported', 'this WebAssembly engine has no SIMD128 support, which Aether requires ' +
      '(Chrome/Edge >= 91, Firefox >= 89, Safari >= 16.4, Node >= 16.4)');
  }
}

/** Base URL of the built modules (wasm/ at the package root). */
let wasmBase: URL | string = new URL('../../../wasm/', import.meta.url);
export function setWasmBaseUrl(url: URL | string): void { wasmBase = url; }

const compiled = new Map<string, Promise<WebAssembly.Module>>();

/** Compile (once per process) the module `name` ('core', 'ffn-fused', ...), threaded or single-thread. */
export function compileModule(name: string, threaded: boolean): Promise<WebAssembly.Module> {
  const file = `${name}${threaded ? '' : '-st'}.wasm`;
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
