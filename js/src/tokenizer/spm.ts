/**
 * SentencePiece-style BPE (GGUF tokenizer.ggml.model = 'llama').
 *
 * Encoding of one run of plain text (special tokens are split off by the caller):
 *  - spaces become U+2581 '▁' (the caller prepends the dummy-prefix space when add_space_prefix),
 *  - the text starts as one symbol per Unicode code point, kept in a doubly linked list,
 *  - every adjacent pair whose concatenation is a vocabulary piece is a candidate; a heap always yields
 *    the candidate with the highest piece score (ties: leftmost), stale candidates are skipped,
 *  - after merging, each symbol that is a piece becomes its id; a character that is not in the vocabulary
 *    becomes its UTF-8 bytes as <0xNN> pieces (byte fallback), or the unknown id without byte pieces.
 * Browser-safe.
 */
import { AetherError } from '../errors.js';
import type { TokenizerData } from './types.js';
import { NumHeap, TokenType, Vocab, parseBytePiece, utf8Encoder } from './common.js';

export const SPM_SPACE = '\u2581';

export class SpmModel {
  readonly vocab: Vocab;
  private readonly scores: Float64Array;
  /** Per id: may this piece be produced by a merge? */
  private readonly mergeable: Uint8Array;
  /** byte value -> id of its <0xNN> piece, or -1. */
  readonly byteIds: Int32Array;
  readonly hasAllBytes: boolean;
  readonly unkId: number | undefined;
  private readonly heap = new NumHeap();

  constructor(data: TokenizerData, vocab: Vocab) {
    this.vocab = vocab;
    const n = vocab.size;
    if (!data.scores) {
      throw new AetherError('tokenizer_error', "tokenizer data: model 'llama' needs scores (one per token)");
    }
    this.scores = new Float64Array(n);
    this.mergeable = new Uint8Array(n);
    this.byteIds = new Int32Array(256).fill(-1);
    for (let i = 0; i < n; i++) {
      const s = Number(data.scores[i]);
      this.scores[i] = Number.isFinite(s) ? s : -1e30;
      const ty = vocab.types[i];
      this.mergeable[i] = ty === TokenType.NORMAL || ty === TokenType.USER_DEFINED || ty === TokenType.UNUSED ? 1 : 0;
      const b = parseBytePiece(vocab.tokens[i]);
      if (b >= 0 && (ty === TokenType.BYTE || data.token_type === undefined) && this.byteIds[b] < 0) {
        this.byteIds[b] = i;
      }
    }
    let all = true;
    for (let b = 0; b < 256; b++) if (this.byteIds[b] < 0) all = false;
    this.hasAllBytes = all;
    this.unkId = data.unknown_token_id !== undefined ? vocab.checkId(data.unknown_token_id, 'unknown_token_id') : undefined;
  }

  /**
   * Code points that occur inside mergeable pieces (dense index), and the set of adjacent pairs
   * (idx1 * nChars + idx2) that occur inside some piece. A position whose pair is not in the set can never be
   * spanned by a merge, so the text is cut there and each segment is merged on its own: same result as one
   * pass over the whole text, with small heaps.
   */
  private charIndex = new Map<number, number>();
  private pairSet = new Set<number>();
  private pairsBuilt = false;
  private start = new Int32Array(0);
  private size = new Int32Array(0);
  private prev = new Int32Array(0);
  private next = new Int32Array(0);

  private buildPairs(): void {
    const toks = this.vocab.tokens;
    const idx = this.charIndex;
    for (let id = 0; id < toks.length; id++) {
      if (this.mergeable[id] === 0) continue;
      for (const ch of toks[id]) {
        const cp = ch.codePointAt(0) as number;
        if (!idx.has(cp)) idx.set(cp, idx.size);
      }
    }
    const nc = idx.size;
    for (let id = 0; id < toks.length; id++) {
      if (this.mergeable[id] === 0) continue;
      let prevI = -1;
      for (const ch of toks[id]) {
        const ci = idx.get(ch.codePointAt(0) as number) as number;
        if (prevI >= 0) this.pairSet.add(prevI * nc + ci);
        prevI = ci;
      }
    }
    this.pairsBuilt = true;
  }

  /** Encode text that already had spaces handled by {@link escapeSpm}; appends ids to out. */
  encodeEscaped(text: string, out: number[]): void {
    const len = text.length;
    if (len === 0) return;
    if (!this.pairsBuilt) this.buildPairs();
    if (this.start.length < len) {
      const cap = Math.max(len, this.start.length * 2, 256);
      this.start = new Int32Array(cap);
      this.size = new Int32Array(cap);
      this.prev = new Int32Array(cap);
      this.next = new Int32Array(cap);
    }
    const start = this.start;
    const size = this.size;
    const idx = this.charIndex;
    const pairs = this.pairSet;
    const nc = idx.size;
    // Symbols: one per code point (start/size in UTF-16 code units), cut into independent segments.
    let ns = 0;
    let seg = 0;
    let prevCi = -1;
    for (let i = 0; i < len; ) {
      const cp = text.codePointAt(i) as number;
      const w = cp > 0xffff ? 2 : 1;
      const ci = idx.get(cp) ?? -1;
      if (ns > seg && (ci < 0 || prevCi < 0 || !pairs.has(prevCi * nc + ci))) {
        this.mergeSegment(text, seg, ns, out);
        seg = ns;
      }
      start[ns] = i;
      size[ns] = w;
      ns++;
      prevCi = ci;
      i += w;
    }
    this.mergeSegment(text, seg, ns, out);
  }

  /** Merge symbols [b, e) by score and append their ids. */
  private mergeSegment(text: string, b: number, e: number, out: number[]): void {
    const start = this.start;
    const size = this.size;
    const prev = this.prev;
    const next = this.next;
    for (let i = b; i < e; i++) {
      prev[i] = i - 1;
      next[i] = i + 1;
    }
    prev[b] = -1;
    next[e - 1] = -1;
    const textToId = this.vocab.textToId;
    if (e - b > 1) {
      const heap = this.heap;
      heap.clear();
      const tryAdd = (left: number, right: number): void => {
        if (left < 0 || right < 0) return;
        const s = start[left];
        const n = size[left] + size[right];
        const id = textToId.getRanges(text, s, s + n, 0, 0); // no substring allocated per candidate
        if (id === undefined || this.mergeable[id] === 0) return;
        // min-heap: negate the score so the highest score pops first; ties -> smallest left index.
        heap.push(-this.scores[id], left, right, n);
      };
      for (let i = b + 1; i < e; i++) tryAdd(i - 1, i);

      while (heap.pop()) {
        const left = heap.topK2;
        const right = heap.topA;
        const n = heap.topB;
        // stale: one side was merged away or grew since the candidate was queued
        if (size[left] === 0 || size[right] === 0 || next[left] !== right || size[left] + size[right] !== n) continue;
        size[left] = n;
        size[right] = 0;
        const nr = next[right];
        next[left] = nr;
        if (nr >= 0) prev[nr] = left;
        tryAdd(prev[left], left);
        tryAdd(left, nr);
      }
    }

    for (let i = b; i >= 0; i = next[i]) {
      const id = textToId.getRanges(text, start[i], start[i] + size[i], 0, 0);
      if (id !== undefined && (size[i] > 1 || this.mergeable[id] === 1)) {
        out.push(id);
        continue;
      }
      this.fallback(text.substring(start[i], start[i] + size[i]), out);
    }
  }

  private fallback(piece: string, out: number[]): void {
    if (this.hasAllBytes) {
      const bytes = utf8Encoder.encode(piece);
      for (let k = 0; k < bytes.length; k++) out.push(this.byteIds[bytes[k]]);
      return;
    }
    if (this.unkId === undefined) {
      throw new AetherError('tokenizer_error', `cannot encode ${JSON.stringify(piece)}: not in the vocabulary, no byte pieces and no unknown token`);
    }
    out.push(this.unkId);
  }
}

/** Replace spaces by '▁' (SentencePiece whitespace escaping). */
export function escapeSpm(text: string): string {
  return text.indexOf(' ') < 0 ? text : text.replace(/ /g, SPM_SPACE);
}
