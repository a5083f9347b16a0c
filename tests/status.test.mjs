// The error pipeline: every C status maps to its own AetherError code (js/src/runtime/status.ts), with
// the operation, subject and status in the message; the engine goes through it.
import test from 'node:test';
import assert from 'node:assert/strict';
import { Status, STATUS_NAMES, BadReason } from '../dist/src/generated/abi.js';
import { statusError, checkStatus, STATUS_ERROR_CODES } from '../dist/src/runtime/status.js';
import { load } from '../dist/src/index.js';
import { Q8 } from './helpers/ffn.mjs';

test('statusError: a distinct code per C status, message names operation, subject and status', () => {
  const codes = new Map();
  for (const [name, st] of Object.entries(Status)) {
    if (st === Status.OK) continue;
    const e = statusError(st, { op: 'forward', subject: '3 tokens at position 7' });
    assert.equal(e.name, 'AetherError');
    assert.notEqual(e.code, 'wasm_error', `${name} has its own code`);
    assert.ok(!codes.has(e.code), `${name} and ${codes.get(e.code)} share the code ${e.code}`);
    codes.set(e.code, name);
    assert.equal(e.message, `forward (3 tokens at position 7) failed: ${STATUS_NAMES[st]}`);
    assert.equal(e.details.status, st);
    assert.equal(STATUS_ERROR_CODES[st], e.code);
  }
  assert.equal(codes.size, Object.keys(Status).length - 1);
  assert.equal(statusError(99, { op: 'x' }).code, 'wasm_error', 'unknown status');
  assert.match(statusError(99, { op: 'x' }).message, /status 99/);
  assert.doesNotThrow(() => checkStatus(Status.OK, { op: 'x' }));
  assert.throws(() => checkStatus(Status.CTX_FULL, { op: 'x' }), (e) => e.code === 'kv_cache_full');
});

test('statusError: a rejected tensor names the tensor and the C enum reason', () => {
  const e = statusError(Status.BAD_TENSOR, { op: 'model init', badTensor: { layer: 3, role: 5, reason: BadReason.BLOCKS, name: 'blk.3.attn_k' } });
  assert.equal(e.code, 'format_error');
  assert.equal(e.message, 'tensor blk.3.attn_k: row is not a whole number of blocks (checked by the C validator)');
  assert.equal(e.details.reason, BadReason.BLOCKS);
  assert.equal(e.details.layer, 3);
});

test('engine: a forward whose FFN module is missing reports unsupported (not invalid_argument), and the model stays usable', async () => {
  const model = await load(Q8, { threads: 1, maxBatch: 8 });   // no FFN modules loaded
  try {
    model.engine.forward([1, 2, 3], 0);
    const dense = model.engine.logits();
    model.engine.setFfnMode(0, 'fused');   // C accepts the mode; the core's import is a stub returning AE_ERR_UNSUPPORTED
    assert.throws(() => model.engine.forward([1, 2, 3], 0), (e) => e.code === 'unsupported' && /^forward \(3 tokens at position 0, n_ctx \d+\) failed: unsupported$/.test(e.message));
    model.engine.setFfnMode(0, 'dense');
    model.engine.forward([1, 2, 3], 0);
    assert.deepEqual(model.engine.logits(), dense, 'dense logits after the refused mode');
    assert.throws(() => model.engine.setFfnMode(999, 'dense'), (e) => e.code === 'invalid_argument' && /layer 999/.test(e.message));
  } finally { model.dispose(); }
});
