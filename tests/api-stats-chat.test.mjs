// Issue 10 item 6: stats when the caller leaves the loop early, and chat() stopping at the end of a turn
// on a model without a chat template (the shipped tiny model is a base model with none).
import test from 'node:test';
import assert from 'node:assert/strict';
import path from 'node:path';
import { load } from '../dist/src/index.js';
import { repoRoot } from './helpers/paths.mjs';

const MODEL = path.join(repoRoot, 'models/tiny-llama-a-q8_0.rknot');

test('breaking out of generate() finalises the stats (decode rate, finish reason aborted)', async () => {
  const m = await load(MODEL);
  try {
    let n = 0;
    for await (const p of m.generate('The Debian project is', { maxTokens: 200, seed: 1 })) {
      assert.equal(typeof p.text, 'string');
      if (++n === 12) break;
    }
    const s = m.stats;
    assert.equal(s.finishReason, 'aborted');
    assert.equal(s.generatedTokens, 12);
    assert.ok(s.decodeMs > 0, `decodeMs ${s.decodeMs}`);
    assert.ok(s.decodeTps > 0 && Number.isFinite(s.decodeTps), `decodeTps ${s.decodeTps}`);
    assert.ok(s.prefillTps > 0);
    // the model is free again, and a full run reports 'length'
    const r = await m.complete('The Debian project is', { maxTokens: 5, greedy: true });
    assert.equal(r.stats.finishReason, 'length');
    assert.equal(r.stats.generatedTokens, 5);
  } finally { m.dispose(); }
});

test('chat() on a model without a chat template stops at the end of the turn (fallback stop strings)', async () => {
  const m = await load(MODEL);
  try {
    const c = m.chatTemplate;
    assert.equal(c.template, undefined);
    assert.equal(c.fallback, 'plain');
    assert.deepEqual(c.stop, ['\nUser:', '\nSystem:']);
    const messages = [
      { role: 'system', content: 'You answer questions about Debian.' },
      { role: 'user', content: 'How do I install a package?' },
    ];
    // The tiny model rarely writes a next "User:" turn itself, so check the plumbing with this model's turn
    // stops replaced by one it does write ("\n\n"): chat() must stop exactly where the raw continuation has it.
    Object.defineProperty(m, 'chatTemplate', { value: { ...c, stop: ['\n\n'] } });
    const { renderChat } = await import('../dist/src/tokenizer/chat.js');
    const { prompt } = renderChat(c, messages, {});
    let checked = 0;
    for (let seed = 1; seed <= 10; seed++) {
      const raw = await m.complete(prompt, { maxTokens: 80, seed, temperature: 0.9, parseSpecial: true, addBos: false });
      const cut = raw.text.indexOf('\n\n');
      if (cut < 0) continue;
      let reply = '';
      for await (const p of m.chat(messages, { maxTokens: 80, seed, temperature: 0.9 })) reply += p.text;
      assert.equal(reply, raw.text.slice(0, cut), `seed ${seed}`);
      assert.equal(m.stats.finishReason, 'stop');
      checked++;
    }
    assert.ok(checked >= 3, `only ${checked} of 10 seeds wrote a blank line`);
    // the caller's stop strings are kept beside the turn's
    const { options } = renderChat(c, messages, { stop: ['xyz'] });
    assert.deepEqual(options.stop, ['\nUser:', '\nSystem:', 'xyz']);
  } finally { m.dispose(); }
});

test('load warm-up (on by default in browsers): rounds with sampling, at least its minimum time, then the same greedy tokens as without it', async () => {
  const prompt = 'The Debian project is a free operating system. '.repeat(3);
  const cold = await load(MODEL, { warmup: false });
  let want;
  try {
    assert.equal(cold.warmupStats, null);
    want = (await cold.complete(prompt, { maxTokens: 24, greedy: true })).tokens;
  } finally { cold.dispose(); }
  const m = await load(MODEL, { warmup: true });
  try {
    const w = m.warmupStats;
    assert.ok(w.rounds >= 3 && w.rounds <= 40, JSON.stringify(w));
    // at least the minimum time (150 ms) unless the 40-round cap stopped it first
    assert.ok(w.ms >= 150 || w.rounds === 40, JSON.stringify(w));
    assert.equal(w.prefillMs.length, w.rounds);
    assert.equal(w.decodeMs.length, w.rounds);
    // decodeMs is per decode step: below its round's time, which holds at least 4 of them and the prefill
    w.decodeMs.forEach((d, i) => assert.ok(d > 0 && 4 * d <= w.roundMs[i] - w.prefillMs[i] + 0.4, `round ${i}: ${JSON.stringify(w)}`));
    assert.deepEqual((await m.complete(prompt, { maxTokens: 24, greedy: true })).tokens, want);
  } finally { m.dispose(); }
});
