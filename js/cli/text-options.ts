/** The CLI's reading of a text file argument (`--calib TEXT` / `--text FILE`) with an optional `--docs A:B`. */
import fs from 'node:fs';
import path from 'node:path';
import { AetherError } from '../src/errors.js';
import { selectDocs } from '../src/profile/text.js';

export interface TextArg {
  text: string;
  /** what to record about it in metadata: the file's name and, with --docs, the selection */
  info: { text: string; docs?: string; documents?: number; of_documents?: number };
}

/** Reads the file named by option `flag` of `v`, keeping the documents `v.docs` selects. */
export function readTextArg(v: Record<string, unknown>, flag: 'calib' | 'text'): TextArg {
  const file = v[flag] as string;
  let text: string;
  try { text = fs.readFileSync(file, 'utf8'); } catch (e) {
    throw new AetherError('invalid_argument', `cannot read --${flag} ${file}: ${(e as Error).message}`);
  }
  const info: TextArg['info'] = { text: path.basename(file) };
  if (v.docs) {
    const sel = selectDocs(text, v.docs as string);
    text = sel.text;
    Object.assign(info, { docs: v.docs as string, documents: sel.docs, of_documents: sel.total });
  }
  return { text, info };
}
