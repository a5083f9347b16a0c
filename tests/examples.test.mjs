// examples/node/*.mjs run as written from the repo root (short outputs).
import test from 'node:test';
import assert from 'node:assert/strict';
import path from 'node:path';
import { execFile } from 'node:child_process';
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
