// .rknot validation: the header (JS) and the C re-check of tensor entries (src/format/rknot.c).
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

// The header is checked in JS only (C never reads file bytes; docs/DESIGN.md "Errors").
test('header check (JS parseRknotHeader): each malformed field gets its own error', async () => {
  const { parseRknotHeader } = await import('../dist/src/formats/rknot.js');
  const dataOffset = Math.ceil((32 + 100) / 64) * 64;
  const field = (h, size) => {
    try { parseRknotHeader(h, 'x.rknot', size); return 'ok'; } catch (e) {
      assert.equal(e.name, 'AetherError');
      assert.match(e.message, /x\.rknot/);
      return `${e.code}:${e.details?.field}`;
    }
  };
  assert.equal(field(header(), dataOffset + 128), 'ok');
  assert.equal(field(header({ magic: [0x47, 0x47, 0x55, 0x46, 3, 0, 0, 0] }), dataOffset + 128), 'format_error:magic');
  assert.equal(field(header({ version: 2 }), dataOffset + 128), 'unsupported:version');
  assert.equal(field(header({ flags: 1 }), dataOffset + 128), 'unsupported:flags');
  assert.equal(field(header({ json: 0 }), dataOffset + 128), 'format_error:json_length');
  assert.equal(field(header({ json: 2 ** 40 }), dataOffset + 128), 'format_error:json_length');
  assert.equal(field(header({ data: 100 }), dataOffset + 100), 'format_error:data_size');
  assert.equal(field(header(), dataOffset + 127), 'format_error:file size', 'truncated');
  assert.equal(field(header(), dataOffset + 129), 'format_error:file size', 'trailing bytes');
});

test('C tensor check: dtype, shape in whole blocks, exact byte count, aligned in-range offset', async () => {
  const { ex } = await core();
  const DS = 1 << 20;
  assert.equal(ex.ae_rknot_check_tensor(8, 64, 4, 0, 4 * 2 * 34, DS), 0);     // q8_0 64x4
  assert.equal(ex.ae_rknot_check_tensor(16, 256, 4, 0, 1, DS), 7);            // unknown dtype id 16 (iq2_xxs)
  assert.equal(ex.ae_rknot_check_tensor(10, 256, 4, 0, 4 * 84, DS), 0);       // q2_K 256x4
  assert.equal(ex.ae_rknot_check_tensor(11, 256, 4, 0, 4 * 110, DS), 0);      // q3_K 256x4
  assert.equal(ex.ae_rknot_check_tensor(11, 256, 4, 0, 4 * 110 - 1, DS), 10); // its byte count
  assert.equal(ex.ae_rknot_check_tensor(15, 256, 1, 0, 292, DS), 7);          // q8_K is activations only
  assert.equal(ex.ae_rknot_check_tensor(9, 32, 1, 0, 36, DS), 7);             // so is q8_1
  assert.equal(ex.ae_rknot_check_tensor(3, 64, 4, 0, 4 * 2 * 20, DS), 0);     // q4_1 64x4
  assert.equal(ex.ae_rknot_check_tensor(8, 48, 4, 0, 1, DS), 8);              // 48 is not whole q8_0 blocks
  assert.equal(ex.ae_rknot_check_tensor(0, 64, 4, 0, 1000, DS), 10);          // f32 64x4 is 1024 bytes
  assert.equal(ex.ae_rknot_check_tensor(0, 64, 4, 32, 1024, DS), 9);          // misaligned
  assert.equal(ex.ae_rknot_check_tensor(0, 64, 4, DS - 512, 1024, DS), 9);    // past the end
  assert.equal(ex.ae_rknot_check_tensor(0, 2 ** 30, 2 ** 30, 0, 2 ** 62, DS), 9); // huge: out of range, no overflow
});
