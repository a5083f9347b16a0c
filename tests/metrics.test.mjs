// model.metrics() and formatPrometheus: the text exposition format (HELP/TYPE once per family, label escaping,
// several models in one exposition), the counters against what a generation did, the time counters (on/off,
// outputs unchanged, 1 vs 2 threads bit-identical with timing on), and the CLI's --metrics.
import test from 'node:test';
import assert from 'node:assert/strict';
import path from 'node:path';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { fileURLToPath } from 'node:url';
import { load } from '../dist/src/aether.js';
import { formatPrometheus, PROMETHEUS_CONTENT_TYPE } from '../dist/src/index.js';
import { OP_CLASS_NAMES } from '../dist/src/generated/abi.js';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const MODEL = path.join(ROOT, 'models/tiny-llama-a-q8_0.rknot');
const PROMPT = 'The Debian project is';

/** Parse a text exposition strictly: returns { families: name -> { type, help }, samples: [{ name, labels, value }] }. */
function parseExposition(text) {
  assert.ok(text.endsWith('\n'), 'ends with a newline');
  const families = new Map(), samples = [];
  for (const line of text.slice(0, -1).split('\n')) {
    let m;
    if ((m = /^# HELP ([a-zA-Z_:][a-zA-Z0-9_:]*) (.*)$/.exec(line))) {
      assert.ok(!families.get(m[1])?.help, `HELP of ${m[1]} once`);
      families.set(m[1], { ...families.get(m[1]), help: m[2] });
    } else if ((m = /^# TYPE ([a-zA-Z_:][a-zA-Z0-9_:]*) (counter|gauge|histogram|summary|untyped)$/.exec(line))) {
      assert.ok(!families.get(m[1])?.type, `TYPE of ${m[1]} once`);
      assert.ok(!samples.some((s) => s.name === m[1]), `TYPE of ${m[1]} before its samples`);
      families.set(m[1], { ...families.get(m[1]), type: m[2] });
    } else if ((m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})? (\S+)$/.exec(line))) {
      const labels = {};
      if (m[3]) {
        const re = /([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\[\\"n])*)"(,|$)/g;
        let consumed = 0, lm;
        while ((lm = re.exec(m[3]))) { labels[lm[1]] = lm[2].replace(/\\(.)/g, (_x, c) => (c === 'n' ? '\n' : c)); consumed = re.lastIndex; }
        assert.equal(consumed, m[3].length, `labels of '${line}' parse`);
      }
      const value = m[4] === '+Inf' ? Infinity : m[4] === '-Inf' ? -Infinity : Number(m[4]);
      assert.ok(m[4] === 'NaN' || !Number.isNaN(value), `value of '${line}'`);
      assert.ok(families.get(m[1])?.type, `sample ${m[1]} has a TYPE line`);
      samples.push({ name: m[1], labels, value });
    } else assert.fail(`not a valid exposition line: '${line}'`);
  }
  return { families, samples };
}

test('formatPrometheus: valid exposition, escaping, several models, counters named _total, units in names', () => {
  const metrics = {
    model: { name: 'm', arch: 'llama', layers: 2, nCtx: 8, threads: 1 },
    tokens: { prefill: 5, decode: 7, prefillSeconds: 0.5, decodeSeconds: 1.25, generations: 2 },
    last: { prefillTokensPerSecond: 10, decodeTokensPerSecond: 5.6 },
    kvCache: { positions: 3, capacity: 8, byDtype: [{ dtype: 'f16', bytes: 100, usedBytes: 40 }, { dtype: 'q8_0', bytes: 50, usedBytes: 0 }], f16Bytes: 200, savedBytes: 50, localHeadsSavedBytes: 30 },
    memory: { wasmBytes: 1 << 20, weightsBytes: 1000, runStateBytes: 300 },
    layers: [
      { layer: 0, ffnMode: 'dense', ffnActiveFraction: 1, opSeconds: { qkv: 0.1, attention: 0.2 } },
      { layer: 1, ffnMode: 'dynamic', ffnActiveFraction: null, opSeconds: { qkv: 0.3, attention: 0.4 } },
    ],
    globalOpSeconds: { embed: 0.01, output: 0.02 },
    timing: true,
  };
  const text = formatPrometheus([{ metrics, labels: { model: 'a "quoted"\\name\nx' } }, { metrics, labels: { model: 'b' } }]);
  const { families, samples } = parseExposition(text);
  for (const [name, f] of families) {
    assert.ok(f.help && f.type, `${name}: HELP and TYPE`);
    assert.equal(f.type === 'counter', name.endsWith('_total'), `${name}: counters and only counters end in _total`);
    assert.match(name, /^aether_([a-z0-9_]+_)?(bytes|seconds_total|tokens_total|total|per_second|ratio|positions|threads)$/, `${name}: unit suffix`);
  }
  const get = (name, labels) => samples.filter((s) => s.name === name && Object.entries(labels).every(([k, v]) => s.labels[k] === v));
  assert.deepEqual(get('aether_kv_cache_bytes', { model: 'b' }).map((s) => [s.labels.dtype, s.value]), [['f16', 100], ['q8_0', 50]]);
  assert.equal(get('aether_decode_tokens_total', { model: 'a "quoted"\\name\nx' })[0].value, 7, 'label escaping round-trips');
  assert.equal(get('aether_decode_tokens_per_second', { model: 'b' })[0].value, 5.6);
  assert.equal(get('aether_ffn_active_ratio', { model: 'b' }).length, 1, 'layers without tokens have no active ratio');
  assert.equal(get('aether_op_seconds_total', { model: 'b', layer: '1', op: 'attention' })[0].value, 0.4);
  assert.equal(get('aether_op_seconds_total', { model: 'b', layer: 'global', op: 'output' })[0].value, 0.02);
  assert.equal(get('aether_kv_cache_saved_bytes', { model: 'a "quoted"\\name\nx' })[0].value, 50);
  assert.equal(get('aether_kv_cache_local_heads_saved_bytes', { model: 'b' })[0].value, 30);
  // without timing there is no op family; non-finite values use the format's spellings
  const t2 = formatPrometheus({ ...metrics, timing: false, last: { prefillTokensPerSecond: NaN, decodeTokensPerSecond: Infinity } });
  assert.doesNotMatch(t2, /aether_op_seconds_total/);
  assert.match(t2, /^aether_prefill_tokens_per_second NaN$/m);
  assert.match(t2, /^aether_decode_tokens_per_second \+Inf$/m);
  assert.throws(() => formatPrometheus(metrics, { labels: { 'bad-label': 'x' } }), /label name/);
  assert.match(PROMETHEUS_CONTENT_TYPE, /^text\/plain; version=0\.0\.4/);
});

test('metrics(): counters follow generations; time counters on/off; same tokens and 1 vs 2 threads bit-identical with timing', { timeout: 120_000 }, async () => {
  const m1 = await load(MODEL, { threads: 1 });
  const m2 = await load(MODEL, { threads: 2 });
  try {
    const cfg = m1.config;
    const plain = await m1.complete(PROMPT, { maxTokens: 12, greedy: true });
    let x = m1.metrics();
    assert.equal(x.timing, false);
    assert.equal(x.globalOpSeconds, null);
    assert.ok(x.layers.every((l) => l.opSeconds === null && l.ffnMode === 'dense' && l.ffnActiveFraction === 1), 'dense: every neuron');
    assert.equal(x.tokens.prefill, plain.stats.prefillTokens);
    assert.equal(x.tokens.decode, 12);
    assert.equal(x.tokens.generations, 1);
    assert.equal(x.last.decodeTokensPerSecond, plain.stats.decodeTps);
    assert.equal(x.kvCache.capacity, m1.nCtx);
    // 12 generated tokens: the last one was sampled, never run through the model
    assert.equal(x.kvCache.positions, plain.stats.promptTokens + 11);
    const kvBytes = x.kvCache.byDtype.reduce((a, d) => a + d.bytes, 0);
    assert.equal(x.kvCache.f16Bytes, 2 * cfg.n_layers * cfg.n_kv_heads * cfg.head_dim * 2 * m1.nCtx);
    assert.equal(x.kvCache.savedBytes, x.kvCache.f16Bytes - kvBytes);
    assert.equal(x.kvCache.localHeadsSavedBytes, 0, 'no head stored locally');
    assert.ok(x.kvCache.byDtype.every((d) => d.usedBytes <= d.bytes && d.usedBytes > 0));
    assert.ok(x.memory.wasmBytes > x.memory.weightsBytes + x.memory.runStateBytes, 'memory holds weights and run state');
    assert.ok(x.memory.runStateBytes >= kvBytes, 'the run state holds the KV cache');

    // Timing: only structure and order relations are asserted (no magnitudes: the machine may be loaded).
    m1.setTiming(true); m2.setTiming(true);
    const r2 = await m2.complete(PROMPT, { maxTokens: 12, greedy: true });
    assert.deepEqual(r2.tokens, plain.tokens, '2 threads with timing: same tokens');
    // logits bit for bit after the same forward on 1 and 2 threads, timing on
    m1.reset(); m2.reset();
    const ids = m1.tokenize(PROMPT);
    m1.engine.forward(ids, 0); m2.engine.forward(ids, 0);
    assert.deepEqual(Buffer.from(m1.engine.logits().buffer), Buffer.from(m2.engine.logits().buffer), '1 vs 2 threads bit-identical');
    m1.reset();
    m1.resetMetrics();   // the forward above is not part of a generation: start the counters after it
    const r1 = await m1.complete(PROMPT, { maxTokens: 12, greedy: true });
    assert.deepEqual(r1.tokens, plain.tokens, 'timing does not change the output');

    x = m1.metrics();
    assert.equal(x.timing, true);
    assert.equal(x.tokens.generations, 1, 'resetMetrics zeroed the totals');
    const layerOps = OP_CLASS_NAMES.filter((o) => o !== 'embed' && o !== 'output');
    const finite = (v) => typeof v === 'number' && Number.isFinite(v) && v >= 0;
    for (const l of x.layers) {
      assert.deepEqual(Object.keys(l.opSeconds), layerOps);
      assert.ok(Object.values(l.opSeconds).every(finite), `layer ${l.layer}: non-negative times ${JSON.stringify(l.opSeconds)}`);
    }
    assert.deepEqual(Object.keys(x.globalOpSeconds), ['embed', 'output']);
    assert.ok(Object.values(x.globalOpSeconds).every(finite));
    const opSum = (m) => m.layers.reduce((a, l) => a + Object.values(l.opSeconds).reduce((p, q) => p + q, 0), 0) +
      m.globalOpSeconds.embed + m.globalOpSeconds.output;
    const opTotal = opSum(x);
    const wall = x.tokens.prefillSeconds + x.tokens.decodeSeconds;
    assert.ok(opTotal > 0, 'some time was counted');
    // the counters measure time inside the forward calls of the generation, which its wall time contains
    // (both from the same clock; 1 ms of slack for rounding)
    assert.ok(opTotal <= wall + 0.001, `op time ${opTotal}s within the generation's wall time ${wall}s`);
    // counters only grow: another generation adds to every one of them
    await m1.complete(PROMPT + ' again', { maxTokens: 4, greedy: true });
    const y = m1.metrics();
    for (const l of y.layers) for (const op of layerOps) assert.ok(l.opSeconds[op] >= x.layers[l.layer].opSeconds[op], `layer ${l.layer} ${op} monotone`);
    for (const op of ['embed', 'output']) assert.ok(y.globalOpSeconds[op] >= x.globalOpSeconds[op], `${op} monotone`);
    assert.ok(opSum(y) <= y.tokens.prefillSeconds + y.tokens.decodeSeconds + 0.001, 'still within the wall time');
    assert.equal(y.tokens.generations, 2);

    m1.setTiming(false);
    assert.equal(m1.metrics().timing, false);
    m1.resetMetrics();
    x = m1.metrics();
    assert.ok(x.layers.every((l) => l.ffnActiveFraction === null), 'after a reset no tokens were counted');
    assert.equal(x.tokens.decode, 0);
  } finally {
    m1.dispose(); m2.dispose();
  }
});

test('aether run --metrics prometheus|json --timing', { timeout: 60_000 }, async () => {
  const run = (...a) => promisify(execFile)(process.execPath, ['dist/cli/aether.js', 'run', MODEL, '-p', PROMPT, '-n', '4', '--greedy', ...a], { cwd: ROOT });
  const j = JSON.parse((await run('--json', '--metrics', 'prometheus', '--timing')).stdout);
  const { samples } = parseExposition(j.metrics_prometheus);
  assert.equal(samples.find((s) => s.name === 'aether_decode_tokens_total').value, 4);
  assert.ok(samples.some((s) => s.name === 'aether_op_seconds_total' && s.labels.op === 'ffn'));
  const j2 = JSON.parse((await run('--json', '--metrics', 'json')).stdout);
  assert.equal(j2.metrics.tokens.decode, 4);
  assert.equal(j2.metrics.timing, false);
  await assert.rejects(run('--metrics', 'xml'), /--metrics expects 'prometheus' or 'json'/);
});
