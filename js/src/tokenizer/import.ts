/**
 * TokenizerData from a GGUF file's metadata (tokenizer.ggml.* keys) or from a Hugging Face model folder.
 *
 * tokenizerFromGGUFMetadata is browser-safe. tokenizerFromHFFolder is Node-only: it loads node:fs/promises
 * and node:path with a dynamic import when called, so bundling this module for a browser pulls in nothing
 * from Node.
 */
import { AetherError } from '../errors.js';
import type { TokenizerData } from './types.js';
import { tokenizerFromSentencePiece } from './sentencepiece-model.js';
import { applyHFConfig, parseJsonText, tokenizerFromHFJson } from './tokenizer-json.js';
import { canonicalPre } from './bpe.js';

export { tokenizerFromSentencePiece, parseSentencePieceModel } from './sentencepiece-model.js';
export { tokenizerFromHFJson, applyHFConfig } from './tokenizer-json.js';

function bad(key: string, what: string): never {
  throw new AetherError('tokenizer_error', `GGUF metadata ${key}: ${what}`, { key });
}

/** Unwrap `{ type, value }` wrappers some GGUF readers produce. */
function raw(v: unknown): unknown {
  if (v !== null && typeof v === 'object' && !Array.isArray(v) && !ArrayBuffer.isView(v) && 'value' in (v as object)) {
    return (v as { value: unknown }).value;
  }
  return v;
}

function num(kv: Map<string, unknown>, key: string): number | undefined {
  const v = raw(kv.get(key));
  if (v === undefined || v === null) return undefined;
  const n = typeof v === 'bigint' ? Number(v) : v;
  if (typeof n !== 'number' || !Number.isFinite(n)) bad(key, `expected a number, got ${typeof v}`);
  return n;
}

function bool(kv: Map<string, unknown>, key: string): boolean | undefined {
  const v = raw(kv.get(key));
  if (v === undefined || v === null) return undefined;
  if (typeof v === 'boolean') return v;
  if ((typeof v === 'number' || typeof v === 'bigint') && (Number(v) === 0 || Number(v) === 1)) return Number(v) === 1;
  return bad(key, `expected a boolean, got ${typeof v} ${JSON.stringify(typeof v === 'bigint' ? String(v) : v)}`);
}

function str(kv: Map<string, unknown>, key: string): string | undefined {
  const v = raw(kv.get(key));
  if (v === undefined || v === null) return undefined;
  if (typeof v !== 'string') bad(key, `expected a string, got ${typeof v}`);
  return v;
}

function arr(kv: Map<string, unknown>, key: string): ArrayLike<unknown> | undefined {
  const v = raw(kv.get(key));
  if (v === undefined || v === null) return undefined;
  if (Array.isArray(v) || (ArrayBuffer.isView(v) && !(v instanceof DataView))) return v as unknown as ArrayLike<unknown>;
  return bad(key, `expected an array, got ${typeof v}`);
}

function strings(kv: Map<string, unknown>, key: string): string[] | undefined {
  const a = arr(kv, key);
  if (a === undefined) return undefined;
  const out = new Array<string>(a.length);
  for (let i = 0; i < a.length; i++) {
    const s = a[i];
    if (typeof s !== 'string') bad(key, `element ${i} is ${typeof s}, expected a string`);
    out[i] = s;
  }
  return out;
}

function numbers(kv: Map<string, unknown>, key: string): number[] | undefined {
  const a = arr(kv, key);
  if (a === undefined) return undefined;
  const out = new Array<number>(a.length);
  for (let i = 0; i < a.length; i++) {
    const x = a[i];
    const n = typeof x === 'bigint' ? Number(x) : x;
    if (typeof n !== 'number') bad(key, `element ${i} is ${typeof x}, expected a number`);
    if (!Number.isFinite(n)) bad(key, `element ${i} is ${n}, expected a finite number`);
    out[i] = n;
  }
  return out;
}

/**
 * GGUF metadata (key -> value, as read from the file) -> TokenizerData.
 * Reads tokenizer.ggml.{model, pre, tokens, scores, token_type, merges, bos/eos/unknown/padding/eot/eom_token_id,
 * add_bos_token, add_eos_token, add_space_prefix} and tokenizer.chat_template.
 */
export function tokenizerFromGGUFMetadata(kv: Map<string, unknown>): TokenizerData {
  if (!(kv instanceof Map)) throw new AetherError('tokenizer_error', 'GGUF metadata: expected a Map of key -> value');
  const model = str(kv, 'tokenizer.ggml.model');
  if (model === undefined) bad('tokenizer.ggml.model', 'missing (the file has no tokenizer)');
  if (model !== 'llama' && model !== 'gpt2') {
    throw new AetherError('unsupported', `GGUF metadata tokenizer.ggml.model = ${JSON.stringify(model)} is not supported (expected 'llama' or 'gpt2')`);
  }
  const tokens = strings(kv, 'tokenizer.ggml.tokens');
  if (!tokens || tokens.length === 0) bad('tokenizer.ggml.tokens', 'missing or empty');
  const n = tokens.length;
  const data: TokenizerData = { model, tokens };
  const pre = str(kv, 'tokenizer.ggml.pre');
  if (pre !== undefined) data.pre = pre;
  // Qwen's tokenizer.json normalises text to NFC before pre-tokenizing; GGUF has no key for the normalizer (and
  // llama.cpp skips it), so restore it for Qwen's pre-tokenizer: same ids as the model's own tokenizer on any input
  if (pre === 'qwen2') data.normalize = 'NFC';
  const scores = numbers(kv, 'tokenizer.ggml.scores');
  if (scores !== undefined) {
    if (scores.length !== n) bad('tokenizer.ggml.scores', `has ${scores.length} entries, expected ${n}`);
    data.scores = scores;
  }
  const types = numbers(kv, 'tokenizer.ggml.token_type');
  if (types !== undefined) {
    if (types.length !== n) bad('tokenizer.ggml.token_type', `has ${types.length} entries, expected ${n}`);
    data.token_type = types;
  }
  const merges = strings(kv, 'tokenizer.ggml.merges');
  if (merges !== undefined) data.merges = merges;
  if (model === 'llama' && data.scores === undefined) bad('tokenizer.ggml.scores', "missing (needed for model 'llama')");
  if (model === 'gpt2' && data.merges === undefined) bad('tokenizer.ggml.merges', "missing (needed for model 'gpt2')");

  const id = (key: string): number | undefined => {
    const v = num(kv, key);
    if (v === undefined) return undefined;
    if (!Number.isInteger(v) || v < 0) return undefined; // -1 / 0xFFFFFFFF style "none"
    if (v >= n) {
      if (v >= 0xffffffff) return undefined;
      bad(key, `${v} is outside the vocabulary (${n} tokens)`);
    }
    return v;
  };
  const bos = id('tokenizer.ggml.bos_token_id');
  const eos = id('tokenizer.ggml.eos_token_id');
  const unk = id('tokenizer.ggml.unknown_token_id');
  const pad = id('tokenizer.ggml.padding_token_id');
  if (bos !== undefined) data.bos_token_id = bos;
  if (eos !== undefined) data.eos_token_id = eos;
  if (unk !== undefined) data.unknown_token_id = unk;
  if (pad !== undefined) data.padding_token_id = pad;
  const extra: number[] = [];
  for (const k of ['tokenizer.ggml.eot_token_id', 'tokenizer.ggml.eom_token_id']) {
    const v = id(k);
    if (v !== undefined && v !== eos && !extra.includes(v)) extra.push(v);
  }
  if (extra.length) data.eos_token_ids = extra;
  const addBos = bool(kv, 'tokenizer.ggml.add_bos_token');
  const addEos = bool(kv, 'tokenizer.ggml.add_eos_token');
  const addSpace = bool(kv, 'tokenizer.ggml.add_space_prefix');
  if (addBos !== undefined) data.add_bos_token = addBos;
  // llama.cpp's default for the Llama 3 pre-tokenizer group (src/llama-vocab.cpp: add_bos = true for llama-bpe and
  // its aliases); Llama 3.x GGUFs usually carry no add_bos_token key
  else if (model === 'gpt2' && canonicalPre(pre) === 'llama-bpe') data.add_bos_token = true;
  if (addEos !== undefined) data.add_eos_token = addEos;
  if (addSpace !== undefined) data.add_space_prefix = addSpace;
  const tmpl = str(kv, 'tokenizer.chat_template');
  if (tmpl !== undefined) data.chat_template = tmpl;
  return data;
}

type Fs = typeof import('node:fs/promises');

async function readOptional(fs: Fs, file: string): Promise<Uint8Array | undefined> {
  try {
    return new Uint8Array(await fs.readFile(file));
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw new AetherError('tokenizer_error', `${file}: cannot read (${(e as Error).message})`, { file });
  }
}

async function readJsonOptional(fs: Fs, file: string): Promise<unknown> {
  const b = await readOptional(fs, file);
  if (b === undefined) return undefined;
  return parseJsonText(new TextDecoder().decode(b), file);
}

/**
 * Node-only: TokenizerData from a Hugging Face model folder. Uses tokenizer.json when present, otherwise
 * tokenizer.model (SentencePiece); applies tokenizer_config.json (bos/eos, add_bos_token, chat_template),
 * special_tokens_map.json and generation_config.json (extra eos ids).
 */
export async function tokenizerFromHFFolder(dir: string): Promise<TokenizerData> {
  const fs: Fs = await import('node:fs/promises');
  const path = await import('node:path');
  const p = (name: string) => path.join(dir, name);
  const config = await readJsonOptional(fs, p('tokenizer_config.json'));
  const specialTokensMap = await readJsonOptional(fs, p('special_tokens_map.json'));
  const generationConfig = await readJsonOptional(fs, p('generation_config.json'));
  const tjBytes = await readOptional(fs, p('tokenizer.json'));
  if (tjBytes !== undefined) {
    return tokenizerFromHFJson(new TextDecoder().decode(tjBytes), {
      config,
      specialTokensMap,
      generationConfig,
      file: p('tokenizer.json'),
    });
  }
  const spBytes = await readOptional(fs, p('tokenizer.model'));
  if (spBytes !== undefined) {
    const data = tokenizerFromSentencePiece(spBytes, p('tokenizer.model'));
    return applyHFConfig(data, { config, specialTokensMap, generationConfig, file: p('tokenizer_config.json') });
  }
  throw new AetherError('tokenizer_error', `${dir}: no tokenizer.json or tokenizer.model in the folder`, { dir });
}
