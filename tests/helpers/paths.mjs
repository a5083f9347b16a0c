// Where the tests find the tiny real model (tiny-llama-a). Everything the suite needs is in the
// repository: tests/fixtures/tiny-llama-a/ ships the f32 GGUF, the SentencePiece model, the PyTorch
// references, the validation text and the HF folder's small json files; the q8_0 / f16 GGUFs and the HF
// safetensors are derived from the f32 GGUF at test time (bench/lib/tiny-model.mjs, shared with the benches; checked by
// sha256 against the published files) into build/test-fixtures/ (git-ignored).
// The shared model folder (../shared/models, or AETHER_SHARED_MODELS) is optional: `shared()` returns
// a path there or null, for longer checks only.
import path from 'node:path';
import fs from 'node:fs';
import { fileURLToPath } from 'node:url';
import { tiny, tinyDir, derivedDir } from '../../bench/lib/tiny-model.mjs';

export const repoRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
export { tiny, tinyDir, derivedDir };
export const sharedModels = process.env.AETHER_SHARED_MODELS ?? path.resolve(repoRoot, '../shared/models');

/** Path of `rel` under the optional shared model folder, or null when it is not there. */
export function shared(rel) {
  const p = path.join(sharedModels, rel);
  return fs.existsSync(p) ? p : null;
}
