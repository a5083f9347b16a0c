#!/usr/bin/env node
// End-to-end prefill / decode tokens per second of `aether bench`, 1 and 2 threads, for the given
// models, run side by side (interleaved, same process tree) so machine noise hits all alike.
//   node bench/e2e.mjs [--json] [--reps R] [MODEL...]
import { execFileSync } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { args, machine } from './lib/common.mjs';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const { argv, has, opt } = args();
const json = has('--json');
const reps = Number(opt('--reps')) || 3;
const { tiny } = await import('./lib/tiny-model.mjs'); // shipped f32 GGUF, derived f16 (sha256-checked)
let models = argv.filter((a, i) => !a.startsWith('--') && argv[i - 1] !== '--reps');
if (!models.length) {
  models = [path.join(root, 'models/tiny-llama-a-q8_0.rknot'),
    tiny('tiny-llama-a-f16.gguf'), tiny('tiny-llama-a-f32.gguf')];
}
const cli = path.join(root, 'dist/cli/aether.js');
const rows = [];
for (const model of models) {
  for (const threads of [1, 2]) {
    const out = execFileSync(process.execPath, [cli, 'bench', model, '--threads', String(threads), '--prompt-tokens', '128',
      '--gen-tokens', '96', '--reps', String(reps), '--json'], { encoding: 'utf8' });
    rows.push(JSON.parse(out));
  }
}
const { cpu, nproc, node, date } = machine();
const host = { cpu, nproc, node, date };
if (json) { process.stdout.write(JSON.stringify({ machine: host, rows }, null, 1) + '\n'); process.exit(0); }
console.log(`machine: ${host.cpu}, ${host.nproc} cores, node ${host.node}, ${host.date}`);
console.log('| model | threads | prefill tok/s (128) | decode tok/s (96) | decode 2T/1T |');
console.log('|---|---|---|---|---|');
for (let i = 0; i < rows.length; i++) {
  const r = rows[i], one = rows[i - (r.threads === 2 ? 1 : 0)];
  console.log(`| ${path.basename(r.model)} | ${r.threads} | ${r.prefill_tps.toFixed(0)} | ${r.decode_tps.toFixed(0)} | ${r.threads === 2 ? (r.decode_tps / one.decode_tps).toFixed(2) + 'x' : ''} |`);
}
