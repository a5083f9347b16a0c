/**
 * Typed errors. Every error the engine throws is an AetherError with a code from
 * one union, a message that says which file / field / offset failed and what was
 * expected, and optional structured details.
 */
export type AetherErrorCode =
  | 'load_error'        // generic failure while loading a model
  | 'format_error'      // malformed file: bad magic, truncated, bad JSON, bad tensor table, ...
  | 'unsupported'       // valid input that this build does not support (arch, dtype, feature)
  | 'checksum_error'    // tensor bytes do not match the stored checksum
  | 'config_error'      // model config inconsistent with tensors
  | 'tokenizer_error'
  | 'kv_cache_full'     // context overflow
  | 'invalid_argument'
  | 'out_of_memory'     // C status AE_ERR_NO_MEMORY: the run-state arena is too small
  | 'non_finite'        // C status AE_ERR_NONFINITE: NaN / Inf where finite values are required
  | 'worker_died'       // a compute worker died (C status AE_ERR_WORKER_DIED): the model is unusable, load it again
  | 'wasm_error'        // wasm module missing, failed to validate or instantiate, or an unknown C status code
  | 'aborted'
  | 'disposed';

export class AetherError extends Error {
  readonly code: AetherErrorCode;
  readonly details?: Record<string, unknown>;
  constructor(code: AetherErrorCode, message: string, details?: Record<string, unknown>) {
    super(message);
    this.name = code === 'aborted' ? 'AbortError' : 'AetherError';
    this.code = code;
    this.details = details;
  }
}

/** Throw an AbortError if the signal is aborted. */
export function throwIfAborted(signal?: AbortSignal | null): void {
  if (signal?.aborted) throw new AetherError('aborted', 'operation aborted', { reason: String(signal.reason ?? '') });
}
