// Quality, size and speed of the compressed FFN variants (docs/QUALITY.md "FFN compression", docs/PERFORMANCE.md):
// tiny-llama-a q8_0 compressed to 75% / 50% FFN width by aa-svd, prune (and plain svd at 50%, and the atlas'
// per-layer ratios), calibrated on val.txt documents 0..66, evaluated against the uncompressed model on documents
// 67.. (`aether eval --ref`), file sizes, and decode / prefill tok/s of every file measured in the same run
// (rounds interleaved, medians). Child processes, one at a time; the table carries the command of each row.
//   node bench/compress.mjs [--max-tokens 20000] [--calib-tokens 8192] [--rounds 3] [--out /tmp/aether-compress] [--threads 1]
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import { args, machine, median } from './lib/common.mjs';

const { opt } = args();
const OUT = opt('--out', '/tmp/aether-compress');
const MAXTOK = opt('--max-tokens', '20000'), CAL = opt('--calib-tokens', '8192'), ROUNDS = Number(opt('--rounds', '3')), T = opt('--threads', '1');
fs.mkdirSync(OUT, { recursive: true });
const VAL = 'tests/fixtures/tiny-llama-a/val.txt', SRC = 'models/tiny-llama-a-q8_0.rknot';
const cli = (a) => execFileSync('node', ['dist/cli/aether.js', ...a], { encoding: 'utf8', maxBuffer: 1 << 26 });
const show = (a) => ['aether', ...a.filter((x) => x !== '--json')].join(' ').replaceAll(OUT, '$OUT');

const atlas = `${OUT}/tiny-llama-a-q8_0.atlas.rknot`;
const an = ['analyze', SRC, '--calib', VAL, '--docs', '0:67', '--max-tokens', CAL, '-o', atlas, '--chart', `${OUT}/atlas.svg`, '--json'];
const ALL = [
  ['aa-svd', '0.75'], ['aa-svd', '0.5'], ['prune', '0.75'], ['prune', '0.5'], ['svd', '0.5'], ['aa-svd', 'atlas'], ['prune', 'atlas'],
];
// --cases aa-svd:0.5,prune:0.75 runs a subset
const cases = opt('--cases') ? opt('--cases').split(',').map((c) => c.split(':')) : ALL;
const needAtlas = cases.some(([, w]) => w === 'atlas');
if (needAtlas && !fs.existsSync(atlas)) cli(an);
const rows = [{ label: 'dense (source)', file: SRC, cmd: null }];
for (const [method, w] of cases) {
  const out = `${OUT}/tiny-llama-a-q8_0.${method}.${w}.rknot`;
  const a = ['compress', w === 'atlas' ? atlas : SRC, '--method', method, ...(w === 'atlas' ? ['--from-atlas'] : ['--ffn-width', w]),
    ...(method === 'svd' ? [] : ['--calib', VAL, '--docs', '0:67', '--max-tokens', CAL]), '-o', out, '--json'];
  const t0 = Date.now();
  const r = JSON.parse(cli(a));
  process.stderr.write(`compressed ${method} ${w} in ${((Date.now() - t0) / 1000).toFixed(0)} s: ${r.file_bytes} bytes\n`);
  rows.push({ label: `${method} ${w === 'atlas' ? 'per-layer from the atlas' : `width ${w}`}`, file: out, cmd: show(a), compress: r });
}
for (const r of rows) {
  r.bytes = fs.statSync(r.file).size;
  if (r.file === SRC) continue;
  const a = ['eval', r.file, '--ref', SRC, '--text', VAL, '--docs', '67:', '--max-tokens', MAXTOK, '--threads', T, '--json'];
  r.eval = JSON.parse(cli(a));
  r.eval_cmd = show(a);
  process.stderr.write(`${r.label}: ppl ${r.eval.perplexity.toFixed(3)} vs ${r.eval.reference.perplexity.toFixed(3)} (+${r.eval.reference.ppl_increase_pct.toFixed(2)}%)\n`);
}
for (let round = 0; round < ROUNDS; round++) {
  for (const r of rows) {
    const b = JSON.parse(cli(['bench', r.file, '--threads', T, '--prompt-tokens', '64', '--gen-tokens', '64', '--reps', '3', '--json']));
    (r.decode ??= []).push(b.decode_tps); (r.prefill ??= []).push(b.prefill_tps);
  }
}
const dense = rows[0];
const dd = median(dense.decode), dp = median(dense.prefill);
const report = { machine: machine(), threads: Number(T), rows };
fs.writeFileSync(`${OUT}/compress.json`, JSON.stringify(report, null, 1));
console.log(`machine: ${JSON.stringify(report.machine)}; threads ${T}\n`);
console.log('| variant | perplexity | ppl increase | mean KL | top-1 vs dense | file bytes | decode tok/s | decode vs dense | prefill tok/s | command |\n|---|---|---|---|---|---|---|---|---|---|');
for (const r of rows) {
  const e = r.eval, dec = median(r.decode), pre = median(r.prefill);
  console.log(`| ${r.label} | ${e ? e.perplexity.toFixed(3) : '(reference)'} | ${e ? `${e.reference.ppl_increase_pct >= 0 ? '+' : ''}${e.reference.ppl_increase_pct.toFixed(2)}%` : ''} | ${e ? e.reference.kl.toExponential(2) : ''} | ${e ? (100 * e.reference.top1).toFixed(2) + '%' : ''} | ${r.bytes} | ${dec.toFixed(0)} | ${(dec / dd).toFixed(2)}x | ${pre.toFixed(0)} (${(pre / dp).toFixed(2)}x) | ${r.cmd ? '`' + r.cmd + '`; `' + r.eval_cmd + '`' : ''} |`);
}
