/* Model: config, weights as views into linear memory, run state, KV cache.
 *
 * The host (js/src/runtime/engine.ts) fills an ae_model through the setters below (no ae_model layout
 * is mirrored in JS; the enums and ae_forward_args are, in js/src/generated/abi.ts: npm run gen:abi), streams tensor bytes to the offsets it chose, then calls ae_model_init(), which
 * validates the whole tensor table against the config and the memory size and carves the run state
 * out of a host-allocated arena (ae_model_arena_size()). The forward pass allocates nothing. */
#ifndef AE_MODEL_H
#define AE_MODEL_H
#include "core/common.h"
#include "core/pool.h"
#include "core/status.h"
#include "kernels/kernels.h"

#define AE_MAX_LAYERS 256

/* Values of AE_CFG_ARCH (JS: the lower-case name). Informational: the forward pass follows the config flags
 * and tensors below, never the arch. */
enum ae_arch {
  AE_ARCH_LLAMA = 0, AE_ARCH_QWEN2 = 1, AE_ARCH_PHI3 = 2, AE_ARCH_QWEN3 = 3, AE_ARCH_GEMMA = 4,
  AE_ARCH_GEMMA2 = 5, AE_ARCH_GEMMA3 = 6,
};
#define AE_ARCH_LAST AE_ARCH_GEMMA3

/* Values of AE_CFG_FFN_ACT (JS: the quoted name). */
enum ae_ffn_act {
  AE_ACT_SILU = 0,        /* "silu": SwiGLU */
  AE_ACT_GELU_TANH = 1,   /* "gelu_tanh": GeGLU with the tanh-approximated gelu (Gemma) */
};

/* Config keys for ae_model_set_config_i / _f. Values only grow.
 * Float keys whose default is 0 mean "off" (soft-caps) or "derived" (attn_scale: 1/sqrt(head_dim),
 * rope_theta_swa: rope_theta). */
enum ae_config_key {
  AE_CFG_ARCH = 0, AE_CFG_DIM = 1, AE_CFG_N_LAYERS = 2, AE_CFG_N_HEADS = 3, AE_CFG_N_KV_HEADS = 4,
  AE_CFG_HEAD_DIM = 5, AE_CFG_HIDDEN_DIM = 6, AE_CFG_VOCAB = 7, AE_CFG_N_CTX = 8, AE_CFG_ROPE_DIM = 9,
  AE_CFG_ROPE_NEOX = 10, AE_CFG_MAX_BATCH = 11, AE_CFG_MAX_THREADS = 12, AE_CFG_NORM_EPS = 13,
  AE_CFG_ROPE_THETA = 14, AE_CFG_LOGITS_ALL = 15,
  /* architecture variants (int) */
  AE_CFG_FFN_ACT = 16,         /* ae_ffn_act */
  AE_CFG_SWA_WINDOW = 17,      /* sliding window (positions a query sees, itself included) of SWA layers; 0 none */
  /* architecture variants (float) */
  AE_CFG_EMBD_SCALE = 18,      /* token embeddings are multiplied by this (Gemma: sqrt(dim)); default 1 */
  AE_CFG_ATTN_SCALE = 19,      /* q.k scale; 0 = 1/sqrt(head_dim) (Gemma: query_pre_attn_scalar^-1/2) */
  AE_CFG_ATTN_SOFTCAP = 20,    /* attention scores -> cap tanh(s / cap) (Gemma 2); 0 none */
  AE_CFG_FINAL_SOFTCAP = 21,   /* logits -> cap tanh(l / cap) (Gemma 2); 0 none */
  AE_CFG_ROPE_FREQ_SCALE = 22, /* linear RoPE scaling of full-attention layers: angle *= scale (1 / factor); default 1 */
  AE_CFG_ROPE_ATTN_FACTOR = 23,/* cos and sin are multiplied by this (LongRoPE attention factor); default 1 */
  AE_CFG_ROPE_THETA_SWA = 24,  /* RoPE base of SWA layers (Gemma 3 local layers: 10000); 0 = rope_theta */
  AE_CFG_ROPE_FREQ_SCALE_SWA = 25, /* linear RoPE scaling of SWA layers; default 1 */
  /* KV cache (int) */
  AE_CFG_KV_TYPE_K = 26,       /* ae_type of the K cache (llama.cpp cache_type_k); default f16 */
  AE_CFG_KV_TYPE_V = 27,       /* ae_type of the V cache (cache_type_v); default f16 */
};

/* Tensor roles for ae_model_set_tensor, with the tensor's GGUF / .rknot name (per-layer roles: the name
 * after "blk.N."). Global roles use layer = -1. */
enum ae_role {
  AE_T_TOK_EMBD = 0,     /* "token_embd.weight" */
  AE_T_OUTPUT_NORM = 1,  /* "output_norm.weight" */
  AE_T_OUTPUT = 2,       /* "output.weight" */
  AE_T_ATTN_NORM = 3,    /* "attn_norm.weight" */
  AE_T_WQ = 4,           /* "attn_q.weight" */
  AE_T_WK = 5,           /* "attn_k.weight" */
  AE_T_WV = 6,           /* "attn_v.weight" */
  AE_T_WQKV = 7,         /* "attn_qkv.weight" */
  AE_T_BQ = 8,           /* "attn_q.bias" */
  AE_T_BK = 9,           /* "attn_k.bias" */
  AE_T_BV = 10,          /* "attn_v.bias" */
  AE_T_WO = 11,          /* "attn_output.weight" */
  AE_T_FFN_NORM = 12,    /* "ffn_norm.weight" */
  AE_T_W_GATE = 13,      /* "ffn_gate.weight" */
  AE_T_W_UP = 14,        /* "ffn_up.weight" */
  AE_T_W_DOWN = 15,      /* "ffn_down.weight" */
  AE_T_ATTN_Q_NORM = 16, /* "attn_q_norm.weight": [head_dim] RMSNorm of every q head before RoPE (Qwen3, Gemma 3) */
  AE_T_ATTN_K_NORM = 17, /* "attn_k_norm.weight": [head_dim] same for k */
  AE_T_ATTN_POST_NORM = 18, /* "post_attention_norm.weight": [dim] RMSNorm of the attention output before the residual add */
  AE_T_FFN_POST_NORM = 19,  /* "post_ffw_norm.weight": [dim] RMSNorm of the FFN output before the residual add (Gemma 2/3) */
  AE_T_ROPE_FREQS = 20,  /* global (layer -1), [rope_dim/2] RoPE frequency divisors; no fixed name: the host picks
                            rope_freqs.weight (llama3) or rope_factors_long / _short.weight (LongRoPE) */
  /* compressed FFN variant (aether compress; docs/rknot.md "compression"): each of gate, up, down is either one
   * matrix A (width-pruned) or two factors, y = B (A x) (low-rank); present only in compressed files */
  AE_T_FFN_GATE_A = 21,  /* "ffn_gate_a.weight": [dim, r] (pruned: r = the kept width) */
  AE_T_FFN_GATE_B = 22,  /* "ffn_gate_b.weight": [r, width] second factor (low-rank only) */
  AE_T_FFN_UP_A = 23,    /* "ffn_up_a.weight" */
  AE_T_FFN_UP_B = 24,    /* "ffn_up_b.weight" */
  AE_T_FFN_DOWN_A = 25,  /* "ffn_down_a.weight": [width, r] */
  AE_T_FFN_DOWN_B = 26,  /* "ffn_down_b.weight": [r, dim] */
  AE_T_FFN_OUT_BIAS = 27,/* "ffn_out.bias": [dim] added to the variant's output (pruning's bias compensation) */
  AE_T_ROLE_COUNT = 28,
};
/* Roles before this one are global (layer = -1), the others per layer. */
#define AE_T_FIRST_LAYER_ROLE AE_T_ATTN_NORM

/* Why ae_model_validate rejected a tensor (ae_model_bad_reason; the quoted text is the message). */
enum ae_bad_reason {
  AE_BAD_NONE = 0,       /* "" */
  AE_BAD_MISSING = 1,    /* "missing" */
  AE_BAD_DTYPE = 2,      /* "unsupported dtype" */
  AE_BAD_SHAPE = 3,      /* "shape does not match the config" */
  AE_BAD_RANGE = 4,      /* "out of memory range" */
  AE_BAD_ALIGN = 5,      /* "misaligned" */
  AE_BAD_BLOCKS = 6,     /* "row is not a whole number of blocks" */
  AE_BAD_VALUE = 7,      /* "a value is not finite and positive" */
};

typedef struct {
  const void *data;  /* NULL when absent */
  int32_t type;      /* ae_type */
  int32_t ne0;       /* row length (elements) */
  int32_t ne1;       /* rows (1 for vectors) */
} ae_tensor;

typedef struct {
  int32_t arch, dim, n_layers, n_heads, n_kv_heads, head_dim, hidden_dim, vocab, n_ctx, rope_dim,
      rope_neox, max_batch, max_threads, logits_all;
  float norm_eps, rope_theta;
  /* architecture variants (see ae_config_key) */
  int32_t ffn_act, swa_window;
  float embd_scale, attn_scale, attn_softcap, final_softcap, rope_freq_scale, rope_attn_factor, rope_theta_swa,
      rope_freq_scale_swa;
  int32_t kv_type_k, kv_type_v;  /* ae_type of the K / V cache (ae_kv_types_ok) */
} ae_config;
/* Query tokens per prefill attention item (ae_attention_kv_multi): up to 4, at most max_batch. */
#define AE_ATTN_TOKENS(c) ((c)->max_batch < 4 ? ((c)->max_batch > 0 ? (c)->max_batch : 1) : 4)

/* FFN execution modes per layer (runtime switch, no reconversion; JS: the quoted name). */
enum ae_ffn_mode {
  AE_FFN_DENSE = 0,        /* "dense": the core's path */
  AE_FFN_FUSED = 1,        /* "fused": ffn-fused module */
  AE_FFN_SAT_STATIC = 2,   /* "static": ffn-saturated, profiled masks */
  AE_FFN_SAT_DYNAMIC = 3,  /* "dynamic": ffn-saturated, per-token threshold */
  AE_FFN_PROFILE = 4,      /* "profile": dense result + activation statistics (ffn-saturated module) */
};

/* ---- mixed-precision KV cache (docs/rknot.md kv_policy; js/src/formats/kv-policy.ts) ----
 * A policy splits positions into up to AE_KV_MAX_SEGS contiguous segments from 0, each with its dtype (K and V
 * alike), plus optionally a recent window kept in its own copy (a ring of window + max_batch positions, so that
 * every query of a batch still finds its window). Every position is written, quantised once from f32, into its
 * segment and, with a window, into the ring; a query at p reads positions p-window+1..p from the ring and the
 * older ones from the segments. KV heads marked local read only [0, sinks) and the window; KV heads stored locally
 * (ae_model_set_kv_stored_local) also keep only those: their other positions are never stored (memory saved). */
#define AE_KV_MAX_SEGS 4
/* One store: rows of every KV head in dtype `type`, head-major: head g's row i at k + (g * cap + i) * row bytes
 * (same for v). Segment: row i holds position start + i, positions [start, end). Ring: row t % cap holds t. */
typedef struct {
  uint8_t *k, *v;
  int32_t type, start, end, cap;
  uint32_t row;
  /* KV heads with local storage (ae_kv_policy.stored): a segment keeps only their positions < sinks, lcap rows per
   * head (kl / vl, head-major over the local heads in head order); the other heads use k / v with the slot among the
   * full heads (the ring keeps every head, as above). Without local heads lcap is 0 and the slots are the heads. */
  uint8_t *kl, *vl;
  int32_t lcap;
} ae_kv_store;

typedef struct {
  int32_t n_seg;        /* 0: no policy */
  int32_t window;       /* 0: none */
  int32_t window_type;
  int32_t sinks;        /* positions local heads keep besides the window */
  int32_t seg_end[AE_KV_MAX_SEGS], seg_type[AE_KV_MAX_SEGS];  /* as set (end -1: to n_ctx) */
  ae_kv_store seg[AE_KV_MAX_SEGS], ring;                      /* carved by the arena layout */
  uint32_t local[2];    /* KV head g local when bit (g & 31) of local[g >> 5] is set */
  /* KV heads stored locally (a subset of local): only [0, sinks) and the ring are kept for them, so they save memory;
   * changing it needs ae_model_relayout (the cache is emptied) */
  uint32_t stored[2];
  /* set by the arena layout: 1 when the ring keeps every KV head (a segment's dtype differs from the window's), else
   * only the heads stored locally (the others read their window from the segments: the same bytes) */
  int32_t ring_all;
} ae_kv_policy;

/* Where row i (position start + i) of KV head g lives in segment store st of policy P: *k / *v set, returns 1; 0 when
 * the head is stored locally and the position is not kept (i >= lcap). */
static inline int ae_kv_seg_row(const ae_kv_store *st, const ae_kv_policy *P, int g, int i, uint8_t **k, uint8_t **v) {
  const uint64_t mask = ((uint64_t)P->stored[1] << 32) | P->stored[0];
  const int below = __builtin_popcountll(mask & ((1ull << g) - 1ull));
  size_t row;
  if ((mask >> g) & 1ull) {
    if (i >= st->lcap) return 0;
    row = (size_t)below * (size_t)st->lcap + (size_t)i;
    *k = st->kl + row * st->row; *v = st->vl + row * st->row;
  } else {
    row = (size_t)(g - below) * (size_t)st->cap + (size_t)i;
    *k = st->k + row * st->row; *v = st->v + row * st->row;
  }
  return 1;
}
static inline int ae_kv_head_stored(const ae_kv_policy *P, int g) { return (int)((P->stored[g >> 5] >> (g & 31)) & 1u); }
/* Slot of KV head g in the ring (its rows at ring.k + (slot * ring.cap + t % ring.cap) * ring.row), -1 when the ring
 * does not keep it (no window, or ring_all 0 and the head is not stored locally). */
static inline int ae_kv_ring_slot(const ae_kv_policy *P, int g) {
  if (!P->window) return -1;
  if (P->ring_all) return g;
  if (!ae_kv_head_stored(P, g)) return -1;
  const uint64_t mask = ((uint64_t)P->stored[1] << 32) | P->stored[0];
  return __builtin_popcountll(mask & ((1ull << g) - 1ull));
}

/* One FFN matrix of a compressed variant: y = a x, or y = b (a x) when b is present (low-rank factors). */
typedef struct { ae_tensor a, b; } ae_fmat;

/* Per-layer compression modes (runtime switch, like ae_ffn_mode; JS: the quoted name). */
enum ae_cmp_mode {
  AE_CMP_DENSE = 0,       /* "dense": the layer's own FFN weights (in its ae_ffn_mode) */
  AE_CMP_VARIANT = 1,     /* "compressed": the compressed variant (ffn_*_a / _b, ffn_out.bias) */
};
#define AE_CMP_MODES 2

/* The compressed FFN of a layer: width = rows of gate (= of up = row length of down's first matrix). */
typedef struct {
  ae_fmat gate, up, down;
  ae_tensor out_bias;     /* optional [dim] */
  int32_t width;          /* intermediate width (<= hidden_dim); 0 = the layer has no variant */
} ae_ffn_variant;

typedef struct {
  ae_tensor attn_norm, wq, wk, wv, wqkv, bq, bk, bv, wo, ffn_norm, w_gate, w_up, w_down;
  ae_ffn_variant cmp;    /* compressed variant (optional) */
  int32_t cmp_mode;      /* ae_cmp_mode: one lookup per layer per forward */
  ae_tensor q_norm, k_norm, attn_post_norm, ffn_post_norm;  /* optional (absent: data NULL) */
  int32_t swa;        /* 1: sliding-window layer (window cfg.swa_window, RoPE base rope_theta_swa) */
  int32_t ffn_mode;   /* ae_ffn_mode */
  const void *ffn_aux; /* per-layer data of the FFN module (interleaved/neuron-major weights, masks) */
  int32_t ffn_active; /* FFN neurons computed at the last forward (for stats), summed over tokens */
  /* KV cache of the layer (carved by ae_model_init; see "KV cache" in docs/DESIGN.md): head-major, KV head g's
   * position t at k + (g * n_ctx + t) * k_row bytes, dtype k_type (same for v) */
  uint8_t *k, *v;
  int32_t k_type, v_type;
  uint32_t k_row, v_row;  /* bytes of one head's row: ae_kv_row_size(type, head_dim) (padded to whole blocks) */
  float *cap;         /* calibration capture (ae_model_set_capture), NULL = off; see AE_CAP_* */
  double ffn_active_sum, ffn_token_sum; /* since the last ae_model_reset_counters: sum of ffn_active, of tokens */
  ae_kv_policy kvp;       /* mixed-precision KV policy of the layer (n_seg 0: the plain cache above) */
} ae_layer;

/* Calibration capture (aether analyze / compress): when a layer's `cap` is set, the forward copies the
 * inputs of its weight matrices for the n tokens of the call into it, as four blocks of max_batch rows:
 * AE_CAP_ATTN  [max_batch][dim]        normed input of q/k/v (attn_norm output)
 * AE_CAP_WO    [max_batch][q_dim]      attention output (input of attn_output)
 * AE_CAP_FFN   [max_batch][dim]        normed input of gate/up (ffn_norm output)
 * AE_CAP_DOWN  [max_batch][hidden_dim] h = act(gate) * up (input of down; dense FFN path only)
 * ae_model_capture_offset(m, which) gives each block's float offset. Rows beyond n are left untouched. */
enum ae_cap_block { AE_CAP_ATTN = 0, AE_CAP_WO = 1, AE_CAP_FFN = 2, AE_CAP_DOWN = 3, AE_CAP_COUNT = 4 };

/* Op classes of the per-layer time counters (ae_model_set_timing; JS: the quoted name). Thread 0 reads the
 * host clock (env.ae_clock_ms) at the step boundaries of the forward pass, so a class's time is the wall time
 * of its steps, barrier waits included. Row n_layers of the counters holds the global ops (embed, output). */
enum ae_op_class {
  AE_OP_EMBED = 0,      /* "embed": token embeddings, RoPE tables */
  AE_OP_QKV = 1,        /* "qkv": attention norm, q/k/v projections */
  AE_OP_ROPE_KV = 2,    /* "rope_kv": biases, q/k norms, RoPE, K/V cache writes */
  AE_OP_ATTENTION = 3,  /* "attention": scores, softmax, weighted V */
  AE_OP_ATTN_OUT = 4,   /* "attn_out": output projection, residual add, FFN norm */
  AE_OP_FFN = 5,        /* "ffn": the FFN block in the layer's mode */
  AE_OP_OUTPUT = 6,     /* "output": final norm, logits */
  AE_OP_COUNT = 7,
};

typedef struct {
  ae_config cfg;
  ae_tensor tok_embd, output_norm, output, rope_freqs;
  ae_layer layers[AE_MAX_LAYERS];
  int32_t initialised;
  int32_t q_dim, kv_dim, qkv_dim;  /* n_heads*head_dim, n_kv_heads*head_dim, q_dim + 2 kv_dim */
  /* run state (carved from the arena by ae_model_init) */
  float *x;        /* (max_batch, dim) residual stream */
  float *xb;       /* (max_batch, max(dim, q_dim)) normed input / attention output */
  float *qkv;      /* (max_batch, qkv_dim) */
  float *hb;       /* (max_batch, hidden) */
  float *hb2;      /* (max_batch, hidden) */
  float *tmp;      /* (max_batch, dim) projection output before the residual add */
  /* activation buffers, indexed by activation dtype (ae_is_act_type; see src/model/act.h):
   * act[t] is (max_batch, act_stride[t]) bytes, a row holding max(dim, hidden, q_dim) values in dtype t */
  void *act[AE_TYPE_COUNT];
  size_t act_stride[AE_TYPE_COUNT];
  float *rope_cs;  /* (max_batch, rope_dim) cos/sin pairs of full-attention layers */
  float *rope_cs_swa; /* (max_batch, rope_dim) cos/sin pairs of SWA layers (= rope_cs when they share the RoPE) */
  float *att;      /* (max_threads, AE_ATTN_TOKENS(cfg) * group, n_ctx) attention scores scratch (group = n_heads /
                   * n_kv_heads; prefill scores AE_ATTN_TOKENS tokens of a KV head at once, ae_attention_kv_multi) */
  uint8_t *qconv;  /* (max_threads, (AE_ATTN_TOKENS(cfg) * group + 1) * AE_KV_PAD(head_dim) * 4 bytes) q in K's
                   * vec_dot_type; padded rows */
  uint8_t *kv;     /* the KV cache of every layer (ae_layer.k / .v point into it) */
  float *logits;   /* (logits_all ? max_batch : 1, vocab) */
  /* The output head's row chunks of the last forward that gave one row of logits (decode, a prompt's last token):
   * per chunk its maximum, the first index of it and whether a logit is NaN / inf, computed by the thread that wrote
   * the rows while they are in its cache (forward.c), so that the check and a greedy pick need not read every logit on
   * the calling thread (whose copies of the worker's lines the worker's next writes would wait for). out_nparts 0: not
   * computed (every token's logits, or the logits changed since: ae_model_logits_changed). */
  struct ae_out_part { float max; int32_t idx, bad, pad; } *out_part;
  int32_t out_nparts;
  int32_t n_past;  /* positions in the KV cache (maintained by the host through ae_forward's pos) */
  int32_t kv_dirty;  /* a KV policy changed after init: ae_model_relayout before the next forward */
  double *op_time; /* NULL: timing off; else (n_layers + 1, AE_OP_COUNT) milliseconds, host-allocated */
  double op_t0;    /* clock at the last step boundary (thread 0) */
  /* attention statistics per (thread, layer, head) for `aether profile-heads` (ae_model_set_head_stats); NULL: off */
  double *head_stats;
  int32_t hs_sinks, hs_window;
  /* step counters of the forward pass (pool.h ae_flow; 2 * ae_forward_max_steps int64, carved by the arena layout) */
  int64_t *flow;
  /* decode on one thread: a forward of one token whose weights stream fewer than single_below bytes
   * (ae_model_set_single_below; decode_bytes is computed by ae_model_init) runs on the calling thread alone */
  uint64_t decode_bytes, single_below;
} ae_model;

/* Accumulators of the attention statistics, AE_HS_N doubles per (thread, layer, query head), summed over the
 * queries at positions p >= hs_sinks + hs_window (where the sinks and the recent window are disjoint and leave
 * other positions). JS: the quoted names. */
enum ae_head_stat {
  AE_HS_COUNT = 0,    /* "count": queries */
  AE_HS_ENTROPY = 1,  /* "entropy": -sum a log a of the attention row, nats */
  AE_HS_LOGN = 2,     /* "log_n": log of the positions the query saw (the entropy of a uniform row) */
  AE_HS_SINK = 3,     /* "sink_mass": attention on positions < hs_sinks */
  AE_HS_WINDOW = 4,   /* "window_mass": attention on the hs_window most recent positions (the query's own included) */
  AE_HS_N = 5,
};

/* One forward job: tokens[0..n) at positions pos..pos+n-1. Logits of the last token (or of all
 * tokens when cfg.logits_all and want_all > 0) land in model->logits; want_all < 0: no output head at all (a
 * prompt chunk that is not the prompt's last: only the KV cache is filled, model->logits keeps its old values). */
typedef struct {
  ae_model *model;
  const int32_t *tokens;
  int32_t n_tokens;
  int32_t pos;
  int32_t want_all;   /* 1: every token's logits (cfg.logits_all), 0: the last token's, -1: none */
  int32_t status;  /* out: ae_status */
  /* NULL: logits as usual. Else no output head: the final-normed hidden state of every row (dim floats each)
   * is added to hidden_sum (dim floats; embeddings: the host divides by the token count) */
  float *hidden_sum;
} ae_forward_args;

#define AE_JOB_FORWARD 1

void ae_forward_job(ae_forward_args *a, int ith, int nth, ae_pool *pool, int32_t tag);
/* 1 if any of x[0..n) is NaN or +-Inf (exponent bits all ones); integer ops, so the compiler vectorises it. */
AE_INLINE int ae_any_nonfinite(const float *x, size_t n) {
  const uint32_t *u = (const uint32_t *)x;
  uint32_t bad = 0;
  for (size_t i = 0; i < n; i++) bad |= (uint32_t)((u[i] & 0x7f800000u) == 0x7f800000u);
  return bad != 0;
}

/* Capacity of ae_model.out_part: decode chunks of the output head (forward.c chunk_rows: at most 8 per thread). */
#define AE_OUT_PARTS(c) (8 * ((c)->max_threads > 0 ? (c)->max_threads : 1))

/* Steps of one forward pass at most (the size of ae_model.flow in counter pairs). */
int ae_forward_max_steps(const ae_config *c);

/* The FFN block of one layer (src/model/forward.c): x[b] += FFN(xb[b]) for b < n, in the layer's
 * ffn_mode (fused / saturated / profile run in the FFN modules, called through wasm imports). Every
 * thread calls it; it starts after a barrier and ends with one. Returns ae_status (the same on every
 * thread): a mode whose module is missing or refuses the layer runs the dense path and reports it. */
int ae_ffn_block(ae_model *m, int layer, int n, int ith, int nth, ae_pool *pool);

/* FFN of one layer alone (benchmarks, tests): x[b] += FFN(rmsnorm(x[b])) for the n rows the host wrote
 * at ae_model_buf(m, 0); pos = layer index, tokens unused. */
#define AE_JOB_FFN_LAYER 2
void ae_ffn_layer_job(ae_forward_args *a, int ith, int nth, ae_pool *pool);

/* The host writes ae_forward_args at the offsets of js/src/generated/abi.ts. */
static_assert(sizeof(ae_forward_args) == 28, "abi");

#endif
