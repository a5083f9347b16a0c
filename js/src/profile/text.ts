/** Calibration / evaluation text helpers: document selection for held-out splits. */
import { AetherError } from '../errors.js';

/** Documents of a text: separated by lines holding only 0x1E (tiny-llama-a's val.txt); one document otherwise. */
export function splitDocs(text: string): string[] {
  return text.split(/\n?\x1e\n?/).filter((d) => d.length > 0);
}

/**
 * Keep documents [a, b) of `text` ("A:B", either side may be empty: "0:67", "67:"; negative counts from
 * the end). Returns the selected documents joined with 0x1E lines, and their count.
 */
export function selectDocs(text: string, range: string): { text: string; docs: number; total: number } {
  const docs = splitDocs(text);
  const m = /^\s*(-?\d*)\s*:\s*(-?\d*)\s*$/.exec(range);
  if (!m) throw new AetherError('invalid_argument', `--docs expects A:B (documents A..B-1), got '${range}'`);
  const n = docs.length;
  const idx = (s: string, dflt: number) => { if (s === '') return dflt; const v = Number(s); return Math.max(0, Math.min(n, v < 0 ? n + v : v)); };
  const a = idx(m[1], 0), b = idx(m[2], n);
  const sel = docs.slice(a, Math.max(a, b));
  if (sel.length === 0) throw new AetherError('invalid_argument', `--docs ${range} selects no document (the text has ${n})`);
  return { text: sel.join('\n\x1e\n'), docs: sel.length, total: n };
}

/**
 * Token windows of at most `window` ids over the documents of `text` (each document encoded with BOS and
 * EOS, then cut into consecutive windows), stopping once `maxTokens` ids are taken: the calibration and
 * profiling passes read text this way.
 */
export function tokenWindows(tokenizer: { encode(text: string, o: { addBos: boolean; addEos: boolean }): number[] },
  text: string, window: number, maxTokens?: number): number[][] {
  const out: number[][] = [];
  let total = 0;
  for (const d of splitDocs(text)) {
    const ids = tokenizer.encode(d, { addBos: true, addEos: true });
    for (let s = 0; s < ids.length; s += window) {
      let w = ids.slice(s, s + window);
      if (maxTokens && total + w.length > maxTokens) w = w.slice(0, maxTokens - total);
      if (w.length === 0) return out;
      out.push(w);
      total += w.length;
      if (maxTokens && total >= maxTokens) return out;
    }
  }
  return out;
}
