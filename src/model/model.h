/* Model: config, weights as views into linear memory, run state, KV cache.
 *
 * The host (js/src/runtime/model.ts) fills an ae_model through the setters below (no struct layout is
 * mirrored in JS), streams tensor bytes to the offsets it chose, then calls ae_model_init(), which
 * validates the whole tensor table against the config and the memory size and carves the run state
 * out of a host-allocated arena (ae_model_arena_size()). The forward pass allocates nothing. */
#ifndef AE_MODEL_H
#define AE_MODEL_H
#include "core/common.h"
#include "core/pool.h"
#include "core/status.h"
#include "kernels/kernels.h"

#define AE_MAX_LAYERS 256

enum ae_arch { AE_ARCH_LLAMA = 0, AE_ARCH_QWEN2 = 1, AE_ARCH_PHI3 = 2 };

/* Config keys for ae_model_set_config_i / _f. Values only grow (js/src/runtime/abi.ts mirrors them). */
enum ae_config_key {
  AE_CFG_ARCH = 0, AE_CFG_DIM = 1, AE_CFG_N_LAYERS = 2, AE_CFG_N_HEADS = 3, AE_CFG_N_KV_HEADS = 4,
  AE_CFG_HEAD_DIM = 5, AE_CFG_HIDDEN_DIM = 6, AE_CFG_VOCAB = 7, AE_CFG_N_CTX = 8, AE_CFG_ROPE_DIM = 9,
  AE_CFG_ROPE_NEOX = 10, AE_CFG_MAX_BATCH = 11, AE_CFG_MAX_THREADS = 12, AE_CFG_NORM_EPS = 13,
  AE_CFG_ROPE_THETA = 14, AE_CFG_LOGITS_ALL = 15,
};

/* Tensor roles for ae_model_set_tensor. Global roles use layer = -1. */
enum ae_role {
  AE_T_TOK_EMBD = 0, AE_T_OUTPUT_NORM = 1, AE_T_OUTPUT = 2,
  AE_T_ATTN_NORM = 3, AE_T_WQ = 4, AE_T_WK = 5, AE_T_WV = 6, AE_T_WQKV = 7, AE_T_BQ = 8, AE_T_BK = 9,
  AE_T_BV = 10, AE_T_WO = 11, AE_T_FFN_NORM = 12, AE_T_W_GATE = 13, AE_T_W_UP = 14, AE_T_W_DOWN = 15,
  AE_T_ROLE_COUNT = 16,
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
} ae_config;

/* FFN execution modes per layer (runtime switch, no reconversion). */
enum ae_ffn_mode { AE_FFN_DENSE = 0, AE_FFN_FUSED = 1, AE_FFN_SAT_STATIC = 2, AE_FFN_SAT_DYNAMIC = 3,
                   AE_FFN_PROFILE = 4 /* dense result + activation statistics (ffn-saturated module) */ };

typedef struct {
  ae_tensor attn_norm, wq, wk, wv, wqkv, bq, bk, bv, wo, ffn_norm, w_gate, w_up, w_down;
  int32_t ffn_mode;   /* ae_ffn_mode */
  const void *ffn_aux; /* per-layer data of the FFN module (interleaved/neuron-major weights, masks) */
  int32_t ffn_active; /* FFN neurons computed at the last forward (for stats), summed over tokens */
  int32_t pad_;
} ae_layer;

typedef struct {
  ae_config cfg;
  ae_tensor tok_embd, output_norm, output;
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
  float *rope_cs;  /* (max_batch, rope_dim) cos/sin pairs */
  float *att;      /* (max_threads, n_ctx) attention scores scratch */
  float *k_cache;  /* (n_layers, n_ctx, kv_dim) */
  float *v_cache;  /* (n_layers, n_ctx, kv_dim) */
  float *logits;   /* (logits_all ? max_batch : 1, vocab) */
  int32_t n_past;  /* positions in the KV cache (maintained by the host through ae_forward's pos) */
} ae_model;

/* One forward job: tokens[0..n) at positions pos..pos+n-1. Logits of the last token (or of all
 * tokens when cfg.logits_all and want_all) land in model->logits. */
typedef struct {
  ae_model *model;
  const int32_t *tokens;
  int32_t n_tokens;
  int32_t pos;
  int32_t want_all;
  int32_t status;  /* out: ae_status */
} ae_forward_args;

#define AE_JOB_FORWARD 1

void ae_forward_job(ae_forward_args *a, int ith, int nth, ae_pool *pool);

/* The FFN block of one layer (src/model/forward.c): x[b] += FFN(xb[b]) for b < n, in the layer's
 * ffn_mode (fused / saturated / profile run in the FFN modules, called through wasm imports). Every
 * thread calls it; it starts after a barrier and ends with one. Returns ae_status (the same on every
 * thread): a mode whose module is missing or refuses the layer runs the dense path and reports it. */
int ae_ffn_block(ae_model *m, int layer, int n, int ith, int nth, ae_pool *pool);

/* FFN of one layer alone (benchmarks, tests): x[b] += FFN(rmsnorm(x[b])) for the n rows the host wrote
 * at ae_model_buf(m, 0); pos = layer index, tokens unused. */
#define AE_JOB_FFN_LAYER 2
void ae_ffn_layer_job(ae_forward_args *a, int ith, int nth, ae_pool *pool);

/* The host writes ae_forward_args at these offsets (js/src/runtime/abi.ts). */
static_assert(sizeof(ae_forward_args) == 24, "abi");

#endif
