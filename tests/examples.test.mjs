// examples/node/*.mjs run as written from the repo root (short outputs).
import test from 'node:test';
import assert from 'node:assert/strict';
import path from 'node:path';
import fs from 'node:fs';
import net from 'node:net';
import { execFile, spawn } from 'node:child_process';
import { promisify } from 'node:util';
import { fileURLToPath } from 'node:url';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const run = (file, ...args) => promisify(execFile)(process.execPath, [`examples/node/${file}`, ...args], { cwd: ROOT, timeout: 60_000 });

test('examples/node/generate.mjs streams a continuation of the prompt', async () => {
  const { stdout, stderr } = await run('generate.mjs', 'Debian packages are', '12');
  assert.ok(stdout.startsWith('Debian packages are'), stdout);
  assert.ok(stdout.length > 'Debian packages are'.length + 10, stdout);
  assert.match(stderr, /12 generated at [\d.]+ tok\/s, 2 threads, length\]/);
});

test('examples/node/chat.mjs: two turns with the fallback template, the second reuses the KV cache', async () => {
  const { stdout } = await run('chat.mjs', '12');
  const turns = [...stdout.matchAll(/\[(\d+) tokens, [\d.]+ tok\/s; prompt (\d+) tokens, (\d+) computed\]/g)];
  assert.equal(turns.length, 2, stdout);
  assert.match(stdout, /^User: How do I install a package\?\nAssistant:/);
  assert.match(stdout, /User: And how do I remove it again\?\nAssistant:/);
  const [, , prompt2, computed2] = turns[1].map(Number);
  assert.ok(computed2 < prompt2, `second turn computed ${computed2} of ${prompt2} prompt tokens`);
});

test('examples/node/stream-abort.mjs aborts after N pieces, then reuses the model', async () => {
  const { stdout } = await run('stream-abort.mjs', '5');
  assert.match(stdout, /\[aborted after 5 pieces: AbortError, code aborted; finish reason aborted\]/);
  assert.match(stdout, /\[reused: 16 greedy tokens, 1 of 5 prompt tokens computed\]/);
});

test('examples/node/openai-api.mjs: chat completion, stream, logprobs, embeddings', async () => {
  const { stdout } = await run('openai-api.mjs');
  const chat = /^chat: (".*") \((stop|length), (\d+) tokens\)$/m.exec(stdout);
  assert.ok(chat, stdout);
  const streamed = stdout.slice(stdout.indexOf('stream:') + 'stream:'.length, stdout.indexOf('\ntoken '));
  assert.equal(streamed, JSON.parse(chat[1]), 'the stream adds up to the same reply (same seed)');
  assert.equal([...stdout.matchAll(/^token ".*" logprob -?[\d.]+ top \{.*\}$/gm)].length, 4);
  assert.match(stdout, /^embeddings: 288 dimensions, cosine -?[\d.]+$/m);
});

test("README's server commands work as written (port 8080 swapped for a free one)", { timeout: 120_000 }, async () => {
  const readme = fs.readFileSync(path.join(ROOT, 'README.md'), 'utf8');
  const block = [...readme.matchAll(/```sh\n([\s\S]*?)```/g)].map((m) => m[1]).find((b) => b.includes('aether.js serve'));
  assert.ok(block, 'README has a sh block with aether.js serve');
  const port = await new Promise((resolve) => { const s = net.createServer().listen(0, '127.0.0.1', () => { const p = s.address().port; s.close(() => resolve(p)); }); });
  const lines = block.replace(/\\\n\s*/g, '').split('\n').filter(Boolean).map((l) => l.replaceAll('8080', String(port)));
  assert.equal(lines[0], 'npm run build');
  const serveLine = lines.find((l) => l.includes('aether.js serve'));
  assert.ok(serveLine.endsWith(' &'));
  const child = spawn('sh', ['-c', `exec ${serveLine.slice(0, -2)}`], { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'] });
  try {
    await new Promise((resolve, reject) => {
      child.stdout.on('data', (d) => { if (String(d).includes('aether serve:')) resolve(); });
      child.once('exit', (c) => reject(new Error(`serve exited ${c}`)));
    });
    const curls = lines.filter((l) => l.startsWith('curl '));
    assert.equal(curls.length, 4);
    const out = [];
    for (const c of curls) out.push((await promisify(execFile)('sh', ['-c', c], { cwd: ROOT, timeout: 60_000 })).stdout);
    const chat = JSON.parse(out[0]);
    assert.equal(chat.object, 'chat.completion');
    assert.equal(chat.usage.completion_tokens <= 16, true);
    const events = out[1].split('\n\n').filter(Boolean);
    assert.equal(events.at(-1), 'data: [DONE]');
    assert.equal(JSON.parse(events[0].slice(6)).object, 'text_completion');
    assert.equal(JSON.parse(out[2]).data[0].embedding.length, 288);
    assert.match(out[3], /^# TYPE aether_http_requests_total counter$/m);
  } finally {
    child.kill('SIGTERM');
  }
});
