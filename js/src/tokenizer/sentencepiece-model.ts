/**
 * Minimal protobuf decoder for SentencePiece's `tokenizer.model` (sentencepiece_model.proto, ModelProto).
 * Only the fields a tokenizer needs are kept; unknown fields are skipped. Every read is bounds-checked and
 * a malformed file raises AetherError('tokenizer_error') naming the file and the byte offset.
 * Browser-safe: works on a Uint8Array.
 */
import { AetherError } from '../errors.js';
import type { TokenizerData } from './types.js';
import { TokenType } from './common.js';

/** ModelProto.SentencePiece.Type (same numbering as GGUF token types). */
export type SentencePieceType = 1 | 2 | 3 | 4 | 5 | 6;

export interface SentencePiece {
  piece: string;
  score: number;
  type: SentencePieceType;
}

export interface SentencePieceTrainerSpec {
  /** 1 UNIGRAM, 2 BPE, 3 WORD, 4 CHAR. */
  model_type: number;
  vocab_size?: number;
  split_digits: boolean;
  byte_fallback: boolean;
  treat_whitespace_as_suffix: boolean;
  allow_whitespace_only_pieces: boolean;
  unk_id: number;
  bos_id: number;
  eos_id: number;
  pad_id: number;
  unk_piece?: string;
  /** Text an unknown piece decodes to (SentencePiece default ' \u2047 '). */
  unk_surface?: string;
  bos_piece?: string;
  eos_piece?: string;
  pad_piece?: string;
}

export interface SentencePieceNormalizerSpec {
  name?: string;
  add_dummy_prefix: boolean;
  remove_extra_whitespaces: boolean;
  escape_whitespaces: boolean;
  /** Size of precompiled_charsmap in bytes (the map itself is not kept). */
  precompiled_charsmap_size: number;
}

export interface SentencePieceModel {
  pieces: SentencePiece[];
  trainer_spec: SentencePieceTrainerSpec;
  normalizer_spec: SentencePieceNormalizerSpec;
}

const MODEL_TYPE_NAMES: Record<number, string> = { 1: 'UNIGRAM', 2: 'BPE', 3: 'WORD', 4: 'CHAR' };

class PbReader {
  readonly buf: Uint8Array;
  readonly view: DataView;
  pos: number;
  readonly end: number;
  readonly file: string;
  private static readonly utf8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });

  constructor(buf: Uint8Array, start: number, end: number, file: string) {
    this.buf = buf;
    this.view = new DataView(buf.buffer, buf.byteOffset, buf.byteLength);
    this.pos = start;
    this.end = end;
    this.file = file;
  }

  fail(what: string, at = this.pos): never {
    throw new AetherError('tokenizer_error', `${this.file}: malformed SentencePiece model at byte offset ${at}: ${what}`, {
      file: this.file,
      offset: at,
    });
  }

  /** Varint as a JS number (exact up to 2^53) plus its low 32 bits (for int32 fields, negative values). */
  lo32 = 0;
  varint(): number {
    const start = this.pos;
    let result = 0;
    let mul = 1;
    let lo = 0;
    for (let i = 0; ; i++) {
      if (i >= 10) this.fail('varint longer than 10 bytes', start);
      if (this.pos >= this.end) this.fail('truncated varint', start);
      const b = this.buf[this.pos++];
      if (i < 5) lo |= (b & 0x7f) << (7 * i);
      result += (b & 0x7f) * mul;
      mul *= 128;
      if ((b & 0x80) === 0) break;
    }
    this.lo32 = lo;
    return result;
  }

  int32(): number {
    this.varint();
    return this.lo32 | 0;
  }

  bool(): boolean {
    return this.varint() !== 0;
  }

  float(): number {
    if (this.pos + 4 > this.end) this.fail('truncated fixed32 field');
    const v = this.view.getFloat32(this.pos, true);
    this.pos += 4;
    return v;
  }

  /** Length-delimited field: returns [start, end) of the payload and advances past it. */
  lengthDelimited(): [number, number] {
    const at = this.pos;
    const len = this.varint();
    if (len > this.end - this.pos) this.fail(`length ${len} runs past the end of the enclosing message (${this.end - this.pos} bytes left)`, at);
    const s = this.pos;
    this.pos += len;
    return [s, this.pos];
  }

  string(): string {
    const [s, e] = this.lengthDelimited();
    try {
      return PbReader.utf8.decode(this.buf.subarray(s, e));
    } catch {
      return this.fail('string field is not valid UTF-8', s);
    }
  }

  skip(wireType: number, tagAt: number): void {
    switch (wireType) {
      case 0: this.varint(); break;
      case 1:
        if (this.pos + 8 > this.end) this.fail('truncated fixed64 field');
        this.pos += 8;
        break;
      case 2: this.lengthDelimited(); break;
      case 5:
        if (this.pos + 4 > this.end) this.fail('truncated fixed32 field');
        this.pos += 4;
        break;
      default:
        this.fail(`unsupported wire type ${wireType}`, tagAt);
    }
  }

  sub(range: [number, number]): PbReader {
    return new PbReader(this.buf, range[0], range[1], this.file);
  }

  /** Iterate fields: callback gets (field number, wire type, tag offset). */
  forEach(cb: (field: number, wt: number, at: number) => void): void {
    while (this.pos < this.end) {
      const at = this.pos;
      const tag = this.varint();
      const field = Math.floor(tag / 8);
      const wt = tag % 8;
      if (field === 0) this.fail('field number 0', at);
      cb(field, wt, at);
    }
  }

  expect(wt: number, want: number, field: string, at: number): void {
    if (wt !== want) this.fail(`field ${field} has wire type ${wt}, expected ${want}`, at);
  }
}

function readPiece(r: PbReader, index: number): SentencePiece {
  let piece: string | undefined;
  let score = 0;
  let type = 1;
  const start = r.pos;
  r.forEach((f, wt, at) => {
    if (f === 1) { r.expect(wt, 2, 'SentencePiece.piece', at); piece = r.string(); }
    else if (f === 2) { r.expect(wt, 5, 'SentencePiece.score', at); score = r.float(); }
    else if (f === 3) { r.expect(wt, 0, 'SentencePiece.type', at); type = r.int32(); }
    else r.skip(wt, at);
  });
  if (piece === undefined) r.fail(`pieces[${index}] has no "piece" string`, start);
  if (type < 1 || type > 6) r.fail(`pieces[${index}] ("${piece}") has type ${type}, expected 1..6`, start);
  return { piece, score, type: type as SentencePieceType };
}

function readTrainerSpec(r: PbReader): SentencePieceTrainerSpec {
  const t: SentencePieceTrainerSpec = {
    model_type: 1,
    split_digits: false,
    byte_fallback: false,
    treat_whitespace_as_suffix: false,
    allow_whitespace_only_pieces: false,
    unk_id: 0,
    bos_id: 1,
    eos_id: 2,
    pad_id: -1,
  };
  r.forEach((f, wt, at) => {
    const want = (w: number, name: string) => r.expect(wt, w, `TrainerSpec.${name}`, at);
    switch (f) {
      case 3: want(0, 'model_type'); t.model_type = r.int32(); break;
      case 4: want(0, 'vocab_size'); t.vocab_size = r.int32(); break;
      case 25: want(0, 'split_digits'); t.split_digits = r.bool(); break;
      case 24: want(0, 'treat_whitespace_as_suffix'); t.treat_whitespace_as_suffix = r.bool(); break;
      case 26: want(0, 'allow_whitespace_only_pieces'); t.allow_whitespace_only_pieces = r.bool(); break;
      case 35: want(0, 'byte_fallback'); t.byte_fallback = r.bool(); break;
      case 40: want(0, 'unk_id'); t.unk_id = r.int32(); break;
      case 41: want(0, 'bos_id'); t.bos_id = r.int32(); break;
      case 42: want(0, 'eos_id'); t.eos_id = r.int32(); break;
      case 43: want(0, 'pad_id'); t.pad_id = r.int32(); break;
      case 44: want(2, 'unk_surface'); t.unk_surface = r.string(); break;
      case 45: want(2, 'unk_piece'); t.unk_piece = r.string(); break;
      case 46: want(2, 'bos_piece'); t.bos_piece = r.string(); break;
      case 47: want(2, 'eos_piece'); t.eos_piece = r.string(); break;
      case 48: want(2, 'pad_piece'); t.pad_piece = r.string(); break;
      default: r.skip(wt, at);
    }
  });
  return t;
}

function readNormalizerSpec(r: PbReader): SentencePieceNormalizerSpec {
  const n: SentencePieceNormalizerSpec = {
    add_dummy_prefix: true,
    remove_extra_whitespaces: true,
    escape_whitespaces: true,
    precompiled_charsmap_size: 0,
  };
  r.forEach((f, wt, at) => {
    const want = (w: number, name: string) => r.expect(wt, w, `NormalizerSpec.${name}`, at);
    switch (f) {
      case 1: want(2, 'name'); n.name = r.string(); break;
      case 2: { want(2, 'precompiled_charsmap'); const [s, e] = r.lengthDelimited(); n.precompiled_charsmap_size = e - s; break; }
      case 3: want(0, 'add_dummy_prefix'); n.add_dummy_prefix = r.bool(); break;
      case 4: want(0, 'remove_extra_whitespaces'); n.remove_extra_whitespaces = r.bool(); break;
      case 5: want(0, 'escape_whitespaces'); n.escape_whitespaces = r.bool(); break;
      default: r.skip(wt, at);
    }
  });
  return n;
}

/**
 * Decode the bytes of a SentencePiece `tokenizer.model`.
 * @param file name used in error messages
 */
export function parseSentencePieceModel(bytes: Uint8Array, file = 'tokenizer.model'): SentencePieceModel {
  if (!(bytes instanceof Uint8Array)) {
    throw new AetherError('tokenizer_error', `${file}: expected the file bytes as a Uint8Array`);
  }
  const r = new PbReader(bytes, 0, bytes.length, file);
  const pieces: SentencePiece[] = [];
  let trainer: SentencePieceTrainerSpec | undefined;
  let normalizer: SentencePieceNormalizerSpec | undefined;
  r.forEach((f, wt, at) => {
    if (f === 1) {
      r.expect(wt, 2, 'ModelProto.pieces', at);
      pieces.push(readPiece(r.sub(r.lengthDelimited()), pieces.length));
    } else if (f === 2) {
      r.expect(wt, 2, 'ModelProto.trainer_spec', at);
      trainer = readTrainerSpec(r.sub(r.lengthDelimited()));
    } else if (f === 3) {
      r.expect(wt, 2, 'ModelProto.normalizer_spec', at);
      normalizer = readNormalizerSpec(r.sub(r.lengthDelimited()));
    } else {
      r.skip(wt, at);
    }
  });
  if (pieces.length === 0) r.fail('no pieces (not a SentencePiece model?)', 0);
  if (trainer === undefined) return r.fail('no trainer_spec (not a SentencePiece model?)', 0);
  normalizer ??= {
    add_dummy_prefix: true,
    remove_extra_whitespaces: true,
    escape_whitespaces: true,
    precompiled_charsmap_size: 0,
  };
  return { pieces, trainer_spec: trainer as SentencePieceTrainerSpec, normalizer_spec: normalizer };
}

/**
 * Convert a parsed SentencePiece model to TokenizerData (model 'llama').
 * Only BPE models are supported: the 'llama' encoder merges by piece score, which is what
 * SentencePiece does for BPE; a Unigram model needs Viterbi segmentation.
 */
export function sentencePieceToTokenizerData(m: SentencePieceModel, file = 'tokenizer.model'): TokenizerData {
  const ts = m.trainer_spec;
  if (ts.model_type !== 2) {
    throw new AetherError('unsupported', `${file}: SentencePiece model_type ${MODEL_TYPE_NAMES[ts.model_type] ?? ts.model_type} is not supported (only BPE)`);
  }
  const n = m.pieces.length;
  const tokens = new Array<string>(n);
  const scores = new Array<number>(n);
  const types = new Array<number>(n);
  for (let i = 0; i < n; i++) {
    const p = m.pieces[i];
    tokens[i] = p.piece;
    scores[i] = p.score;
    types[i] = p.type;
  }
  const id = (v: number, name: string): number | undefined => {
    if (v < 0) return undefined;
    if (v >= n) throw new AetherError('tokenizer_error', `${file}: trainer_spec.${name} = ${v} is outside the ${n} pieces`);
    return v;
  };
  const data: TokenizerData = {
    model: 'llama',
    tokens,
    scores,
    token_type: types,
    add_bos_token: true,
    add_eos_token: false,
    add_space_prefix: m.normalizer_spec.add_dummy_prefix,
  };
  const unk = id(ts.unk_id, 'unk_id');
  const bos = id(ts.bos_id, 'bos_id');
  const eos = id(ts.eos_id, 'eos_id');
  const pad = id(ts.pad_id, 'pad_id');
  if (unk !== undefined) data.unknown_token_id = unk;
  if (bos !== undefined) data.bos_token_id = bos;
  else data.add_bos_token = false;
  if (eos !== undefined) data.eos_token_id = eos;
  if (pad !== undefined) data.padding_token_id = pad;
  if (unk !== undefined && types[unk] === TokenType.NORMAL) types[unk] = TokenType.UNKNOWN;
  return data;
}

/** Bytes of a `tokenizer.model` -> TokenizerData. */
export function tokenizerFromSentencePiece(bytes: Uint8Array, file = 'tokenizer.model'): TokenizerData {
  return sentencePieceToTokenizerData(parseSentencePieceModel(bytes, file), file);
}
