/**
 * Browser entry of aether-wasm (the "browser" export condition). The engine runs in a dedicated module
 * Worker; this module only starts it and talks to it, so it imports no Node module and, until chat() is
 * first called, no npm dependency (chat templates need `@huggingface/jinja`: a bundler resolves it, or
 * an import map on the page does; see examples/browser/index.html).
 *
 *   import { Aether } from 'aether-wasm';
 *   const model = await Aether.load('/models/tiny-llama-a-q8_0.rknot', { threads: 2, onProgress });
 *   for await (const piece of model.generate('Once upon a time', { maxTokens: 64 })) out.append(piece.text);
 *   await model.dispose();
 */
import { load } from './client.js';
import { probeFeatures } from '../runtime/env.js';
import { clearModelCache, listCachedModels } from './cache.js';

export { BrowserModel, load } from './client.js';
export type { BrowserLoadOptions, BrowserModelSource } from './client.js';
export { PROTOCOL_VERSION } from './protocol.js';
export type { CacheState, LoadEvent, ModelInfo } from './protocol.js';
export { DEFAULT_CACHE_NAME, clearModelCache, listCachedModels } from './cache.js';
export { AetherError } from '../errors.js';
export type { AetherErrorCode } from '../errors.js';
export { probeFeatures, setWasmBaseUrl } from '../runtime/env.js';
export type { Features } from '../runtime/env.js';
export type { FfnModeName, GeneratedPiece, GenerateOptions, GenerationStats, TokenLogprob } from '../aether.js';
export type { ChatCompletion, ChatCompletionChunk, ChatCompletionRequest, Completion, CompletionRequest, CallOptions } from '../openai.js';
export type { ModelConfig } from '../runtime/engine.js';
export type { FfnOptions } from '../runtime/ffn.js';
export { formatPrometheus, PROMETHEUS_CONTENT_TYPE } from '../runtime/metrics.js';
export type { ModelMetrics, LayerMetrics, KvDtypeMetrics } from '../runtime/metrics.js';
export type { ChatMessage } from '../tokenizer/chat.js';

export const Aether = { load, probeFeatures, clearModelCache, listCachedModels };
