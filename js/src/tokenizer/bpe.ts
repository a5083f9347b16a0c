/**
 * Byte-level BPE (GGUF tokenizer.ggml.model = 'gpt2'), as used by GPT-2, Llama 3, Qwen2 and many others.
 *
 *  - plain text (special tokens are split off by the caller) is cut into pre-tokens by a regex chosen by `pre`,
 *  - each pre-token's UTF-8 bytes are mapped to printable characters with GPT-2's byte-to-unicode table,
 *  - the characters are merged by merge rank (lowest rank first, ties leftmost) using a heap over a linked list,
 *  - decoding maps characters back to bytes through the inverse table.
 * Browser-safe.
 */
import { AetherError } from '../errors.js';
import type { TokenizerData } from './types.js';
import { NumHeap, TokenType, Vocab, utf8Encoder } from './common.js';

/** GPT-2's reversible byte -> printable code point table. */
export function bytesToUnicode(): string[] {
  const table = new Array<string>(256);
  let extra = 0;
  for (let b = 0; b < 256; b++) {
    const printable = (b >= 0x21 && b <= 0x7e) || (b >= 0xa1 && b <= 0xac) || (b >= 0xae && b <= 0xff);
    table[b] = String.fromCharCode(printable ? b : 256 + extra++);
  }
  return table;
}

export const BYTE_TO_UNICODE: readonly string[] = bytesToUnicode();
export const UNICODE_TO_BYTE: ReadonlyMap<string, number> = new Map(BYTE_TO_UNICODE.map((c, b) => [c, b]));

// Rust regex `(?i:'s|'t|...)` spelled out (JS has no inline flags); 'ſ' (U+017F) case-folds to 's'.
const CONTRACTIONS_I = "'[sSſ]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD]";

const GPT2_PATTERN = "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";

/**
 * Pre-tokenizer regexes by GGUF `tokenizer.ggml.pre` name. A list is applied in sequence, each regex splitting the
 * pieces the previous one made (llama.cpp's regex_exprs in src/llama-vocab.cpp; Hugging Face's Sequence pre-tokenizer).
 */
export const PRETOKENIZER_PATTERNS: Readonly<Record<string, string | readonly string[]>> = {
  gpt2: GPT2_PATTERN,
  'llama-bpe': `${CONTRACTIONS_I}|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+`,
  qwen2: `${CONTRACTIONS_I}|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+`,
  // SmolLM / StarCoder: every digit its own piece first (HF Digits(individual_digits) before ByteLevel), then GPT-2's regex
  smollm: ['\\p{N}', GPT2_PATTERN],
};

/** Other `pre` names that share one of the patterns above. */
const PRE_ALIASES: Readonly<Record<string, string>> = {
  llama3: 'llama-bpe',
  'llama-v3': 'llama-bpe',
  dbrx: 'llama-bpe',
  'smaug-bpe': 'llama-bpe',
  qwen: 'qwen2',
  stablelm2: 'qwen2',
  'deepseek-r1-qwen': 'qwen2',
  default: 'gpt2',
  olmo: 'gpt2',
  starcoder: 'smollm',
  refact: 'smollm',
  'command-r': 'smollm',
  codeshell: 'smollm',
  exaone: 'smollm',
  minerva: 'smollm',
  mpt: 'gpt2',
  jais: 'gpt2',
  'jina-es': 'gpt2',
  'jina-de': 'gpt2',
  'gpt-2': 'gpt2',
};

/** Canonical pattern name for a `pre` value (unknown names fall back to 'gpt2'). */
export function canonicalPre(pre: string | undefined): string {
  if (!pre) return 'gpt2';
  if (PRETOKENIZER_PATTERNS[pre]) return pre;
  return PRE_ALIASES[pre] ?? 'gpt2';
}

/** Split text into pre-tokens with one or a sequence of global regexes (each applied to the previous one's pieces). */
export function preTokenizeSeq(text: string, res: readonly RegExp[]): string[] {
  let pieces = [text];
  for (const re of res) pieces = pieces.flatMap((p) => preTokenize(p, re));
  return pieces;
}

/** Split text into pre-tokens with a global regex; characters the regex skips become their own pieces. */
export function preTokenize(text: string, re: RegExp): string[] {
  const out: string[] = [];
  re.lastIndex = 0;
  let last = 0;
  let m: RegExpExecArray | null;
  while ((m = re.exec(text)) !== null) {
    if (m[0].length === 0) {
      re.lastIndex++;
      continue;
    }
    if (m.index > last) out.push(text.slice(last, m.index));
    out.push(m[0]);
    last = m.index + m[0].length;
  }
  if (last < text.length) out.push(text.slice(last));
  return out;
}

const CACHE_LIMIT = 50000;

export class BpeModel {
  readonly vocab: Vocab;
  readonly pre: string;
  readonly ignoreMerges: boolean;
  private readonly res: RegExp[];
  /**
   * Merge ranks by pair, compact (12 bytes a merge where a Map of number keys took ~48): the merges of left id a are
   * pairRows[rowStart[a] .. rowStart[a + 1]), each right id * M + rank (M = merges + 1), sorted; the lowest rank of
   * a pair (the first of duplicated merges) is found by binary search.
   */
  private readonly rowStart: Int32Array;
  private readonly pairRows: Float64Array;
  private readonly M: number;
  /** merge rank -> merged id */
  private readonly mergeResult: Int32Array;
  /** byte value -> id of its byte-level character token, or -1 */
  private readonly byteTokenIds: Int32Array;
  private readonly unkId: number | undefined;
  private readonly heap = new NumHeap();
  private cache = new Map<string, number[]>();

  constructor(data: TokenizerData, vocab: Vocab) {
    this.vocab = vocab;
    this.pre = canonicalPre(data.pre);
    this.ignoreMerges = data.ignore_merges ?? this.pre === 'llama-bpe';
    const pat = PRETOKENIZER_PATTERNS[this.pre];
    this.res = (typeof pat === 'string' ? [pat] : pat).map((p) => new RegExp(p, 'gu'));
    const merges = data.merges;
    if (!merges) {
      throw new AetherError('tokenizer_error', "tokenizer data: model 'gpt2' needs merges");
    }
    const V = vocab.size;
    const t2i = vocab.textToId;
    const nm = merges.length;
    this.mergeResult = new Int32Array(nm).fill(-1);
    const left = new Int32Array(nm).fill(-1), right = new Int32Array(nm);
    const rowStart = new Int32Array(V + 1);
    for (let r = 0; r < nm; r++) {
      const m = merges[r];
      if (typeof m !== 'string') {
        throw new AetherError('tokenizer_error', `tokenizer data: merges[${r}] is ${typeof m}, expected "a b"`);
      }
      const sp = m.indexOf(' ', 1);
      if (sp < 0) {
        throw new AetherError('tokenizer_error', `tokenizer data: merges[${r}] = ${JSON.stringify(m)} has no space separator`);
      }
      const a = t2i.getRanges(m, 0, sp, sp, sp);
      const b = t2i.getRanges(m, sp + 1, m.length, 0, 0);
      const ab = t2i.getRanges(m, 0, sp, sp + 1, m.length);
      if (a === undefined || b === undefined || ab === undefined) continue;
      left[r] = a; right[r] = b;
      this.mergeResult[r] = ab;
      rowStart[a + 1]++;
    }
    for (let a = 0; a < V; a++) rowStart[a + 1] += rowStart[a];
    const M = nm + 1;
    const rows = new Float64Array(rowStart[V]);
    const fill = rowStart.slice(0, V);
    for (let r = 0; r < nm; r++) if (left[r] >= 0) rows[fill[left[r]]++] = right[r] * M + r;
    for (let a = 0; a < V; a++) if (rowStart[a + 1] - rowStart[a] > 1) rows.subarray(rowStart[a], rowStart[a + 1]).sort();
    // a duplicated pair: the binary search finds its lowest rank (the first merge), as the Map did; later ones never merge
    this.rowStart = rowStart; this.pairRows = rows; this.M = M;
    this.byteTokenIds = new Int32Array(256).fill(-1);
    for (let b = 0; b < 256; b++) {
      const id = t2i.get(BYTE_TO_UNICODE[b]);
      if (id !== undefined) this.byteTokenIds[b] = id;
    }
    this.unkId = data.unknown_token_id !== undefined ? vocab.checkId(data.unknown_token_id, 'unknown_token_id') : undefined;
  }

  /** Lowest merge rank of the pair (a, b), or -1. */
  private rank(a: number, b: number): number {
    let lo = this.rowStart[a], hi = this.rowStart[a + 1];
    const rows = this.pairRows, M = this.M, key = b * M;
    while (lo < hi) { const mid = (lo + hi) >> 1; if (rows[mid] < key) lo = mid + 1; else hi = mid; }
    return lo < this.rowStart[a + 1] && rows[lo] < key + M ? rows[lo] - key : -1;
  }

  /** Encode plain text (no special tokens); appends ids to out. */
  encodeText(text: string, out: number[]): void {
    for (const word of preTokenizeSeq(text, this.res)) this.encodeWord(word, out);
  }

  private encodeWord(word: string, out: number[]): void {
    const cached = this.cache.get(word);
    if (cached) {
      for (const id of cached) out.push(id);
      return;
    }
    const bytes = utf8Encoder.encode(word);
    const res: number[] = [];
    let direct: number | undefined;
    if (this.ignoreMerges) {
      let mapped = '';
      for (let i = 0; i < bytes.length; i++) mapped += BYTE_TO_UNICODE[bytes[i]];
      direct = this.vocab.textToId.get(mapped);
    }
    if (direct !== undefined) res.push(direct);
    else this.mergeBytes(bytes, res);
    if (this.cache.size >= CACHE_LIMIT) this.cache = new Map();
    this.cache.set(word, res);
    for (const id of res) out.push(id);
  }

  private mergeBytes(bytes: Uint8Array, out: number[]): void {
    const n = bytes.length;
    const ids = new Int32Array(n);
    const prev = new Int32Array(n);
    const next = new Int32Array(n);
    let ns = 0;
    for (let i = 0; i < n; i++) {
      const id = this.byteTokenIds[bytes[i]];
      if (id < 0) {
        // a byte without a token becomes unk (a symbol that never merges), or is dropped like llama.cpp does
        if (this.unkId === undefined) continue;
        ids[ns] = -1 - this.unkId;
      } else {
        ids[ns] = id;
      }
      prev[ns] = ns - 1;
      next[ns] = ns + 1;
      ns++;
    }
    if (ns === 0) return;
    next[ns - 1] = -1;
    if (ns > 1) {
      const heap = this.heap;
      heap.clear();
      const tryAdd = (l: number, r: number): void => {
        if (l < 0 || r < 0 || ids[l] < 0 || ids[r] < 0) return;
        const rank = this.rank(ids[l], ids[r]);
        if (rank >= 0) heap.push(rank, l, r, ids[r]);
      };
      for (let i = 1; i < ns; i++) tryAdd(i - 1, i);
      while (heap.pop()) {
        const rank = heap.topK1;
        const l = heap.topK2;
        const r = heap.topA;
        // stale if l was merged away, r is no longer l's neighbour, or either side changed
        if (ids[l] === -2147483648 || next[l] !== r || ids[r] !== heap.topB) continue;
        if (this.rank(ids[l], ids[r]) !== rank) continue;
        ids[l] = this.mergeResult[rank];
        ids[r] = -2147483648;
        const nr = next[r];
        next[l] = nr;
        if (nr >= 0) prev[nr] = l;
        tryAdd(prev[l], l);
        tryAdd(l, nr);
      }
    }
    for (let i = 0; i >= 0; i = next[i]) {
      const id = ids[i];
      out.push(id >= 0 ? id : -1 - id);
    }
  }
}

/** Bytes of one byte-level BPE piece (characters outside the byte table are taken as UTF-8 text). */
export function bpePieceBytes(piece: string, type: number): Uint8Array {
  if (type === TokenType.NORMAL || type === TokenType.BYTE || type === TokenType.UNKNOWN) {
    const out = new Uint8Array(piece.length);
    let ok = true;
    for (let i = 0; i < piece.length; i++) {
      const b = UNICODE_TO_BYTE.get(piece[i]);
      if (b === undefined) {
        ok = false;
        break;
      }
      out[i] = b;
    }
    if (ok) return out;
  }
  return utf8Encoder.encode(piece);
}
