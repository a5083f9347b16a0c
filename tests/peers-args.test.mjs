// bench/peers.mjs is never run by npm test (it needs minutes and the peers); this checks only its command line.
import test from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { parseOptions, agreement, logprobGap, RUNTIMES } from '../bench/peers.mjs';

test('peers.mjs: defaults, options, bad values refused', () => {
  const d = parseOptions([]);
  assert.deepEqual(d.shapes, ['s15m', 'phi3']);
  assert.deepEqual(d.dtypes, ['f32', 'q8_0', 'q4_0']);
  assert.deepEqual(d.runtimes, RUNTIMES);
  assert.deepEqual([d.P, d.G, d.reps, d.threads, d.ctx, d.layers, d.promptSeed], [64, 32, 3, 1, 512, undefined, 1]);
  assert.equal(parseOptions(['--prompt-seed', '7']).promptSeed, 7);
  assert.throws(() => parseOptions(['--prompt-seed', 'x']), /--prompt-seed expects an integer >= 0/);
  const o = parseOptions(['--shapes', 'phi3', '--layers', '2', '--dtypes', 'q4_0', '--runtimes', 'aether-node,llama-native', '--reps', '5', '--json']);
  assert.deepEqual([o.shapes, o.layers, o.dtypes, o.runtimes, o.reps, o.json], [['phi3'], 2, ['q4_0'], ['aether-node', 'llama-native'], 5, true]);
  assert.ok(RUNTIMES.includes('wllama') && RUNTIMES.includes('wllama-compat') && RUNTIMES.includes('llama-native'));
  // the fused-dot A/B runtime: accepted when named, not part of the default list
  assert.deepEqual(parseOptions(['--runtimes', 'aether-chromium,aether-chromium-i16']).runtimes, ['aether-chromium', 'aether-chromium-i16']);
  assert.ok(!d.runtimes.includes('aether-chromium-i16'));
  const w = parseOptions(['--runtimes', 'wllama,wllama-compat', '--shapes', 'smollm2-135m,phi3', '--dtypes', 'q4_K_M', '--file', 'x.gguf']);
  assert.deepEqual([w.runtimes, w.shapes, w.dtypes, w.file], [['wllama', 'wllama-compat'], ['smollm2-135m', 'phi3'], ['q4_K_M'], 'x.gguf']);
  assert.throws(() => parseOptions(['--shapes', 'gpt-5']), /unknown shape gpt-5/);
  assert.throws(() => parseOptions(['--runtimes', 'wllama-st']), /unknown runtime wllama-st/);
  assert.throws(() => parseOptions(['--dtypes', 'q5_K']), /unknown dtype/);
  assert.throws(() => parseOptions(['--reps', '0']), /--reps expects an integer >= 1/);
  assert.throws(() => parseOptions(['--frobnicate']), /unknown option --frobnicate/);
  assert.throws(() => parseOptions(['--prompt-tokens', '500', '--ctx', '512']), /exceed --ctx/);
});

test('peers.mjs --help prints the usage and exits 0 without loading anything', () => {
  const r = spawnSync(process.execPath, [fileURLToPath(new URL('../bench/peers.mjs', import.meta.url)), '--help'], { encoding: 'utf8' });
  assert.equal(r.status, 0, r.stderr);
  assert.match(r.stdout, /--runtimes/);
  assert.match(r.stdout, /llama-native/);
});

test('peers.mjs agreement: ids (prefix and same positions), or native pieces that prefix a text', () => {
  const nat = { tokens: [5, 6, 7, 8], pieces: [' a', 'b', ' c', 'd'] };
  assert.deepEqual(agreement({ tokens: [5, 6, 7, 8] }, nat), { prefix: 4, same: 4, n: 4 });
  assert.deepEqual(agreement({ tokens: [5, 9, 7, 8] }, nat), { prefix: 1, same: 3, n: 4 });
  assert.deepEqual(agreement({ tokens: null, text: ' ab cd' }, nat), { prefix: 4, same: null, n: 4 });
  assert.deepEqual(agreement({ tokens: null, text: ' ab x' }, nat), { prefix: 2, same: null, n: 4 });
  assert.deepEqual(agreement({ tokens: null, text: 'ab' }, nat), { prefix: 0, same: null, n: 4 });
});

test('peers.mjs logprobGap: log-softmax of both picks and their gap', () => {
  const logits = new Float32Array([1, 3, 2.9, -1]);
  const g = logprobGap(logits, 1, 2);
  const lse = Math.log([1, 3, 2.9, -1].reduce((a, x) => a + Math.exp(x), 0));
  assert.equal(g.ours, 1);
  assert.equal(g.theirs, 2);
  assert.ok(Math.abs(g.ours_logprob - (3 - lse)) < 1e-4 && Math.abs(g.theirs_logprob - (2.9 - lse)) < 1e-4);
  assert.ok(Math.abs(g.gap_nats - 0.1) < 1e-4, String(g.gap_nats));
  assert.ok(logprobGap(logits, 2, 1).gap_nats < 0, 'a pick below the other gives a negative gap');
});
