// The aether CLI: run / bench / inspect with --json, and clear errors.
import test from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync, spawnSync } from 'node:child_process';
import path from 'node:path';
import fs from 'node:fs';
import { repoRoot, tiny } from './helpers/paths.mjs';

const CLI = path.join(repoRoot, 'dist/cli/aether.js');
const MODEL = path.join(repoRoot, 'models/tiny-llama-a-q8_0.rknot');
const cli = (...args) => JSON.parse(execFileSync(process.execPath, [CLI, ...args], { encoding: 'utf8' }));

test('aether run --json prints tokens, text and throughput; 1 and 2 threads agree', () => {
  const a = cli('run', MODEL, '-p', 'The Debian project is', '-n', '16', '--greedy', '--json', '--threads', '1');
  const b = cli('run', MODEL, '-p', 'The Debian project is', '-n', '16', '--greedy', '--json', '--threads', '2');
  assert.equal(a.tokens.length, 16);
  assert.deepEqual(a.tokens, b.tokens);
  assert.equal(a.threads, 1);
  assert.equal(b.threads, 2);
  assert.equal(typeof a.text, 'string');
  assert.ok(a.text.length > 0);
  assert.ok(a.prefill_tps > 0 && a.decode_tps > 0);
});

test('aether run on a GGUF file loads it directly and reproduces the reference tokens', () => {
  const r = cli('run', tiny('tiny-llama-a-f32.gguf'), '-p', 'A fool and his money', '-n', '12', '--greedy', '--json');
  assert.deepEqual(r.tokens, JSON.parse(fs.readFileSync(tiny('reference.json'), 'utf8')).prompts[2].generated_ids.slice(0, 12));
});

test('aether bench --json reports prefill and decode tok/s', () => {
  const r = cli('bench', MODEL, '--prompt-tokens', '16', '--gen-tokens', '8', '--reps', '1', '--json');
  assert.ok(r.prefill_tps > 0 && r.decode_tps > 0);
  assert.equal(r.prompt_tokens, 16);
});

test('errors are clear and exit non-zero', () => {
  const missing = spawnSync(process.execPath, [CLI, 'run', '/nonexistent/model.rknot', '-p', 'x', '--json'], { encoding: 'utf8' });
  assert.notEqual(missing.status, 0);
  assert.match(JSON.parse(missing.stdout).error.message, /nonexistent\/model\.rknot/);
  const badOpt = spawnSync(process.execPath, [CLI, 'run', MODEL, '--frobnicate'], { encoding: 'utf8' });
  assert.notEqual(badOpt.status, 0);
  assert.match(badOpt.stderr, /unknown option '--frobnicate'/);
  const badCmd = spawnSync(process.execPath, [CLI, 'frob'], { encoding: 'utf8' });
  assert.equal(badCmd.status, 2);
});

test('aether run / bench: --fused-dot on|off|auto and --repack on|off|auto (same tokens; auto times the fused tiles of the unrepacked q8_0 model and the AE_Q8_0_R4 switch of the repacked one), --ignore-eos; bad values are refused', () => {
  const base = ['run', MODEL, '-p', 'The Debian project is', '-n', '8', '--greedy', '--json', '--simd', 'relaxed'];
  const on = cli(...base, '--fused-dot', 'on', '--repack', 'off'), off = cli(...base, '--fused-dot', 'off', '--repack', 'off'), auto = cli(...base, '--ignore-eos');
  assert.deepEqual([on.fused_dot, off.fused_dot], [true, false]);
  assert.deepEqual([on.repacked, off.repacked], [0, 0]);
  assert.ok(auto.repacked > 0, `relaxed build, repack auto: the q8_0 matrices are repacked (${auto.repacked})`);
  assert.deepEqual(on.tokens, off.tokens);
  assert.deepEqual(auto.tokens, off.tokens);
  assert.equal(auto.tokens.length, 8);
  const bench = (...a) => cli('bench', MODEL, '--prompt-tokens', '8', '--gen-tokens', '2', '--reps', '1', '--json', '--simd', 'relaxed', ...a);
  const b = bench('--repack', 'off');
  assert.equal(b.repacked, 0);
  assert.ok(b.fused_dot_probe && b.fused_dot_probe.tiles.i16Ms > 0 && b.fused_dot_probe.q8_0_r4 === null && b.fused_dot_probe.tiles.fused === b.fused_dot, JSON.stringify(b.fused_dot_probe));
  const r = bench();   // every q8_0 matrix in AE_Q8_0_R4: only its switch is timed
  assert.ok(r.repacked > 0 && r.fused_dot_probe && r.fused_dot_probe.tiles === null && r.fused_dot_probe.q8_0_r4.i32Ms > 0 && r.fused_dot_probe.q8_0_r4.fused === r.fused_dot, JSON.stringify([r.repacked, r.fused_dot_probe, r.fused_dot]));
  for (const [opt, val] of [['--fused-dot', 'maybe'], ['--repack', 'sometimes']]) {
    const bad = spawnSync(process.execPath, [CLI, 'run', MODEL, '-p', 'x', opt, val], { encoding: 'utf8' });
    assert.notEqual(bad.status, 0);
    assert.match(bad.stderr + bad.stdout, new RegExp(`${opt}: expected auto, on or off, got '${val}'`));
  }
});
