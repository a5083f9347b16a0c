// Where the tests find the tiny real model (tiny-llama-a). Everything the suite needs is in the
// repository: tests/fixtures/tiny-llama-a/ ships the f32 GGUF, the SentencePiece model, the PyTorch
// references, the validation text and the HF folder's small json files; the q8_0 / f16 GGUFs and the HF
// safetensors are derived from the f32 GGUF at test time (tests/helpers/tiny-derive.mjs, checked by
// sha256 against the published files) into build/test-fixtures/ (git-ignored).
// The shared model folder (../shared/models, or AETHER_SHARED_MODELS) is optional: `shared()` returns
// a path there or null, for longer checks only.
import path from 'node:path';
import fs from 'node:fs';
import { fileURLToPath } from 'node:url';
import { derive } from './tiny-derive.mjs';

export const repoRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
export const tinyDir = path.join(repoRoot, 'tests/fixtures/tiny-llama-a');
export const derivedDir = path.join(repoRoot, 'build/test-fixtures/tiny-llama-a');
export const sharedModels = process.env.AETHER_SHARED_MODELS ?? path.resolve(repoRoot, '../shared/models');

const DERIVED = new Set(['tiny-llama-a-q8_0.gguf', 'tiny-llama-a-f16.gguf', 'hf/model.safetensors']);

/** The HF folder: the shipped json files, tokenizer.model and the derived model.safetensors. */
function hfFolder() {
  const dir = path.join(derivedDir, 'hf');
  derive('hf/model.safetensors', tinyDir, derivedDir);
  for (const f of fs.readdirSync(path.join(tinyDir, 'hf'))) fs.copyFileSync(path.join(tinyDir, 'hf', f), path.join(dir, f));
  fs.copyFileSync(path.join(tinyDir, 'tokenizer.model'), path.join(dir, 'tokenizer.model'));
  return dir;
}

/**
 * Path of a file of tiny-llama-a ('tiny-llama-a-f32.gguf', 'tiny-llama-a-q8_0.gguf', 'hf', 'val.txt', ...):
 * shipped or derived; throws (the test fails, never skips) when it is neither.
 */
export function tiny(file) {
  if (file === 'hf' || file === 'hf/') return hfFolder();
  if (file.startsWith('hf/') && file !== 'hf/model.safetensors') return path.join(hfFolder(), file.slice(3));
  if (DERIVED.has(file)) return derive(file, tinyDir, derivedDir);
  const p = path.join(tinyDir, file);
  if (!fs.existsSync(p)) throw new Error(`missing ${p}: not a file of tests/fixtures/tiny-llama-a/ nor one derived from it`);
  return p;
}

/** Path of `rel` under the optional shared model folder, or null when it is not there. */
export function shared(rel) {
  const p = path.join(sharedModels, rel);
  return fs.existsSync(p) ? p : null;
}
