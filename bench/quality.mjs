// Quality table of the FFN modes (docs/QUALITY.md): profiles tiny-llama-a (f32 and q8_0) on the first
// half of val.txt's documents, evaluates every mode on the second half with `aether eval --vs-dense`, and
// prints a markdown table with the exact command of each row (child processes, one at a time).
//   node bench/quality.mjs [--max-tokens 20000] [--models f32,q8_0] [--out /tmp/dir] [--json]
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { args } from './lib/common.mjs';

const { argv, opt } = args();
const MAXTOK = opt('--max-tokens', '20000');
const OUT = opt('--out', '/tmp/aether-quality');
const MODELS = opt('--models', 'f32,q8_0').split(',');
const FIXTURES = 'tests/fixtures'; // tiny-llama-a: f32 GGUF and val.txt, shipped in the repository
const VAL = `${FIXTURES}/tiny-llama-a/val.txt`;
const LEVELS = '0.1,0.25,0.4,0.5,0.6,0.7,0.8,0.9';
fs.mkdirSync(OUT, { recursive: true });

const cli = (args) => execFileSync('node', ['dist/cli/aether.js', ...args], { encoding: 'utf8', maxBuffer: 1 << 26 });
const show = (args) => ['aether', ...args].join(' ');

const SRC = {
  f32: { convert: [`${FIXTURES}/tiny-llama-a/tiny-llama-a-f32.gguf`, '-o', `${OUT}/tiny-llama-a-f32.rknot`], file: `${OUT}/tiny-llama-a-f32.rknot` },
  q8_0: { file: 'models/tiny-llama-a-q8_0.rknot' },
};

const rows = [];
for (const m of MODELS) {
  const src = SRC[m];
  if (src.convert && !fs.existsSync(src.file)) cli(['convert', ...src.convert]);
  const sat = `${OUT}/tiny-llama-a-${m}.sat.rknot`;
  const prof = ['profile', src.file, '--calib', VAL, '--docs', '0:67', '--target-sparsity', LEVELS, '-o', sat, '--json'];
  const p = JSON.parse(cli(prof));
  process.stderr.write(`profiled ${m}: ${p.tokens} tokens in ${p.seconds.toFixed(0)} s\n`);
  rows.push({ model: m, kind: 'profile', cmd: show(prof.map((a) => a.replace(OUT, '$OUT'))), profile: p });
  const evalBase = ['eval', sat, '--text', VAL, '--docs', '67:', '--vs-dense', '--max-tokens', MAXTOK, '--json'];
  const cases = [['dense', []], ['fused', ['--mode', 'fused']]];
  for (const s of ['0.1', '0.25', '0.4', '0.5']) cases.push([`static ${s}`, ['--mode', 'static', '--sparsity', s]]);
  for (const s of ['0.1', '0.25', '0.5']) cases.push([`static ${s}, no compensation`, ['--mode', 'static', '--sparsity', s, '--no-comp']]);
  cases.push(['static 0.25, neuron-major down (compensation as a bias)', ['--mode', 'static', '--sparsity', '0.25', '--ffn-down', 'neuron']]);
  for (const s of ['0.1', '0.25', '0.4', '0.5', '0.6', '0.7', '0.8', '0.9']) cases.push([`dynamic ${s}`, ['--mode', 'dynamic', '--sparsity', s]]);
  cases.push(['dynamic 0.7, rows down', ['--mode', 'dynamic', '--sparsity', '0.7', '--ffn-down', 'rows']]);
  if (m !== 'f32') {
    for (const dt of ['f32', 'f16', 'q8_0', 'q4_0']) cases.push([`dynamic 0.7, neuron-major down copy ${dt}`, ['--mode', 'dynamic', '--sparsity', '0.7', '--ffn-down', 'neuron', '--down-dtype', dt]]);
    for (const dt of ['f32', 'q8_0']) cases.push([`threshold 0 (nothing skipped), neuron-major down copy ${dt}`, ['--mode', 'dynamic', '--threshold', '0', '--ffn-down', 'neuron', '--down-dtype', dt]]);
  }
  for (const method of ['activity', 'contribution']) {
    const satm = `${OUT}/tiny-llama-a-${m}.${method}.rknot`;
    const pm = ['profile', src.file, '--calib', VAL, '--docs', '0:67', '--target-sparsity', '0.1,0.25,0.5', '--method', method, '-o', satm, '--json'];
    rows.push({ model: m, kind: 'profile', cmd: show(pm.map((a) => a.replace(OUT, '$OUT'))), profile: JSON.parse(cli(pm)) });
    for (const s of ['0.1', '0.25', '0.5']) cases.push([`static ${s}, method ${method}`, ['--mode', 'static', '--sparsity', s], satm]);
  }
  for (const [label, extra, file] of cases) {
    const args = [...evalBase, ...extra];
    if (file) args[1] = file;
    const t0 = Date.now();
    const r = JSON.parse(cli(args));
    process.stderr.write(`${m} ${label}: ppl ${r.perplexity.toFixed(3)} (+${r.reference.ppl_increase_pct.toFixed(2)}%) in ${((Date.now() - t0) / 1000).toFixed(0)} s\n`);
    rows.push({ model: m, kind: 'eval', label, cmd: show(args.filter((a) => a !== '--json').map((a) => a.replace(OUT, '$OUT'))), result: r });
  }
}
fs.writeFileSync(path.join(OUT, 'quality.json'), JSON.stringify(rows, null, 1));
if (argv.includes('--json')) { console.log(JSON.stringify(rows)); process.exit(0); }
for (const m of MODELS) {
  console.log(`\n### tiny-llama-a ${m}\n`);
  console.log('| mode | perplexity | ppl increase | mean KL | top-1 agreement | FFN sparsity | command |');
  console.log('|---|---|---|---|---|---|---|');
  for (const r of rows.filter((x) => x.model === m && x.kind === 'eval')) {
    const e = r.result;
    console.log(`| ${r.label} | ${e.perplexity.toFixed(3)} | ${e.reference.ppl_increase_pct >= 0 ? '+' : ''}${e.reference.ppl_increase_pct.toFixed(2)}% | ${e.reference.kl.toExponential(2)} | ${(e.reference.top1 * 100).toFixed(2)}% | ${(e.ffn_sparsity * 100).toFixed(1)}% | \`${r.cmd}\` |`);
  }
}
