export { Aether, AetherModel, load } from './aether.js';
export type { ModelSource, LoadOptions, GenerateOptions, GeneratedPiece, GenerationStats, ProgressEvent, FfnModeName, TokenLogprob, ModelMetrics, LayerMetrics, KvDtypeMetrics, CompressionSpec, CompressionModeName } from './aether.js';
export { formatPrometheus, PROMETHEUS_CONTENT_TYPE } from './runtime/metrics.js';
export { AetherError } from './errors.js';
export type { AetherErrorCode } from './errors.js';
export { probeFeatures } from './runtime/env.js';
export { createTokenizer } from './tokenizer/index.js';
export type { Tokenizer, TokenizerData } from './tokenizer/index.js';
export { createChatCompletion, createCompletion, createEmbedding, parseChatRequest, parseCompletionRequest } from './openai.js';
export type {
  ChatCompletion, ChatCompletionChunk, ChatCompletionRequest, Completion, CompletionRequest, EmbeddingRequest, EmbeddingResponse,
  CallOptions, OpenAIHost,
} from './openai.js';
export { serve } from './node/server.js';
export type { ServeOptions, RunningServer } from './node/server.js';
