/**
 * Import a Hugging Face `tokenizer.json` (+ `tokenizer_config.json`, `special_tokens_map.json`,
 * `generation_config.json`) into TokenizerData. Browser-safe: takes parsed JSON or JSON text.
 *
 *  - model.type 'BPE' with a ByteLevel pre-tokenizer/decoder -> 'gpt2' (merges as "a b", pre from the Split regex);
 *  - model.type 'BPE' in SentencePiece style (byte_fallback, '▁' normalizer / Metaspace) -> 'llama', with scores
 *    derived from merge ranks: the piece made by merge r scores -r, so earlier merges win like SentencePiece's
 *    highest-score-first rule; pieces no merge makes score below all of them.
 *  - added_tokens: special -> control (3), not special -> user-defined (4); holes in the id range become unused.
 */
import { AetherError } from '../errors.js';
import type { TokenizerData } from './types.js';
import { TokenType, parseBytePiece } from './common.js';

type Json = Record<string, unknown>;

export interface HFTokenizerSources {
  /** tokenizer_config.json */
  config?: unknown;
  /** special_tokens_map.json */
  specialTokensMap?: unknown;
  /** generation_config.json */
  generationConfig?: unknown;
  /** Name used in error messages (default 'tokenizer.json'). */
  file?: string;
}

function fail(file: string, msg: string): never {
  throw new AetherError('tokenizer_error', `${file}: ${msg}`, { file });
}

export function parseJsonText(text: unknown, file: string): unknown {
  if (typeof text !== 'string') return text;
  try {
    return JSON.parse(text);
  } catch (e) {
    return fail(file, `invalid JSON (${(e as Error).message})`);
  }
}

function isObj(v: unknown): v is Json {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** Collect every component of a (possibly Sequence) normalizer / pre-tokenizer / decoder. */
function components(v: unknown): Json[] {
  if (!isObj(v)) return [];
  const out: Json[] = [v];
  for (const key of ['normalizers', 'pretokenizers', 'decoders', 'processors']) {
    const arr = v[key];
    if (Array.isArray(arr)) for (const c of arr) out.push(...components(c));
  }
  return out;
}

/** Token text of a config entry: "<s>" or { content: "<s>" }. */
export function tokenContent(v: unknown): string | undefined {
  if (typeof v === 'string') return v;
  if (isObj(v) && typeof v.content === 'string') return v.content;
  return undefined;
}

function patternOf(c: Json): string | undefined {
  const p = c.pattern;
  if (typeof p === 'string') return p;
  if (isObj(p)) {
    if (typeof p.Regex === 'string') return p.Regex;
    if (typeof p.String === 'string') return p.String;
  }
  return undefined;
}

/** Guess the GGUF `pre` name from a byte-level tokenizer's Split regex. */
export function preFromRegex(re: string | undefined): string {
  if (re === undefined) return 'gpt2';
  const contractionsI = re.includes("(?i:'s|'t|'re|'ve|'m|'ll|'d)");
  if (contractionsI && re.includes('\\p{N}{1,3}')) return 'llama-bpe';
  if (contractionsI && re.includes('\\p{N}')) return 'qwen2';
  return 'gpt2';
}

function chatTemplateOf(v: unknown): string | undefined {
  if (typeof v === 'string') return v;
  if (Array.isArray(v)) {
    const named = v.filter(isObj);
    const def = named.find((t) => t.name === 'default') ?? named[0];
    if (def && typeof def.template === 'string') return def.template;
  }
  return undefined;
}

function idList(v: unknown): number[] {
  if (typeof v === 'number' && Number.isInteger(v)) return [v];
  if (Array.isArray(v)) return v.filter((x): x is number => typeof x === 'number' && Number.isInteger(x));
  return [];
}

/**
 * Apply tokenizer_config.json / special_tokens_map.json / generation_config.json to TokenizerData (in place):
 * bos/eos/unk/pad by content, add_bos_token / add_eos_token, chat_template, extra eos ids.
 * Added tokens listed in config.added_tokens_decoder that are beyond the vocabulary are appended.
 */
export function applyHFConfig(data: TokenizerData, src: HFTokenizerSources): TokenizerData {
  const config = isObj(src.config) ? src.config : {};
  const stm = isObj(src.specialTokensMap) ? src.specialTokensMap : {};
  const gen = isObj(src.generationConfig) ? src.generationConfig : {};

  // added_tokens_decoder: {"151643": {content, special}, ...}
  const atd = config.added_tokens_decoder;
  if (isObj(atd)) {
    for (const [k, v] of Object.entries(atd)) {
      const id = Number(k);
      const content = tokenContent(v);
      if (!Number.isInteger(id) || id < 0 || content === undefined) continue;
      const special = isObj(v) ? v.special !== false : true;
      setToken(data, id, content, special ? TokenType.CONTROL : TokenType.USER_DEFINED);
    }
  }

  // token text -> id, preferring special entries (control / user-defined / unknown) over ordinary pieces
  const lookup = new Map<string, number>();
  const isSpecialType = (ty: number | undefined) =>
    ty === TokenType.CONTROL || ty === TokenType.USER_DEFINED || ty === TokenType.UNKNOWN;
  data.tokens.forEach((t, i) => {
    const prev = lookup.get(t);
    if (prev === undefined || (!isSpecialType(data.token_type?.[prev]) && isSpecialType(data.token_type?.[i]))) lookup.set(t, i);
  });
  const idOf = (name: string): number | undefined => {
    const t = tokenContent(config[name]) ?? tokenContent(stm[name]);
    return t === undefined ? undefined : lookup.get(t);
  };
  const bos = idOf('bos_token');
  const eos = idOf('eos_token');
  const unk = idOf('unk_token');
  const pad = idOf('pad_token');
  if (bos !== undefined) data.bos_token_id = bos;
  else if (typeof gen.bos_token_id === 'number' && data.bos_token_id === undefined) data.bos_token_id = gen.bos_token_id;
  if (eos !== undefined) data.eos_token_id = eos;
  if (unk !== undefined) data.unknown_token_id = unk;
  if (pad !== undefined) data.padding_token_id = pad;
  // bos_token: null in the config means "no BOS" (e.g. Qwen2)
  if ('bos_token' in config && config.bos_token === null && data.model === 'gpt2') {
    delete data.bos_token_id;
    data.add_bos_token = false;
  }
  // strict: a string such as "0" or "false" is refused, not taken as a truthy value
  for (const k of ['add_bos_token', 'add_eos_token'] as const) {
    const v = config[k];
    if (v === undefined || v === null) continue;
    if (typeof v !== 'boolean') fail((src.file ?? 'tokenizer.json').replace(/[^/\\]*$/, 'tokenizer_config.json'), `${k}: expected true or false, got ${JSON.stringify(v)}`);
    data[k] = v;
  }
  const tmpl = chatTemplateOf(config.chat_template);
  if (tmpl !== undefined) data.chat_template = tmpl;

  const extra = new Set<number>(data.eos_token_ids ?? []);
  for (const id of idList(gen.eos_token_id)) if (id >= 0 && id < data.tokens.length) extra.add(id);
  if (data.eos_token_id === undefined && extra.size > 0) data.eos_token_id = [...extra][0];
  if (data.eos_token_id !== undefined) extra.delete(data.eos_token_id);
  if (extra.size > 0) data.eos_token_ids = [...extra].sort((a, b) => a - b);
  return data;
}

/** Unused ids a vocabulary may have (holes between the ids of tokenizer.json / added_tokens_decoder). */
const MAX_ID_HOLES = 1 << 16;

function setToken(data: TokenizerData, id: number, content: string, type: number): void {
  const tokens = data.tokens;
  if (id >= tokens.length + MAX_ID_HOLES) {
    throw new AetherError('tokenizer_error', `tokenizer_config.json: added_tokens_decoder id ${id} (${JSON.stringify(content.slice(0, 40))}) is far beyond the vocabulary (${tokens.length} tokens)`, { id });
  }
  while (tokens.length <= id) {
    const i = tokens.length;
    tokens.push(`[PAD${i}]`);
    data.token_type?.push(TokenType.UNUSED);
    data.scores?.push(-1e9);
  }
  // an entry that already is this token's unknown piece stays 'unknown'
  if (tokens[id] === content && data.token_type?.[id] === TokenType.UNKNOWN) return;
  tokens[id] = content;
  if (data.token_type) data.token_type[id] = type;
}

/**
 * tokenizer.json (parsed object or text) + optional config files -> TokenizerData.
 */
export function tokenizerFromHFJson(tokenizerJson: unknown, src: HFTokenizerSources = {}): TokenizerData {
  const file = src.file ?? 'tokenizer.json';
  const tj = parseJsonText(tokenizerJson, file);
  if (!isObj(tj)) fail(file, 'expected a JSON object');
  const model = tj.model;
  if (!isObj(model)) fail(file, '"model" is missing');
  const mtype = model.type ?? (model.merges !== undefined ? 'BPE' : undefined);
  if (mtype !== 'BPE') {
    throw new AetherError('unsupported', `${file}: model.type ${JSON.stringify(mtype)} is not supported (only BPE)`);
  }
  const vocab = model.vocab;
  if (!isObj(vocab)) fail(file, 'model.vocab must be an object {token: id}');
  const rawMerges = model.merges;
  if (!Array.isArray(rawMerges)) fail(file, 'model.merges must be an array');
  const merges: string[] = rawMerges.map((m, i) => {
    if (typeof m === 'string') return m;
    if (Array.isArray(m) && m.length === 2 && typeof m[0] === 'string' && typeof m[1] === 'string') return `${m[0]} ${m[1]}`;
    return fail(file, `model.merges[${i}] must be "a b" or ["a", "b"]`);
  });
  const added = Array.isArray(tj.added_tokens) ? tj.added_tokens.filter(isObj) : [];

  // size of the id space
  let n = 0;
  for (const [t, id] of Object.entries(vocab)) {
    if (typeof id !== 'number' || !Number.isInteger(id) || id < 0) fail(file, `model.vocab[${JSON.stringify(t)}] = ${String(id)} is not a valid id`);
    if (id + 1 > n) n = id + 1;
  }
  for (const a of added) {
    if (typeof a.id === 'number' && Number.isInteger(a.id) && a.id >= 0 && a.id + 1 > n) n = a.id + 1;
  }
  if (n === 0) fail(file, 'empty vocabulary');
  if (n > 16_000_000) fail(file, `vocabulary id ${n - 1} is implausibly large`);
  // ids drive the allocation below: refuse an id space much sparser than its entries (real vocabularies are dense)
  const entries = Object.keys(vocab).length + added.length;
  if (n > entries + MAX_ID_HOLES) fail(file, `vocabulary ids go up to ${n - 1} but there are only ${entries} entries (more than ${MAX_ID_HOLES} unused ids)`);

  const pre = components(tj.pre_tokenizer);
  const norm = components(tj.normalizer);
  const dec = components(tj.decoder);
  const byteLevel = pre.some((c) => c.type === 'ByteLevel') || dec.some((c) => c.type === 'ByteLevel');
  const metaspace = pre.find((c) => c.type === 'Metaspace');
  const replacesSpace = norm.some((c) => c.type === 'Replace' && patternOf(c) === ' ' && c.content === '\u2581');
  const prepends = norm.some((c) => c.type === 'Prepend' && c.prepend === '\u2581');
  const spmStyle = model.byte_fallback === true || replacesSpace || metaspace !== undefined ||
    dec.some((c) => c.type === 'ByteFallback' || (c.type === 'Replace' && patternOf(c) === '\u2581'));
  if (!byteLevel && !spmStyle) {
    throw new AetherError('unsupported', `${file}: BPE without a ByteLevel or SentencePiece-style (▁, byte_fallback) pre-tokenizer is not supported`);
  }
  const kind: 'gpt2' | 'llama' = byteLevel ? 'gpt2' : 'llama';

  const tokens = new Array<string>(n);
  const types = new Array<number>(n).fill(TokenType.UNUSED);
  for (const [t, id] of Object.entries(vocab) as Array<[string, number]>) {
    tokens[id] = t;
    types[id] = TokenType.NORMAL;
  }
  for (let i = 0; i < n; i++) if (tokens[i] === undefined) tokens[i] = `[PAD${i}]`;

  const unkName = typeof model.unk_token === 'string' ? model.unk_token : undefined;
  if (kind === 'llama') {
    for (let i = 0; i < n; i++) {
      if (types[i] === TokenType.NORMAL && parseBytePiece(tokens[i]) >= 0) types[i] = TokenType.BYTE;
    }
  }
  for (const a of added) {
    if (typeof a.id !== 'number' || typeof a.content !== 'string') continue;
    tokens[a.id] = a.content;
    types[a.id] = a.special === false ? TokenType.USER_DEFINED : TokenType.CONTROL;
  }
  let unkId: number | undefined;
  if (unkName !== undefined) {
    unkId = (vocab[unkName] as number | undefined) ?? tokens.indexOf(unkName);
    if (unkId !== undefined && unkId >= 0) types[unkId] = TokenType.UNKNOWN;
    else unkId = undefined;
  }

  const data: TokenizerData = { model: kind, tokens, token_type: types };
  if (unkId !== undefined) data.unknown_token_id = unkId;

  if (kind === 'gpt2') {
    data.merges = merges;
    const split = pre.find((c) => c.type === 'Split');
    data.pre = preFromRegex(split ? patternOf(split) : undefined);
    // Digits(individual_digits) then ByteLevel's own GPT-2 regex: SmolLM / StarCoder ('smollm' in llama.cpp)
    if (!split && pre.some((c) => c.type === 'Digits' && c.individual_digits === true)) data.pre = 'smollm';
    if (typeof model.ignore_merges === 'boolean') data.ignore_merges = model.ignore_merges;
    const nf = norm.find((c) => c.type === 'NFC' || c.type === 'NFD' || c.type === 'NFKC' || c.type === 'NFKD');
    if (nf) data.normalize = nf.type as 'NFC' | 'NFD' | 'NFKC' | 'NFKD';
    data.add_bos_token = false;
  } else {
    // scores from merge ranks
    const scores = new Array<number>(n).fill(NaN);
    const t2i = new Map<string, number>();
    for (let i = 0; i < n; i++) if (!t2i.has(tokens[i])) t2i.set(tokens[i], i);
    for (let r = 0; r < merges.length; r++) {
      const m = merges[r];
      const sp = m.indexOf(' ', 1);
      if (sp < 0) continue;
      const id = t2i.get(m.slice(0, sp) + m.slice(sp + 1));
      if (id !== undefined && Number.isNaN(scores[id])) scores[id] = -r;
    }
    const floor = -merges.length;
    for (let i = 0; i < n; i++) if (Number.isNaN(scores[i])) scores[i] = types[i] === TokenType.NORMAL ? floor - i : 0;
    data.scores = scores;
    let space = prepends;
    if (metaspace) {
      const scheme = metaspace.prepend_scheme;
      space = scheme === 'always' || scheme === 'first' || (scheme === undefined && metaspace.add_prefix_space !== false);
    }
    data.add_space_prefix = space;
    data.add_bos_token = true;
  }

  // BOS/EOS from the post-processor template (e.g. Llama 3 adds <|begin_of_text|> there)
  const post = components(tj.post_processor).find((c) => c.type === 'TemplateProcessing');
  if (post && Array.isArray(post.single)) {
    const single = post.single.filter(isObj);
    const firstSpecial = isObj(single[0]?.SpecialToken) ? (single[0].SpecialToken as Json).id : undefined;
    const last = single[single.length - 1];
    const lastSpecial = isObj(last?.SpecialToken) ? (last.SpecialToken as Json).id : undefined;
    const idOfName = (name: unknown): number | undefined => {
      if (typeof name !== 'string') return undefined;
      const i = tokens.indexOf(name);
      return i >= 0 ? i : undefined;
    };
    const b = idOfName(firstSpecial);
    data.add_bos_token = b !== undefined;
    if (b !== undefined) data.bos_token_id = b;
    const e = single.length > 1 ? idOfName(lastSpecial) : undefined;
    if (e !== undefined) {
      data.add_eos_token = true;
      data.eos_token_id = e;
    }
  }
  return applyHFConfig(data, { ...src, file });
}
