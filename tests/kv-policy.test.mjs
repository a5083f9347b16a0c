// KV policies: the compact syntax (--kv-policy / kvPolicy), its structured form (the kv_policy section) and checks.
import test from 'node:test';
import assert from 'node:assert/strict';
import { parseKvPolicy, formatKvPolicy, checkKvPolicy, kvRowBytes } from '../dist/src/formats/kv-policy.js';

test('parseKvPolicy: sinks + window + rest, position ranges, both, full', () => {
  assert.deepEqual(parseKvPolicy('sinks=4:f16,window=64:f16,rest=q8_0'), {
    version: 1, ranges: [{ start: 0, end: 4, dtype: 'f16' }, { start: 4, end: null, dtype: 'q8_0' }], window: { size: 64, dtype: 'f16' }, sinks: 4,
  });
  assert.deepEqual(parseKvPolicy('0-20:f16,21-100:q8_0,101-:q4_0').ranges,
    [{ start: 0, end: 21, dtype: 'f16' }, { start: 21, end: 101, dtype: 'q8_0' }, { start: 101, end: null, dtype: 'q4_0' }]);
  assert.deepEqual(parseKvPolicy('window=32,0-99:q8_0,100-:q4_0').window, { size: 32, dtype: 'f16' });
  assert.deepEqual(parseKvPolicy('rest=q4_0'), { version: 1, ranges: [{ start: 0, end: null, dtype: 'q4_0' }], window: null, sinks: 4 });
  for (const s of ['full', 'none', '']) assert.equal(parseKvPolicy(s), null);
  for (const s of ['sinks=4:f16,window=64:f16,rest=q8_0', '0-20:f16,21-100:q8_0,101-:q4_0', 'window=8:q8_0,0-:f32']) {
    const p = parseKvPolicy(s);
    assert.deepEqual(parseKvPolicy(formatKvPolicy(p)).ranges, p.ranges);
    assert.deepEqual(parseKvPolicy(formatKvPolicy(p)).window, p.window);
  }
  assert.equal(formatKvPolicy(null), 'full');
});

test('parseKvPolicy / checkKvPolicy: errors name the part and what was expected', () => {
  const bad = [
    ['sinks=4:f16,window=64', /dtype of the other positions is missing/],
    ['rest=q5_0', /dtype 'q5_0' is not one of f32, f16, q8_0, q4_0/],
    ['0-20:f16,30-:q8_0', /ranges\[1\]\.start: expected 21/],
    ['0-20:f16,21-40:q8_0', /the last range must be open-ended/],
    ['0-20:f16,21-:q8_0,sinks=4:f16', /either sinks=\/rest= or position ranges/],
    ['window=0:f16,rest=f16', /expected an integer >= 1/],
    ['window=8,window=9,rest=f16', /window given twice/],
    ['20-10:f16', /empty range/],
    ['fast', /cannot read 'fast'/],
    ['0-1:f16,2-3:f16,4-5:f16,6-7:f16,8-:f16', /1\.\.4 ranges/],
  ];
  for (const [s, re] of bad) assert.throws(() => parseKvPolicy(s, '--kv-policy'), (e) => e.code === 'invalid_argument' && re.test(e.message) && /^--kv-policy/.test(e.message), s);
  assert.throws(() => checkKvPolicy({ version: 2 }, 'kv_policy', 'format_error'), { code: 'format_error', message: /kv_policy: version/ });
  assert.throws(() => checkKvPolicy({ version: 1, ranges: [{ start: 0, end: null, dtype: 'f16' }], window: { size: 4, dtype: 'q2_K' }, sinks: 4 }, 'kv_policy', 'format_error'),
    { code: 'format_error', message: /window\.dtype/ });
  assert.equal(kvRowBytes('q4_0', 64), 36);
  assert.equal(kvRowBytes('q8_0', 64), 68);
  assert.equal(kvRowBytes('f16', 48), 96);
});
