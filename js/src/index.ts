export { Aether, AetherModel, load } from './aether.js';
export type { ModelSource, LoadOptions, GenerateOptions, GeneratedPiece, GenerationStats, ProgressEvent, FfnModeName, ModelMetrics, LayerMetrics, KvDtypeMetrics } from './aether.js';
export { formatPrometheus, PROMETHEUS_CONTENT_TYPE } from './runtime/metrics.js';
export { AetherError } from './errors.js';
export type { AetherErrorCode } from './errors.js';
export { probeFeatures } from './runtime/env.js';
export { createTokenizer } from './tokenizer/index.js';
export type { Tokenizer, TokenizerData } from './tokenizer/index.js';
