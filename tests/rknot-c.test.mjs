// The C side of .rknot validation (src/format/rknot.c): header and tensor-entry checks.
import test from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { repoRoot } from './helpers/paths.mjs';

async function core() {
  const memory = new WebAssembly.Memory({ initial: 64, maximum: 65536 });
  const mod = new WebAssembly.Module(fs.readFileSync(path.join(repoRoot, 'wasm/core-st.wasm')));
  const imports = { env: { memory } };
  for (const i of WebAssembly.Module.imports(mod)) if (i.kind === 'function') (imports[i.module] ??= {})[i.name] = () => 5;
  const instance = new WebAssembly.Instance(mod, imports);
  instance.exports.__stack_pointer.value = 64 * 65536;
  return { ex: instance.exports, u8: new Uint8Array(memory.buffer) };
}

function header({ magic = [0x52, 0x4b, 0x4e, 0x4f, 0x54, 0, 0x0d, 0x0a], version = 1, flags = 0, json = 100, data = 128 } = {}) {
  const b = new Uint8Array(32), dv = new DataView(b.buffer);
  b.set(magic, 0); dv.setUint32(8, version, true); dv.setUint32(12, flags, true);
  dv.setBigUint64(16, BigInt(json), true); dv.setBigUint64(24, BigInt(data), true);
  return b;
}

test('C header check: each malformed field gets its own code', async () => {
  const { ex, u8 } = await core();
  const at = 0x100000;
  const check = (h, size) => { u8.set(h, at); return ex.ae_rknot_check_header(at, size); };
  const dataOffset = Math.ceil((32 + 100) / 64) * 64;
  assert.equal(check(header(), dataOffset + 128), 0);
  assert.equal(check(header({ magic: [0x47, 0x47, 0x55, 0x46, 3, 0, 0, 0] }), dataOffset + 128), 1);
  assert.equal(check(header({ version: 2 }), dataOffset + 128), 2);
  assert.equal(check(header({ flags: 1 }), dataOffset + 128), 3);
  assert.equal(check(header({ json: 0 }), dataOffset + 128), 4);
  assert.equal(check(header({ json: 2 ** 40 }), dataOffset + 128), 4);
  assert.equal(check(header({ data: 100 }), dataOffset + 100), 5);
  assert.equal(check(header(), dataOffset + 127), 6, 'truncated');
  assert.equal(check(header(), dataOffset + 129), 6, 'trailing bytes');
});

test('C tensor check: dtype, shape in whole blocks, exact byte count, aligned in-range offset', async () => {
  const { ex } = await core();
  const DS = 1 << 20;
  assert.equal(ex.ae_rknot_check_tensor(8, 64, 4, 0, 4 * 2 * 34, DS), 0);     // q8_0 64x4
  assert.equal(ex.ae_rknot_check_tensor(3, 64, 4, 0, 1, DS), 7);              // unknown dtype id 3
  assert.equal(ex.ae_rknot_check_tensor(15, 256, 1, 0, 292, DS), 7);          // q8_K is activations only
  assert.equal(ex.ae_rknot_check_tensor(8, 48, 4, 0, 1, DS), 8);              // 48 is not whole q8_0 blocks
  assert.equal(ex.ae_rknot_check_tensor(0, 64, 4, 0, 1000, DS), 10);          // f32 64x4 is 1024 bytes
  assert.equal(ex.ae_rknot_check_tensor(0, 64, 4, 32, 1024, DS), 9);          // misaligned
  assert.equal(ex.ae_rknot_check_tensor(0, 64, 4, DS - 512, 1024, DS), 9);    // past the end
  assert.equal(ex.ae_rknot_check_tensor(0, 2 ** 30, 2 ** 30, 0, 2 ** 62, DS), 9); // huge: out of range, no overflow
});
