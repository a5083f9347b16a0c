/**
 * Shared pieces of the tokenizers: token types, the vocabulary index, a binary heap,
 * the special-token partition and UTF-8 helpers. Browser-safe (no Node imports).
 */
import { AetherError } from '../errors.js';
import type { TokenizerData } from './types.js';

/** GGUF token types (tokenizer.ggml.token_type); SentencePiece's ModelProto.SentencePiece.Type uses the same numbers. */
export const TokenType = {
  NORMAL: 1,
  UNKNOWN: 2,
  CONTROL: 3,
  USER_DEFINED: 4,
  UNUSED: 5,
  BYTE: 6,
} as const;

/** Texts of tokens that end a turn in well-known chat formats (llama.cpp treats them as end-of-generation too). */
export const KNOWN_EOG_TEXTS: readonly string[] = [
  '</s>',
  '<|eot_id|>',
  '<|eom_id|>',
  '<|im_end|>',
  '<|end|>',
  '<|endoftext|>',
  '<|end_of_text|>',
  '<end_of_turn>',
  '<|END_OF_TURN_TOKEN|>',
  '<EOT>',
  '_<EOT>',
  '<｜end▁of▁sentence｜>',
  '<|return|>',
  '<|call|>',
];

export const utf8Encoder = new TextEncoder();

/** Hash of a string's UTF-16 code units (FNV-1a, 32 bits). */
function strHash(s: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < s.length; i++) h = Math.imul(h ^ s.charCodeAt(i), 0x01000193);
  return h >>> 0;
}

/**
 * text -> id over the vocabulary's own strings, in one Int32Array (open addressing, linear probing, load <= 2/3):
 * 4-8 bytes per token where a Map of 152k strings takes ~45 (7 MiB of JS heap for Qwen2.5's vocabulary).
 * The first id of a duplicated text wins. Read-only after construction; `get` / `has` as a Map's.
 */
export class TextIdMap {
  private readonly slots: Int32Array;
  private readonly mask: number;
  constructor(private readonly texts: readonly string[], valid: (i: number) => boolean = () => true) {
    let cap = 16;
    while (cap < texts.length * 1.5) cap *= 2; // load <= 2/3
    this.slots = new Int32Array(cap).fill(-1);
    this.mask = cap - 1;
    for (let i = 0; i < texts.length; i++) {
      if (!valid(i)) continue;
      const t = texts[i];
      let k = strHash(t) & this.mask;
      for (;;) {
        const id = this.slots[k];
        if (id < 0) { this.slots[k] = i; break; }
        if (texts[id] === t) break; // duplicate text: the first id stays
        k = (k + 1) & this.mask;
      }
    }
  }
  get(s: string): number | undefined {
    let k = strHash(s) & this.mask;
    for (;;) {
      const id = this.slots[k];
      if (id < 0) return undefined;
      if (this.texts[id] === s) return id;
      k = (k + 1) & this.mask;
    }
  }
  /**
   * Id of the text s[a0, a1) + s[b0, b1) (two ranges of one string, concatenated; b0 = b1 for one range) without
   * building it: the BPE merges' halves and their concatenation, looked up without 450k temporary strings.
   */
  getRanges(s: string, a0: number, a1: number, b0: number, b1: number): number | undefined {
    let h = 0x811c9dc5;
    for (let i = a0; i < a1; i++) h = Math.imul(h ^ s.charCodeAt(i), 0x01000193);
    for (let i = b0; i < b1; i++) h = Math.imul(h ^ s.charCodeAt(i), 0x01000193);
    const len = a1 - a0 + b1 - b0, na = a1 - a0;
    let k = (h >>> 0) & this.mask;
    for (;;) {
      const id = this.slots[k];
      if (id < 0) return undefined;
      const t = this.texts[id];
      if (t.length === len) {
        let same = true;
        for (let i = 0; i < na && same; i++) same = t.charCodeAt(i) === s.charCodeAt(a0 + i);
        for (let i = 0; i < len - na && same; i++) same = t.charCodeAt(na + i) === s.charCodeAt(b0 + i);
        if (same) return id;
      }
      k = (k + 1) & this.mask;
    }
  }
  has(s: string): boolean { return this.get(s) !== undefined; }
}

/** Index over a vocabulary: text -> id (first id wins on duplicates) and per-id types. */
export class Vocab {
  readonly tokens: readonly string[];
  readonly types: Uint8Array;
  readonly textToId: TextIdMap;

  constructor(data: TokenizerData) {
    const tokens = data.tokens;
    if (!Array.isArray(tokens) || tokens.length === 0) {
      throw new AetherError('tokenizer_error', 'tokenizer data: "tokens" must be a non-empty array of strings');
    }
    const n = tokens.length;
    if (data.token_type !== undefined && data.token_type.length !== n) {
      throw new AetherError('tokenizer_error', `tokenizer data: token_type has ${data.token_type.length} entries, expected ${n} (one per token)`);
    }
    if (data.scores !== undefined && data.scores.length !== n) {
      throw new AetherError('tokenizer_error', `tokenizer data: scores has ${data.scores.length} entries, expected ${n} (one per token)`);
    }
    this.tokens = tokens;
    this.types = new Uint8Array(n);
    for (let i = 0; i < n; i++) {
      const t = tokens[i];
      if (typeof t !== 'string') {
        throw new AetherError('tokenizer_error', `tokenizer data: tokens[${i}] is ${typeof t}, expected a string`);
      }
      const ty = data.token_type ? Number(data.token_type[i]) : TokenType.NORMAL;
      this.types[i] = ty >= 1 && ty <= 6 ? ty : TokenType.NORMAL;
    }
    this.textToId = new TextIdMap(tokens);
  }

  get size(): number {
    return this.tokens.length;
  }

  checkId(id: number, field: string): number | undefined {
    if (id === undefined || id === null) return undefined;
    if (!Number.isInteger(id) || id < 0) return undefined;
    if (id >= this.tokens.length) {
      throw new AetherError('tokenizer_error', `tokenizer data: ${field} = ${id} is outside the vocabulary (size ${this.tokens.length})`);
    }
    return id;
  }
}

/**
 * Binary min-heap of (key1, key2, a, b) number tuples ordered by key1 then key2 (both ascending).
 * Stored in flat arrays to keep millions of pushes cheap.
 */
export class NumHeap {
  private k1: number[] = [];
  private k2: number[] = [];
  private va: number[] = [];
  private vb: number[] = [];
  /** Values of the last popped element. */
  topK1 = 0;
  topK2 = 0;
  topA = 0;
  topB = 0;

  get length(): number {
    return this.k1.length;
  }

  clear(): void {
    this.k1.length = 0;
    this.k2.length = 0;
    this.va.length = 0;
    this.vb.length = 0;
  }

  private less(i: number, j: number): boolean {
    const a = this.k1[i], b = this.k1[j];
    return a < b || (a === b && this.k2[i] < this.k2[j]);
  }

  private swap(i: number, j: number): void {
    let t = this.k1[i]; this.k1[i] = this.k1[j]; this.k1[j] = t;
    t = this.k2[i]; this.k2[i] = this.k2[j]; this.k2[j] = t;
    t = this.va[i]; this.va[i] = this.va[j]; this.va[j] = t;
    t = this.vb[i]; this.vb[i] = this.vb[j]; this.vb[j] = t;
  }

  push(k1: number, k2: number, a: number, b: number): void {
    let i = this.k1.length;
    this.k1.push(k1); this.k2.push(k2); this.va.push(a); this.vb.push(b);
    while (i > 0) {
      const p = (i - 1) >> 1;
      if (!this.less(i, p)) break;
      this.swap(i, p);
      i = p;
    }
  }

  /** Pop the smallest element into topK1/topK2/topA/topB. Returns false when empty. */
  pop(): boolean {
    const n = this.k1.length;
    if (n === 0) return false;
    this.topK1 = this.k1[0]; this.topK2 = this.k2[0]; this.topA = this.va[0]; this.topB = this.vb[0];
    const last = n - 1;
    if (last > 0) {
      this.k1[0] = this.k1[last]; this.k2[0] = this.k2[last]; this.va[0] = this.va[last]; this.vb[0] = this.vb[last];
    }
    this.k1.pop(); this.k2.pop(); this.va.pop(); this.vb.pop();
    const m = last;
    let i = 0;
    for (;;) {
      const l = 2 * i + 1;
      if (l >= m) break;
      const r = l + 1;
      const c = r < m && this.less(r, l) ? r : l;
      if (!this.less(c, i)) break;
      this.swap(c, i);
      i = c;
    }
    return true;
  }
}

/** A piece of input text: plain text to run through the model, or a special token matched whole. */
export type Fragment = { text: string; id?: undefined } | { id: number; text?: undefined };

/** Escape for a 'u'-flag regex (only syntax characters and '/' may be escaped there). */
function escapeRegExp(s: string): string {
  return s.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&');
}

/**
 * Splits text on whole-string special tokens (longest match first at the leftmost position).
 */
export class SpecialMatcher {
  private readonly re: RegExp | null;
  private readonly ids: Map<string, number>;

  constructor(entries: Array<[string, number]>) {
    this.ids = new Map();
    for (const [t, id] of entries) {
      if (t.length > 0 && !this.ids.has(t)) this.ids.set(t, id);
    }
    const texts = [...this.ids.keys()].sort((a, b) => b.length - a.length || (a < b ? -1 : a > b ? 1 : 0));
    this.re = texts.length ? new RegExp(texts.map(escapeRegExp).join('|'), 'gu') : null;
  }

  get empty(): boolean {
    return this.re === null;
  }

  split(text: string): Fragment[] {
    if (this.re === null) return text.length ? [{ text }] : [];
    const out: Fragment[] = [];
    const re = this.re;
    re.lastIndex = 0;
    let last = 0;
    let m: RegExpExecArray | null;
    while ((m = re.exec(text)) !== null) {
      if (m.index > last) out.push({ text: text.slice(last, m.index) });
      out.push({ id: this.ids.get(m[0]) as number });
      last = m.index + m[0].length;
    }
    if (last < text.length) out.push({ text: text.slice(last) });
    return out;
  }
}

/** Parse a SentencePiece byte piece "<0xNN>" -> byte value, else -1. */
export function parseBytePiece(t: string): number {
  if (t.length !== 6 || t[0] !== '<' || t[1] !== '0' || t[2] !== 'x' || t[5] !== '>') return -1;
  const v = parseInt(t.slice(3, 5), 16);
  return Number.isNaN(v) || !/^[0-9A-Fa-f]{2}$/.test(t.slice(3, 5)) ? -1 : v;
}

/** Concatenate byte chunks. */
export function concatBytes(chunks: Uint8Array[], total?: number): Uint8Array {
  const n = total ?? chunks.reduce((s, c) => s + c.length, 0);
  const out = new Uint8Array(n);
  let o = 0;
  for (const c of chunks) {
    out.set(c, o);
    o += c.length;
  }
  return out;
}
