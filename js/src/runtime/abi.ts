/** Mirrors of the C ABI (src/model/model.h, src/model/sampler.h, src/core/status.h). */

export const PAGE = 65536;
/** Module static-data slots: module k's data lives at 0x10000 * (k + 1) (docs/DESIGN.md). */
export const MODULE_SLOTS = { core: 0, 'ffn-fused': 1, 'ffn-saturated': 2, 'kernels-test': 3 } as const;
/** First byte the host manages. */
export const HEAP_BASE = 0x10000 * 8;

export const Status = {
  OK: 0, INVALID_ARG: 1, BAD_TENSOR: 2, BAD_CONFIG: 3, CTX_FULL: 4, UNSUPPORTED: 5, NO_MEMORY: 6, NONFINITE: 7,
} as const;
export const STATUS_NAMES = ['ok', 'invalid argument', 'bad tensor', 'bad config', 'context full', 'unsupported', 'no memory', 'non-finite value'];

export const Arch = { llama: 0, qwen2: 1, phi3: 2, qwen3: 3, gemma: 4, gemma2: 5, gemma3: 6 } as const;
/** ae_ffn_act */
export const FfnAct = { silu: 0, gelu_tanh: 1 } as const;

export const Cfg = {
  ARCH: 0, DIM: 1, N_LAYERS: 2, N_HEADS: 3, N_KV_HEADS: 4, HEAD_DIM: 5, HIDDEN_DIM: 6, VOCAB: 7, N_CTX: 8,
  ROPE_DIM: 9, ROPE_NEOX: 10, MAX_BATCH: 11, MAX_THREADS: 12, NORM_EPS: 13, ROPE_THETA: 14, LOGITS_ALL: 15,
  FFN_ACT: 16, SWA_WINDOW: 17, EMBD_SCALE: 18, ATTN_SCALE: 19, ATTN_SOFTCAP: 20, FINAL_SOFTCAP: 21,
  ROPE_FREQ_SCALE: 22, ROPE_ATTN_FACTOR: 23, ROPE_THETA_SWA: 24, ROPE_FREQ_SCALE_SWA: 25,
} as const;

export const Role = {
  TOK_EMBD: 0, OUTPUT_NORM: 1, OUTPUT: 2, ATTN_NORM: 3, WQ: 4, WK: 5, WV: 6, WQKV: 7, BQ: 8, BK: 9, BV: 10,
  WO: 11, FFN_NORM: 12, W_GATE: 13, W_UP: 14, W_DOWN: 15, ATTN_Q_NORM: 16, ATTN_K_NORM: 17, ATTN_POST_NORM: 18,
  FFN_POST_NORM: 19, ROPE_FREQS: 20,
} as const;
export const ROLE_NAMES = ['token_embd', 'output_norm', 'output', 'attn_norm', 'attn_q', 'attn_k', 'attn_v',
  'attn_qkv', 'attn_q.bias', 'attn_k.bias', 'attn_v.bias', 'attn_output', 'ffn_norm', 'ffn_gate', 'ffn_up', 'ffn_down',
  'attn_q_norm', 'attn_k_norm', 'post_attention_norm', 'post_ffw_norm', 'rope_freqs'];
export const BAD_TENSOR_REASONS = ['', 'missing', 'unsupported dtype', 'shape does not match the config',
  'out of memory range', 'misaligned', 'row is not a whole number of blocks', 'a value is not finite and positive'];

/** Per-layer tensor name (GGUF style, without `blk.N.` and `.weight`) -> role. */
export const LAYER_TENSOR_ROLES: Record<string, number> = {
  'attn_norm.weight': Role.ATTN_NORM, 'attn_q.weight': Role.WQ, 'attn_k.weight': Role.WK, 'attn_v.weight': Role.WV,
  'attn_qkv.weight': Role.WQKV, 'attn_q.bias': Role.BQ, 'attn_k.bias': Role.BK, 'attn_v.bias': Role.BV,
  'attn_output.weight': Role.WO, 'ffn_norm.weight': Role.FFN_NORM, 'ffn_gate.weight': Role.W_GATE,
  'ffn_up.weight': Role.W_UP, 'ffn_down.weight': Role.W_DOWN, 'attn_q_norm.weight': Role.ATTN_Q_NORM,
  'attn_k_norm.weight': Role.ATTN_K_NORM, 'post_attention_norm.weight': Role.ATTN_POST_NORM,
  'post_ffw_norm.weight': Role.FFN_POST_NORM,
};
export const GLOBAL_TENSOR_ROLES: Record<string, number> = {
  'token_embd.weight': Role.TOK_EMBD, 'output_norm.weight': Role.OUTPUT_NORM, 'output.weight': Role.OUTPUT,
};

/** ggml type ids of the dtypes the kernels support. */
export const DTYPE_IDS: Record<string, number> = { f32: 0, f16: 1, q4_0: 2, q8_0: 8, q4_K: 12, q6_K: 14 };

export const FfnMode = { dense: 0, fused: 1, static: 2, dynamic: 3, profile: 4 } as const;

/** ae_forward_args: { model*, tokens*, n_tokens, pos, want_all, status } */
export const FWD = { MODEL: 0, TOKENS: 4, N_TOKENS: 8, POS: 12, WANT_ALL: 16, STATUS: 20, SIZE: 24 } as const;
/** ae_sampler */
export const SMP = {
  TEMPERATURE: 0, TOP_K: 4, TOP_P: 8, MIN_P: 12, REPEAT_PENALTY: 16, N_RECENT: 20, RECENT: 24, RNG: 32,
  IDX: 40, PROB: 44, SIZE: 48,
} as const;
/** ae_pool is 64 bytes; `gen` at 0. */
export const POOL_SIZE = 64;
