/**
 * Tokenizer front end: createTokenizer(TokenizerData) for SentencePiece-style ('llama') and byte-level BPE
 * ('gpt2') vocabularies, with special-token handling, decoding and a streaming detokenizer.
 * Browser-safe: Node-only helpers live in import.ts (loaded dynamically there).
 *
 * Special tokens. Control (type 3) and unknown (type 2) tokens are matched as whole strings in the input
 * only with `parseSpecial: true` (default false, so user text cannot inject control tokens); user-defined
 * (type 4) tokens are always matched (llama.cpp's rule). For 'llama' the dummy-prefix space is added at the
 * start of the text and again after every special token, as llama.cpp does.
 *
 * Decoding. Control tokens decode to '' unless `skipSpecial: false` (then to their text); byte pieces are
 * reassembled into UTF-8 (invalid sequences become U+FFFD); for 'llama' with add_space_prefix the leading space
 * of the first piece that produces text is removed, so decode(encode(s)) === s.
 */
import { AetherError } from '../errors.js';
import type { TokenizerData } from './types.js';
import { KNOWN_EOG_TEXTS, SpecialMatcher, TokenType, Vocab, parseBytePiece, utf8Encoder } from './common.js';
import { SPM_SPACE, SpmModel, escapeSpm } from './spm.js';
import { BpeModel, bpePieceBytes } from './bpe.js';

export type { TokenizerData } from './types.js';
export { TokenType } from './common.js';

export interface EncodeOptions {
  /** Prepend BOS. Default: data.add_bos_token (true for 'llama' when unset, false for 'gpt2'). */
  addBos?: boolean;
  /** Append EOS. Default: data.add_eos_token ?? false. */
  addEos?: boolean;
  /** Match control tokens (e.g. <|im_start|>, <s>) written in the text. Default false. */
  parseSpecial?: boolean;
}

export interface DecodeOptions {
  /** Drop control tokens (BOS, EOS, <|im_end|>, ...). Default true. */
  skipSpecial?: boolean;
}

/** Streaming detokenizer: push ids one at a time, get back only complete UTF-8 text. */
export interface StreamDecoder {
  /** Text completed by this token ('' while a multi-byte character is still incomplete). */
  push(id: number): string;
  /** End of stream: returns whatever is held back (an incomplete sequence becomes U+FFFD) and resets. */
  flush(): string;
  /** Forget held-back bytes and the first-piece state. */
  reset(): void;
}

export interface Tokenizer {
  readonly model: 'llama' | 'gpt2';
  readonly data: TokenizerData;
  readonly vocabSize: number;
  readonly bosId: number | undefined;
  readonly eosId: number | undefined;
  readonly unkId: number | undefined;
  /** All ids that end generation: eos, eos_token_ids and known end-of-turn tokens present in the vocabulary. */
  readonly eogIds: ReadonlySet<number>;
  encode(text: string, opts?: EncodeOptions): number[];
  decode(ids: ArrayLike<number>, opts?: DecodeOptions): string;
  /** The vocabulary string of a token (e.g. '▁the', '<0x0A>', 'Ġthe'). */
  tokenToPiece(id: number): string;
  /** Id of a vocabulary string, or undefined. */
  pieceToId(piece: string): number | undefined;
  /** GGUF token type of an id (1 normal, 2 unknown, 3 control, 4 user-defined, 5 unused, 6 byte). */
  tokenType(id: number): number;
  /** The UTF-8 bytes a token adds to the text after other text (special tokens: their text). */
  tokenBytes(id: number): Uint8Array;
  isEog(id: number): boolean;
  createDecoder(opts?: DecodeOptions): StreamDecoder;
}

const EMPTY = new Uint8Array(0);
const UNK_SURFACE = utf8Encoder.encode(' \u2047 ');

class TokenizerImpl implements Tokenizer {
  readonly model: 'llama' | 'gpt2';
  readonly data: TokenizerData;
  readonly vocabSize: number;
  readonly bosId: number | undefined;
  readonly eosId: number | undefined;
  readonly unkId: number | undefined;
  readonly eogIds: ReadonlySet<number>;
  private readonly vocab: Vocab;
  private readonly spm?: SpmModel;
  private readonly bpe?: BpeModel;
  private readonly userMatcher: SpecialMatcher;
  private readonly allMatcher: SpecialMatcher;
  private readonly addSpacePrefix: boolean;
  private readonly defaultAddBos: boolean;
  private readonly defaultAddEos: boolean;
  private readonly normalize?: 'NFC' | 'NFD' | 'NFKC' | 'NFKD';
  /** Cached bytes per id for the normal (not first-piece) case (a Map: only the ids met, not a slot per token). */
  private readonly pieceCache = new Map<number, Uint8Array>();

  constructor(data: TokenizerData) {
    if (data === null || typeof data !== 'object') {
      throw new AetherError('tokenizer_error', 'tokenizer data: expected an object');
    }
    if (data.model !== 'llama' && data.model !== 'gpt2') {
      throw new AetherError('unsupported', `tokenizer data: model ${JSON.stringify(data.model)} is not supported (expected 'llama' or 'gpt2')`);
    }
    this.model = data.model;
    this.data = data;
    this.vocab = new Vocab(data);
    this.vocabSize = this.vocab.size;
    const v = this.vocab;
    this.bosId = v.checkId(data.bos_token_id as number, 'bos_token_id');
    this.eosId = v.checkId(data.eos_token_id as number, 'eos_token_id');
    this.unkId = v.checkId(data.unknown_token_id as number, 'unknown_token_id');
    if (this.model === 'llama') this.spm = new SpmModel(data, v);
    else this.bpe = new BpeModel(data, v);
    this.addSpacePrefix = this.model === 'llama' && (data.add_space_prefix ?? true);
    this.defaultAddBos = data.add_bos_token ?? this.model === 'llama';
    this.defaultAddEos = data.add_eos_token ?? false;
    this.normalize = data.normalize;

    const user: Array<[string, number]> = [];
    const all: Array<[string, number]> = [];
    for (let i = 0; i < v.size; i++) {
      const ty = v.types[i];
      if (ty === TokenType.USER_DEFINED) {
        user.push([v.tokens[i], i]);
        all.push([v.tokens[i], i]);
      } else if (ty === TokenType.CONTROL || ty === TokenType.UNKNOWN) {
        all.push([v.tokens[i], i]);
      }
    }
    this.userMatcher = new SpecialMatcher(user);
    this.allMatcher = new SpecialMatcher(all);

    const eog = new Set<number>();
    if (this.eosId !== undefined) eog.add(this.eosId);
    for (const id of data.eos_token_ids ?? []) {
      const c = v.checkId(id, 'eos_token_ids[]');
      if (c !== undefined) eog.add(c);
    }
    for (const t of KNOWN_EOG_TEXTS) {
      const id = v.textToId.get(t);
      if (id === undefined) continue;
      const ty = v.types[id];
      if (ty === TokenType.CONTROL || (data.token_type === undefined && ty === TokenType.NORMAL) || ty === TokenType.USER_DEFINED) {
        eog.add(id);
      }
    }
    this.eogIds = eog;
  }

  encode(text: string, opts: EncodeOptions = {}): number[] {
    if (typeof text !== 'string') {
      throw new AetherError('invalid_argument', `encode: expected a string, got ${typeof text}`);
    }
    const out: number[] = [];
    const addBos = opts.addBos ?? this.defaultAddBos;
    const addEos = opts.addEos ?? this.defaultAddEos;
    if (addBos) {
      if (this.bosId === undefined) {
        if (opts.addBos) throw new AetherError('tokenizer_error', 'encode: addBos requested but the tokenizer has no BOS token');
      } else out.push(this.bosId);
    }
    const fragments = (opts.parseSpecial ? this.allMatcher : this.userMatcher).split(text);
    let prevSpecial = true;
    for (const f of fragments) {
      if (f.id !== undefined) {
        out.push(f.id);
        prevSpecial = true;
        continue;
      }
      let t = f.text;
      if (this.normalize) t = t.normalize(this.normalize);
      if (this.spm) {
        if (this.addSpacePrefix && prevSpecial) t = ' ' + t;
        this.spm.encodeEscaped(escapeSpm(t), out);
      } else {
        (this.bpe as BpeModel).encodeText(t, out);
      }
      prevSpecial = false;
    }
    if (addEos) {
      if (this.eosId === undefined) {
        if (opts.addEos) throw new AetherError('tokenizer_error', 'encode: addEos requested but the tokenizer has no EOS token');
      } else out.push(this.eosId);
    }
    return out;
  }

  private checkToken(id: number): void {
    if (!Number.isInteger(id) || id < 0 || id >= this.vocabSize) {
      throw new AetherError('tokenizer_error', `token id ${id} is outside the vocabulary (size ${this.vocabSize})`);
    }
  }

  tokenToPiece(id: number): string {
    this.checkToken(id);
    return this.vocab.tokens[id];
  }

  pieceToId(piece: string): number | undefined {
    return this.vocab.textToId.get(piece);
  }

  tokenType(id: number): number {
    this.checkToken(id);
    return this.vocab.types[id];
  }

  isEog(id: number): boolean {
    return this.eogIds.has(id);
  }

  /**
   * Bytes a token contributes. `first` = no earlier token produced text (SPM leading-space rule).
   */
  pieceBytes(id: number, skipSpecial: boolean, first: boolean): Uint8Array {
    this.checkToken(id);
    const ty = this.vocab.types[id];
    if (ty === TokenType.CONTROL) return skipSpecial ? EMPTY : utf8Encoder.encode(this.vocab.tokens[id]);
    const tok = this.vocab.tokens[id];
    if (this.spm) {
      if (ty === TokenType.UNKNOWN) return UNK_SURFACE;
      if (ty === TokenType.BYTE) {
        const b = parseBytePiece(tok);
        if (b >= 0) return new Uint8Array([b]);
      }
      if (first && this.addSpacePrefix && tok.startsWith(SPM_SPACE)) {
        return utf8Encoder.encode(tok.slice(1).replaceAll(SPM_SPACE, ' '));
      }
      let c = this.pieceCache.get(id);
      if (c === undefined) {
        c = utf8Encoder.encode(tok.replaceAll(SPM_SPACE, ' '));
        this.pieceCache.set(id, c);
      }
      return c;
    }
    let c = this.pieceCache.get(id);
    if (c === undefined) {
      c = bpePieceBytes(tok, ty);
      this.pieceCache.set(id, c);
    }
    return c;
  }

  tokenBytes(id: number): Uint8Array { return this.pieceBytes(id, false, false); }

  /** After this token, later pieces keep their leading space (only skipped control tokens do not count). */
  private endsFirst(id: number, skipSpecial: boolean): boolean {
    return !(skipSpecial && this.vocab.types[id] === TokenType.CONTROL);
  }

  createDecoder(opts: DecodeOptions = {}): StreamDecoder {
    const skip = opts.skipSpecial ?? true;
    let td = new TextDecoder('utf-8', { ignoreBOM: true });
    let first = true;
    return {
      push: (id: number): string => {
        const bytes = this.pieceBytes(id, skip, first);
        if (this.endsFirst(id, skip)) first = false;
        return bytes.length === 0 ? '' : td.decode(bytes, { stream: true });
      },
      flush: (): string => {
        const s = td.decode();
        first = true;
        return s;
      },
      reset: (): void => {
        td = new TextDecoder('utf-8', { ignoreBOM: true });
        first = true;
      },
    };
  }

  decode(ids: ArrayLike<number>, opts: DecodeOptions = {}): string {
    const skip = opts.skipSpecial ?? true;
    const chunks: Uint8Array[] = [];
    let total = 0;
    let first = true;
    for (let i = 0; i < ids.length; i++) {
      const b = this.pieceBytes(ids[i], skip, first);
      if (this.endsFirst(ids[i], skip)) first = false;
      if (b.length === 0) continue;
      chunks.push(b);
      total += b.length;
    }
    const all = new Uint8Array(total);
    let o = 0;
    for (const c of chunks) {
      all.set(c, o);
      o += c.length;
    }
    return new TextDecoder('utf-8', { ignoreBOM: true }).decode(all);
  }
}

/** Build a tokenizer from TokenizerData (validated: bad data -> AetherError('tokenizer_error')). */
export function createTokenizer(data: TokenizerData): Tokenizer {
  return new TokenizerImpl(data);
}
