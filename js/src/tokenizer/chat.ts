/**
 * Chat templates: render a model's Jinja `chat_template` with @huggingface/jinja (the same engine
 * transformers.js uses), with the variables HF's apply_chat_template passes (messages, add_generation_prompt,
 * bos_token, eos_token; the engine itself provides raise_exception and strftime_now).
 *
 * Fallback when the model has no template. Default 'plain': a transcript
 *   `{bos}System: ...\n\nUser: ...\n\nAssistant: ...\n\n` ... ending with `Assistant:` for the generation prompt.
 * Why: a model shipped without a chat template is almost always a base model that has never seen ChatML's
 * <|im_start|>/<|im_end|> (they are not in its vocabulary, so they would be split into meaningless pieces),
 * while "User:/Assistant:" transcripts are ordinary text it has seen in pre-training; the BOS text is
 * included because callers tokenize the rendered prompt with addBos: false, as for real templates.
 * 'chatml' can be asked for (opts.fallback) when the vocabulary does have ChatML tokens; see
 * {@link chatFallbackFor}. Stop strings for either fallback come from {@link chatStopStrings}.
 * Browser-safe.
 */
import { Template } from '@huggingface/jinja';
import { AetherError } from '../errors.js';
import { fallbackKind, type ChatFallback } from './chat-stops.js';
export { chatFallbackFor, chatStopStrings, type ChatFallback } from './chat-stops.js';

export interface ChatMessage {
  role: string;
  content: string;
  [key: string]: unknown;
}

export interface ChatTemplateOptions {
  /** Append the assistant header so the model writes the reply. Default true. */
  addGenerationPrompt?: boolean;
  /** Text of the BOS token ('' when none). */
  bosToken?: string;
  /** Text of the EOS token ('' when none). */
  eosToken?: string;
  /** Name of the tokenizer/model (informational; 'qwen'/'chatml' in it selects the ChatML fallback). */
  tokenizerName?: string;
  /** Format used when `template` is undefined or empty. Default 'plain' (see module doc). */
  fallback?: ChatFallback;
  /** Extra template variables (tools, documents, date_string, enable_thinking, ...). */
  extra?: Record<string, unknown>;
}

/** ChatML (Qwen, many fine-tunes). */
export const CHATML_TEMPLATE =
  "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}{% endfor %}" +
  "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}";

/** Plain transcript fallback for base models. */
export const PLAIN_TEMPLATE =
  "{{ bos_token }}{% for message in messages %}{{ message['role'] | capitalize + ': ' + message['content'] | trim + '\\n\\n' }}{% endfor %}" +
  "{% if add_generation_prompt %}{{ 'Assistant:' }}{% endif %}";

const cache = new Map<string, Template>();

function compile(template: string): Template {
  let t = cache.get(template);
  if (t) return t;
  try {
    t = new Template(template);
  } catch (e) {
    throw new AetherError('tokenizer_error', `chat template does not parse: ${(e as Error).message}`, { cause: String(e) });
  }
  if (cache.size >= 16) cache.delete(cache.keys().next().value as string);
  cache.set(template, t);
  return t;
}

/**
 * Render `messages` with a Jinja chat template (or the fallback when `template` is undefined/empty).
 * A template that fails to parse or raises while rendering -> AetherError('tokenizer_error').
 */
export function applyChatTemplate(template: string | undefined, messages: ChatMessage[], opts: ChatTemplateOptions = {}): string {
  if (!Array.isArray(messages)) {
    throw new AetherError('invalid_argument', 'applyChatTemplate: messages must be an array of {role, content}');
  }
  messages.forEach((m, i) => {
    if (m === null || typeof m !== 'object' || typeof m.role !== 'string') {
      throw new AetherError('invalid_argument', `applyChatTemplate: messages[${i}] must be an object with a string "role"`);
    }
  });
  const source = template && template.trim() ? template : fallbackKind(opts) === 'chatml' ? CHATML_TEMPLATE : PLAIN_TEMPLATE;
  const t = compile(source);
  try {
    return t.render({
      ...(opts.extra ?? {}),
      messages,
      add_generation_prompt: opts.addGenerationPrompt ?? true,
      bos_token: opts.bosToken ?? '',
      eos_token: opts.eosToken ?? '',
    });
  } catch (e) {
    if (e instanceof AetherError) throw e;
    throw new AetherError('tokenizer_error', `chat template failed to render: ${(e as Error).message}`, { cause: String(e) });
  }
}

/** What a model's chat() renders with (AetherModel.chatTemplate): the template, BOS/EOS texts, fallback, turn stops. */
export interface ChatTemplateInfo {
  template: string | undefined;
  bosToken: string;
  eosToken: string;
  /** Format used when there is no template (chatFallbackFor the model's vocabulary). */
  fallback: ChatFallback;
  /** End-of-turn strings of the format (chatStopStrings), added to the caller's stop strings. */
  stop: string[];
}

/**
 * The prompt and generate options of a chat turn: `messages` rendered with the generation prompt, and the
 * turn's stop strings added to `stop` (so that a model without a template stops at the next "User:").
 */
export function renderChat<O extends { stop?: string[] }>(c: ChatTemplateInfo, messages: ChatMessage[], opts: O, defaults: Partial<O> = {}):
  { prompt: string; options: O } {
  const prompt = applyChatTemplate(c.template, messages, { addGenerationPrompt: true, bosToken: c.bosToken, eosToken: c.eosToken, fallback: c.fallback });
  const stop = [...new Set([...c.stop, ...(opts.stop ?? [])])];
  return { prompt, options: { ...defaults, ...opts, stop } };
}
