/** The one WebAssembly.Memory every module imports, and a bump allocator over it. */
import { AetherError } from '../errors.js';
import { HEAP_BASE, PAGE } from './abi.js';

export const MAX_PAGES = 65536; // 4 GiB, the wasm32 limit

export class Heap {
  readonly memory: WebAssembly.Memory;
  readonly shared: boolean;
  private top = HEAP_BASE;

  constructor(shared: boolean, initialBytes = 16 << 20) {
    this.shared = shared;
    const initial = Math.ceil(Math.max(initialBytes, HEAP_BASE + PAGE) / PAGE);
    try {
      this.memory = new WebAssembly.Memory({ initial, maximum: MAX_PAGES, shared } as WebAssembly.MemoryDescriptor);
    } catch (e) {
      throw new AetherError('wasm_error', `cannot create a ${shared ? 'shared ' : ''}WebAssembly.Memory of ${initial} pages: ${(e as Error).message}`);
    }
  }

  get used(): number { return this.top; }

  /** Reserve `bytes` aligned to `align`; grows the memory as needed. Returns the byte offset. */
  alloc(bytes: number, align = 64): number {
    if (!Number.isSafeInteger(bytes) || bytes < 0) throw new AetherError('invalid_argument', `cannot allocate ${bytes} bytes`);
    const start = Math.ceil(this.top / align) * align;
    const end = start + bytes;
    if (!Number.isSafeInteger(end) || end > MAX_PAGES * PAGE) {
      throw new AetherError('out_of_memory', `out of wasm memory: need ${end} bytes, the wasm32 limit is 4 GiB`, { need: end, limit: MAX_PAGES * PAGE });
    }
    this.ensure(end);
    this.top = end;
    return start;
  }

  /** Make sure the memory is at least `bytes` long. */
  ensure(bytes: number): void {
    const have = this.memory.buffer.byteLength;
    if (bytes > have) {
      const pages = Math.ceil((bytes - have) / PAGE);
      try { this.memory.grow(pages); } catch (e) {
        throw new AetherError('out_of_memory', `cannot grow wasm memory from ${have} to ${bytes} bytes (${(bytes / 2 ** 30).toFixed(2)} GiB): ${(e as Error).message}`, { need: bytes, have });
      }
    }
  }

  /** Fresh views (non-shared memories detach their buffer on grow). */
  u8(off = 0, len?: number): Uint8Array { return new Uint8Array(this.memory.buffer, off, len); }
  f32(off: number, len: number): Float32Array { return new Float32Array(this.memory.buffer, off, len); }
  i32(off: number, len: number): Int32Array { return new Int32Array(this.memory.buffer, off, len); }
  view(): DataView { return new DataView(this.memory.buffer); }
}
