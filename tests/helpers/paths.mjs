import path from 'node:path';
import fs from 'node:fs';
import { fileURLToPath } from 'node:url';

export const repoRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
export const sharedModels = process.env.AETHER_SHARED_MODELS ?? path.resolve(repoRoot, '../shared/models');
export const tinyDir = path.join(sharedModels, 'tiny-llama-a');

/** Path of a file of tiny-llama-a; throws (the test fails, never skips) when it is missing. */
export function tiny(file) {
  const p = path.join(tinyDir, file);
  if (!fs.existsSync(p)) throw new Error(`missing ${p}: the shared model directory is required (set AETHER_SHARED_MODELS)`);
  return p;
}
