/**
 * End-of-turn stop strings of chat formats, and the fallback format of a tokenizer without a chat template.
 * Kept apart from chat.ts (which imports the template engine, a bare npm specifier) so that the engine and
 * the browser's engine worker can use them (see js/src/browser/).
 */
import type { TokenizerData } from './types.js';

export type ChatFallback = 'plain' | 'chatml';

/** Which fallback to use: an explicit one, else 'chatml' when the tokenizer name says Qwen / ChatML, else 'plain'. */
export function fallbackKind(opts: { fallback?: ChatFallback; tokenizerName?: string }): ChatFallback {
  if (opts.fallback) return opts.fallback;
  if (opts.tokenizerName && /qwen|chatml/i.test(opts.tokenizerName)) return 'chatml';
  return 'plain';
}

/** Which fallback suits a tokenizer without a template: 'chatml' when <|im_start|> and <|im_end|> are tokens. */
export function chatFallbackFor(data: Pick<TokenizerData, 'tokens'>): ChatFallback {
  const has = (t: string) => data.tokens.includes(t);
  return has('<|im_start|>') && has('<|im_end|>') ? 'chatml' : 'plain';
}

/**
 * Strings that end an assistant turn in the format of `template` (use them as stop strings next to the
 * tokenizer's end-of-generation ids). For an undefined template, those of the fallback format.
 */
export function chatStopStrings(template: string | undefined, opts: { fallback?: ChatFallback; tokenizerName?: string } = {}): string[] {
  if (!template || !template.trim()) {
    return fallbackKind(opts) === 'chatml' ? ['<|im_end|>'] : ['\nUser:', '\nSystem:'];
  }
  const out: string[] = [];
  const markers = ['<|im_end|>', '<|eot_id|>', '<|eom_id|>', '<|end|>', '<end_of_turn>', '<|END_OF_TURN_TOKEN|>', '<|endoftext|>', '<｜end▁of▁sentence｜>'];
  for (const m of markers) if (template.includes(m)) out.push(m);
  if (template.includes('[INST]')) out.push('[INST]');
  // templates that end turns with eos_token need no stop string: the tokenizer's EOS id stops generation
  return out;
}
