/* Model setup: config and tensor setters, validation of the tensor table, arena layout. */
#include "model/model.h"

#ifndef __wasm__
/* Native builds of the portable C (fuzz/c, sanitizer runs): the address range standing in for the linear memory. */
uint64_t ae_native_mem_lo, ae_native_mem_hi;
#endif

AE_EXPORT size_t ae_model_sizeof(void) { return sizeof(ae_model); }

AE_EXPORT int ae_model_reset(ae_model *m) {
  __builtin_memset(m, 0, sizeof *m);
  m->cfg.max_batch = 1;
  m->cfg.max_threads = 1;
  m->cfg.norm_eps = 1e-5f;
  m->cfg.rope_theta = 10000.0f;
  m->cfg.embd_scale = 1.0f;
  m->cfg.rope_freq_scale = 1.0f;
  m->cfg.rope_attn_factor = 1.0f;
  m->cfg.rope_freq_scale_swa = 1.0f;
  m->cfg.kv_type_k = AE_F16;
  m->cfg.kv_type_v = AE_F16;
  return AE_OK;
}

AE_EXPORT int ae_model_set_config_i(ae_model *m, int key, int32_t v) {
  ae_config *c = &m->cfg;
  if (m->initialised) return AE_ERR_INVALID_ARG;
  switch (key) {
    case AE_CFG_ARCH: c->arch = v; break;
    case AE_CFG_DIM: c->dim = v; break;
    case AE_CFG_N_LAYERS: c->n_layers = v; break;
    case AE_CFG_N_HEADS: c->n_heads = v; break;
    case AE_CFG_N_KV_HEADS: c->n_kv_heads = v; break;
    case AE_CFG_HEAD_DIM: c->head_dim = v; break;
    case AE_CFG_HIDDEN_DIM: c->hidden_dim = v; break;
    case AE_CFG_VOCAB: c->vocab = v; break;
    case AE_CFG_N_CTX: c->n_ctx = v; break;
    case AE_CFG_ROPE_DIM: c->rope_dim = v; break;
    case AE_CFG_ROPE_NEOX: c->rope_neox = v; break;
    case AE_CFG_MAX_BATCH: c->max_batch = v; break;
    case AE_CFG_MAX_THREADS: c->max_threads = v; break;
    case AE_CFG_LOGITS_ALL: c->logits_all = v; break;
    case AE_CFG_FFN_ACT: c->ffn_act = v; break;
    case AE_CFG_SWA_WINDOW: c->swa_window = v; break;
    case AE_CFG_KV_TYPE_K: c->kv_type_k = v; break;
    case AE_CFG_KV_TYPE_V: c->kv_type_v = v; break;
    default: return AE_ERR_INVALID_ARG;
  }
  return AE_OK;
}

AE_EXPORT int ae_model_set_config_f(ae_model *m, int key, float v) {
  if (m->initialised) return AE_ERR_INVALID_ARG;
  if (!(v == v) || v > 3.0e38f || v < -3.0e38f) return AE_ERR_NONFINITE;
  switch (key) {
    case AE_CFG_NORM_EPS: m->cfg.norm_eps = v; break;
    case AE_CFG_ROPE_THETA: m->cfg.rope_theta = v; break;
    case AE_CFG_EMBD_SCALE: m->cfg.embd_scale = v; break;
    case AE_CFG_ATTN_SCALE: m->cfg.attn_scale = v; break;
    case AE_CFG_ATTN_SOFTCAP: m->cfg.attn_softcap = v; break;
    case AE_CFG_FINAL_SOFTCAP: m->cfg.final_softcap = v; break;
    case AE_CFG_ROPE_FREQ_SCALE: m->cfg.rope_freq_scale = v; break;
    case AE_CFG_ROPE_ATTN_FACTOR: m->cfg.rope_attn_factor = v; break;
    case AE_CFG_ROPE_THETA_SWA: m->cfg.rope_theta_swa = v; break;
    case AE_CFG_ROPE_FREQ_SCALE_SWA: m->cfg.rope_freq_scale_swa = v; break;
    default: return AE_ERR_INVALID_ARG;
  }
  return AE_OK;
}

static ae_tensor *tensor_slot(ae_model *m, int layer, int role) {
  if (layer < 0) {
    switch (role) {
      case AE_T_TOK_EMBD: return &m->tok_embd;
      case AE_T_OUTPUT_NORM: return &m->output_norm;
      case AE_T_OUTPUT: return &m->output;
      case AE_T_ROPE_FREQS: return &m->rope_freqs;
      default: return NULL;
    }
  }
  if (layer >= AE_MAX_LAYERS) return NULL;
  ae_layer *L = &m->layers[layer];
  switch (role) {
    case AE_T_ATTN_NORM: return &L->attn_norm;
    case AE_T_WQ: return &L->wq;
    case AE_T_WK: return &L->wk;
    case AE_T_WV: return &L->wv;
    case AE_T_WQKV: return &L->wqkv;
    case AE_T_BQ: return &L->bq;
    case AE_T_BK: return &L->bk;
    case AE_T_BV: return &L->bv;
    case AE_T_WO: return &L->wo;
    case AE_T_FFN_NORM: return &L->ffn_norm;
    case AE_T_W_GATE: return &L->w_gate;
    case AE_T_W_UP: return &L->w_up;
    case AE_T_W_DOWN: return &L->w_down;
    case AE_T_ATTN_Q_NORM: return &L->q_norm;
    case AE_T_ATTN_K_NORM: return &L->k_norm;
    case AE_T_ATTN_POST_NORM: return &L->attn_post_norm;
    case AE_T_FFN_POST_NORM: return &L->ffn_post_norm;
    case AE_T_FFN_GATE_A: return &L->cmp.gate.a;
    case AE_T_FFN_GATE_B: return &L->cmp.gate.b;
    case AE_T_FFN_UP_A: return &L->cmp.up.a;
    case AE_T_FFN_UP_B: return &L->cmp.up.b;
    case AE_T_FFN_DOWN_A: return &L->cmp.down.a;
    case AE_T_FFN_DOWN_B: return &L->cmp.down.b;
    case AE_T_FFN_OUT_BIAS: return &L->cmp.out_bias;
    default: return NULL;
  }
}

AE_EXPORT int ae_model_set_tensor(ae_model *m, int layer, int role, const void *data, int type, int ne0, int ne1) {
  if (m->initialised) return AE_ERR_INVALID_ARG;
  ae_tensor *t = tensor_slot(m, layer, role);
  if (!t) return AE_ERR_INVALID_ARG;
  t->data = data;
  t->type = type;
  t->ne0 = ne0;
  t->ne1 = ne1;
  return AE_OK;
}

/* Load-time repack of one weight matrix into the layout its kernels run fastest (docs/DESIGN.md "Repacked
 * weights"), in place, after init (the weights are in memory and checked): q4_0 -> AE_Q4_0_R4 (kernels.h; rows in
 * groups of 4), q5_0 / q5_1 / q8_0 / q4_K / q5_K / q6_K -> AE_Q5_0_R4 / AE_Q5_1_R4 / AE_Q8_0_R4 / AE_Q4_K_R4 / AE_Q5_K_R4 /
 * AE_Q6_K_R4 in the relaxed build (rows in groups of 4: returns 2) when they can, else AE_Q5_0_X8 / AE_Q5_1_X8 / AE_Q5_K_X /
 * AE_Q6_K_X (block by block: returns 1; q8_0 and q4_K stay), q3_K -> AE_Q3_K_X (block by block: returns 1); the plain build keeps all but q4_0. Returns 1 (2) when the tensor was repacked, 0 when it stays as it
 * is (absent, another dtype, q4_0 with rows % 4 != 0 or an inf/nan block scale, a token embedding other than q8_0 or q6_K
 * (get_rows reads rows of the file layout, and of AE_Q8_0_R4 / AE_Q6_K_R4 / AE_Q6_K_X: ae_get_row), or a matrix sharing the embedding's bytes), < 0 an error. The tensor's type becomes the repacked one: every
 * consumer dispatches on it (ae_traits), so nothing else changes. Scratch (q4_0): the run state's hb (free between
 * forward calls), at least 4 rows of the widest matrix (checked). */
AE_EXPORT int ae_model_repack_tensor(ae_model *m, int layer, int role) {
  if (!m->initialised || (layer >= 0 && layer >= m->cfg.n_layers) || layer < -1) return AE_ERR_INVALID_ARG;
  ae_tensor *t = tensor_slot(m, layer, role);
  if (!t) return AE_ERR_INVALID_ARG;
  if (!t->data || (t->type != AE_Q4_0 && t->type != AE_Q5_0 && t->type != AE_Q5_1 && t->type != AE_Q8_0 && t->type != AE_Q4_K &&
                   t->type != AE_Q5_K && t->type != AE_Q6_K && t->type != AE_Q3_K)) return 0;
  /* get_rows reads AE_Q8_0_R4, AE_Q6_K_R4 and AE_Q6_K_X rows too */
  if (role == AE_T_TOK_EMBD && layer < 0 && t->type != AE_Q8_0 && t->type != AE_Q6_K) return 0;
  if (t != &m->tok_embd && t->data == m->tok_embd.data) return 0;
#if defined(__wasm_relaxed_simd__)   /* the relaxed build (kernels/simd128/simd128_util.h AE_RELAXED) */
  if ((t->type == AE_Q5_0 || t->type == AE_Q5_1) && t->ne1 % 4 == 0 && t->ne1 >= 4 &&
      4 * ae_row_size((ae_type)t->type, t->ne0) <= (size_t)m->cfg.max_batch * (size_t)m->cfg.hidden_dim * 4 &&
      !(t->type == AE_Q5_0 ? ae_repack_q5_0_r4 : ae_repack_q5_1_r4)((void *)(uintptr_t)t->data, t->ne1, t->ne0, m->hb)) {
    t->type = t->type == AE_Q5_0 ? AE_Q5_0_R4 : AE_Q5_1_R4;   /* the relaxed build's layouts (kernels.h); the rest get X8 below */
    return 2;
  }
  if (t->type == AE_Q8_0 && t->ne1 % 4 == 0 && t->ne1 >= 4 &&
      4 * ae_row_size(AE_Q8_0, t->ne0) <= (size_t)m->cfg.max_batch * (size_t)m->cfg.hidden_dim * 4 &&
      !ae_repack_q8_0_r4((void *)(uintptr_t)t->data, t->ne1, t->ne0, m->hb)) {
    t->type = AE_Q8_0_R4;
    if (t == &m->tok_embd && m->output.data == t->data) m->output.type = AE_Q8_0_R4;   /* an output sharing the bytes */
    return 2;
  }
  if (t->type == AE_Q6_K && t->ne1 % 4 == 0 && t->ne1 >= 4 &&
      4 * ae_row_size(AE_Q6_K, t->ne0) <= (size_t)m->cfg.max_batch * (size_t)m->cfg.hidden_dim * 4 &&
      !ae_repack_q6_K_r4((void *)(uintptr_t)t->data, t->ne1, t->ne0, m->hb)) {   /* the token embedding too (ae_get_row_q6_K_r4) */
    t->type = AE_Q6_K_R4;
    if (t == &m->tok_embd && m->output.data == t->data) m->output.type = AE_Q6_K_R4;   /* an output sharing the bytes */
    return 2;
  }
  if (t->type == AE_Q3_K) {   /* block by block: any shape, any scale (not a token embedding: returned 0 above) */
    ae_repack_q3_K_x((void *)(uintptr_t)t->data, (size_t)t->ne1 * (size_t)(t->ne0 / AE_QK_K));
    t->type = AE_Q3_K_X;
    return 1;
  }
  if (t->type == AE_Q6_K) {   /* the rest block by block: any shape, any scale; the token embedding too (ae_get_row_q6_K_x) */
    ae_repack_q6_K_x((void *)(uintptr_t)t->data, (size_t)t->ne1 * (size_t)(t->ne0 / AE_QK_K));
    t->type = AE_Q6_K_X;
    if (t == &m->tok_embd && m->output.data == t->data) m->output.type = AE_Q6_K_X;   /* an output sharing the bytes */
    return 1;
  }
  if (t->type == AE_Q5_K && t->ne1 % 4 == 0 && t->ne1 >= 4 &&
      4 * ae_row_size(AE_Q5_K, t->ne0) <= (size_t)m->cfg.max_batch * (size_t)m->cfg.hidden_dim * 4 &&
      !ae_repack_q5_K_r4((void *)(uintptr_t)t->data, t->ne1, t->ne0, m->hb)) {
    t->type = AE_Q5_K_R4;
    return 2;
  }
  if (t->type == AE_Q5_K) {   /* the rest block by block: any shape, any scales (the kernels convert d / dmin as q5_K's) */
    ae_repack_q5_K_x((void *)(uintptr_t)t->data, (size_t)t->ne1 * (size_t)(t->ne0 / AE_QK_K));
    t->type = AE_Q5_K_X;
    return 1;
  }
  if (t->type == AE_Q4_K && t->ne1 % 4 == 0 && t->ne1 >= 4 &&
      4 * ae_row_size(AE_Q4_K, t->ne0) <= (size_t)m->cfg.max_batch * (size_t)m->cfg.hidden_dim * 4 &&
      !ae_repack_q4_K_r4((void *)(uintptr_t)t->data, t->ne1, t->ne0, m->hb)) {
    t->type = AE_Q4_K_R4;
    return 2;
  }
#endif
  if (t->type == AE_Q8_0 || t->type == AE_Q4_K || t->type == AE_Q5_K || t->type == AE_Q6_K || t->type == AE_Q3_K) return 0;   /* the plain build's kernels read the file layout */
  if (t->type == AE_Q5_0 || t->type == AE_Q5_1) {
    const size_t nblocks = (size_t)t->ne1 * (size_t)(t->ne0 / 32);
    if (t->type == AE_Q5_0) ae_repack_q5_0_x8((void *)(uintptr_t)t->data, nblocks);
    else ae_repack_q5_1_x8((void *)(uintptr_t)t->data, nblocks);
    t->type = t->type == AE_Q5_0 ? AE_Q5_0_X8 : AE_Q5_1_X8;
    return 1;
  }
  if (t->ne1 % 4 || t->ne1 < 4) return 0;
  const size_t need = 4 * ae_row_size(AE_Q4_0, t->ne0), have = (size_t)m->cfg.max_batch * (size_t)m->cfg.hidden_dim * 4;
  if (need > have) return 0;
  if (ae_repack_q4_0_r4((void *)(uintptr_t)t->data, t->ne1, t->ne0, m->hb)) return 0;
  t->type = AE_Q4_0_R4;
  return 1;
}

/* Mark layer `layer` as a sliding-window layer (1) or full attention (0). */
AE_EXPORT int ae_model_set_layer_swa(ae_model *m, int layer, int swa) {
  if (m->initialised || layer < 0 || layer >= AE_MAX_LAYERS || (swa != 0 && swa != 1)) return AE_ERR_INVALID_ARG;
  m->layers[layer].swa = swa;
  return AE_OK;
}

AE_EXPORT int ae_model_set_ffn_mode(ae_model *m, int layer, int mode, const void *aux) {
  if (layer < 0 || layer >= m->cfg.n_layers) return AE_ERR_INVALID_ARG;
  if (mode < AE_FFN_DENSE || mode > AE_FFN_PROFILE) return AE_ERR_INVALID_ARG;
  m->layers[layer].ffn_mode = mode;
  m->layers[layer].ffn_aux = aux;
  return AE_OK;
}

/* Calibration capture of one layer (see AE_CAP_* in model.h); ptr 0 turns it off. */
AE_EXPORT int ae_model_set_capture(ae_model *m, int layer, float *ptr) {
  if (layer < 0 || layer >= m->cfg.n_layers || ((uintptr_t)ptr & 3u)) return AE_ERR_INVALID_ARG;
  m->layers[layer].cap = ptr;
  return AE_OK;
}

/* Float offset of capture block `which` (ae_cap_block; AE_CAP_COUNT: floats of the whole capture area). */
AE_EXPORT int ae_model_capture_offset(ae_model *m, int which) {
  const ae_config *c = &m->cfg;
  const int q_dim = c->n_heads * c->head_dim;
  const int w[AE_CAP_COUNT] = {c->dim, q_dim, c->dim, c->hidden_dim};
  if (which < 0 || which > AE_CAP_COUNT) return -1;
  int off = 0;
  for (int k = 0; k < which; k++) off += c->max_batch * w[k];
  return off;
}

/* Compression mode of a layer (ae_cmp_mode): AE_ERR_UNSUPPORTED when the layer lacks what the mode needs
 * (no variant, or no dense weights in a file written without them). Callable between forward calls. */
AE_EXPORT int ae_model_set_compression(ae_model *m, int layer, int mode) {
  if (!m->initialised || layer < 0 || layer >= m->cfg.n_layers || mode < 0 || mode >= AE_CMP_MODES) return AE_ERR_INVALID_ARG;
  ae_layer *L = &m->layers[layer];
  if (mode == AE_CMP_VARIANT && !L->cmp.width) return AE_ERR_UNSUPPORTED;
  if (mode == AE_CMP_DENSE && !L->w_gate.data) return AE_ERR_UNSUPPORTED;
  L->cmp_mode = mode;
  return AE_OK;
}
AE_EXPORT int ae_model_compression(const ae_model *m, int layer) {
  return (layer >= 0 && layer < m->cfg.n_layers) ? m->layers[layer].cmp_mode : -1;
}
/* Intermediate width of a layer's compressed variant (0: none). */
AE_EXPORT int ae_model_cmp_width(const ae_model *m, int layer) {
  return (layer >= 0 && layer < m->cfg.n_layers) ? m->layers[layer].cmp.width : -1;
}

AE_EXPORT int ae_model_ffn_active(const ae_model *m, int layer) {
  return (layer >= 0 && layer < m->cfg.n_layers) ? m->layers[layer].ffn_active : -1;
}

/* Per-layer counters since the last reset: 0 = FFN neurons computed (summed over tokens), 1 = tokens. */
AE_EXPORT double ae_model_counter(const ae_model *m, int layer, int which) {
  if (layer < 0 || layer >= m->cfg.n_layers) return -1.0;
  return which == 0 ? m->layers[layer].ffn_active_sum : which == 1 ? m->layers[layer].ffn_token_sum : -1.0;
}

AE_EXPORT void ae_model_reset_counters(ae_model *m) {
  for (int l = 0; l < AE_MAX_LAYERS; l++) m->layers[l].ffn_active_sum = m->layers[l].ffn_token_sum = 0.0;
  if (m->op_time) __builtin_memset(m->op_time, 0, (size_t)(m->cfg.n_layers + 1) * AE_OP_COUNT * sizeof(double));
}

/* Time counters per (layer, op class): buf holds (n_layers + 1) * AE_OP_COUNT doubles (zeroed here), NULL = off.
 * Set between forwards only. */
AE_EXPORT int ae_model_set_timing(ae_model *m, double *buf) {
  if (buf && ((uintptr_t)buf & 7u)) return AE_ERR_INVALID_ARG;
  m->op_time = buf;
  if (buf) __builtin_memset(buf, 0, (size_t)(m->cfg.n_layers + 1) * AE_OP_COUNT * sizeof(double));
  return AE_OK;
}

/* Attention statistics for head profiling: buf holds max_threads * n_layers * n_heads * AE_HS_N doubles (zeroed
 * here), NULL = off. Set between forwards only. */
AE_EXPORT int ae_model_set_head_stats(ae_model *m, double *buf, int sinks, int window) {
  if ((buf && ((uintptr_t)buf & 7u)) || sinks < 0 || window < 1) return AE_ERR_INVALID_ARG;
  m->head_stats = buf;
  m->hs_sinks = sinks;
  m->hs_window = window;
  if (buf) __builtin_memset(buf, 0, (size_t)m->cfg.max_threads * m->cfg.n_layers * m->cfg.n_heads * AE_HS_N * sizeof(double));
  return AE_OK;
}

/* K (which 0) or V (1) of KV head g of `layer` at positions t0 .. t0+n-1 as floats into out (n rows of head_dim),
 * whatever the cache's storage (plain, or a policy's segments): the one reader of cached rows for the host (head
 * profiling, tests). A head stored locally has only its sinks and the positions still in the ring: other positions
 * are AE_ERR_UNSUPPORTED (not stored). */
AE_EXPORT int ae_model_kv_read(const ae_model *m, int layer, int which, int g, int t0, int n, float *out) {
  const ae_config *c = &m->cfg;
  static float row[AE_KV_PAD(512)];
  if (!m->initialised || m->kv_dirty || layer < 0 || layer >= c->n_layers || g < 0 || g >= c->n_kv_heads || t0 < 0 || n < 0 ||
      t0 + n > c->n_ctx || c->head_dim > 512)
    return AE_ERR_INVALID_ARG;
  const ae_layer *L = &m->layers[layer];
  for (int t = t0; t < t0 + n; t++) {
    const uint8_t *src = NULL;
    int type = 0;
    if (!L->kvp.n_seg) {
      type = which ? L->v_type : L->k_type;
      src = (which ? L->v : L->k) + ((size_t)g * c->n_ctx + t) * (which ? L->v_row : L->k_row);
    } else {
      const ae_kv_policy *P = &L->kvp;
      for (int s = 0; s < P->n_seg; s++) {
        const ae_kv_store *st = &P->seg[s];
        uint8_t *k, *v;
        if (t >= st->start && t < st->end && ae_kv_seg_row(st, P, g, t - st->start, &k, &v)) { type = st->type; src = which ? v : k; }
      }
      /* a head stored locally: its positions beyond the sinks only while they are in the ring */
      if (!src && P->window && ae_kv_head_stored(P, g) && t < m->n_past && t >= m->n_past - P->ring.cap) {
        const size_t row = (size_t)ae_kv_ring_slot(P, g) * P->ring.cap + (size_t)(t % P->ring.cap);
        type = P->ring.type;
        src = (which ? P->ring.v : P->ring.k) + row * P->ring.row;
      }
    }
    if (!src) return L->kvp.n_seg && ae_kv_head_stored(&L->kvp, g) ? AE_ERR_UNSUPPORTED : AE_ERR_INVALID_ARG;
    const ae_type_traits *tr = ae_traits((ae_type)type);
    const int hp = (c->head_dim + tr->blck_size - 1) / tr->blck_size * tr->blck_size;
    tr->to_float(src, row, hp);
    __builtin_memcpy(out + (size_t)(t - t0) * c->head_dim, row, (size_t)c->head_dim * 4);
  }
  return AE_OK;
}

/* Where validation failed: (layer, role, reason) for the host's error message. */
static int32_t g_bad_layer, g_bad_role, g_bad_reason;
AE_EXPORT int32_t ae_model_bad_layer(void) { return g_bad_layer; }
AE_EXPORT int32_t ae_model_bad_role(void) { return g_bad_role; }
/* enum ae_bad_reason */
AE_EXPORT int32_t ae_model_bad_reason(void) { return g_bad_reason; }

static int bad(int layer, int role, int reason) {
  g_bad_layer = layer; g_bad_role = role; g_bad_reason = reason;
  return AE_ERR_BAD_TENSOR;
}

static int check_tensor(const ae_tensor *t, int layer, int role, int ne0, int ne1, int matrix, int required) {
  if (!t->data) return required ? bad(layer, role, AE_BAD_MISSING) : AE_OK;
  if (!ae_is_weight_type(t->type)) return bad(layer, role, AE_BAD_DTYPE);
  const ae_type_traits *tr = ae_traits((ae_type)t->type);
  if (!matrix && t->type != AE_F32) return bad(layer, role, AE_BAD_DTYPE);
  if (t->ne0 != ne0 || t->ne1 != ne1) return bad(layer, role, AE_BAD_SHAPE);
  if (ne0 % tr->blck_size) return bad(layer, role, AE_BAD_BLOCKS);
  uint64_t bytes = (uint64_t)ae_row_size((ae_type)t->type, ne0) * (uint64_t)ne1;
#ifdef __wasm__
  const uint64_t lo = AE_HOST_BASE, mem = (uint64_t)__builtin_wasm_memory_size(0) * 65536u;
#else  /* native test builds (fuzz/c, sanitizers): the window the harness says tensors live in */
  const uint64_t lo = ae_native_mem_lo, mem = ae_native_mem_hi;
#endif
  uint64_t start = (uint64_t)(uintptr_t)t->data;
  if (start < lo || start + bytes > mem) return bad(layer, role, AE_BAD_RANGE);
  if (start % 4) return bad(layer, role, AE_BAD_ALIGN);
  return AE_OK;
}

/* One matrix of a variant: a [in, r] (r = a's rows), optional b [r, out]. Returns the output width (or < 0 with st set). */
static int check_fmat(const ae_fmat *f, int layer, int role_a, int in, int out_fixed, int max_mid, int *st) {
  const ae_tensor *a = &f->a, *b = &f->b;
  if (!a->data) { *st = bad(layer, role_a, AE_BAD_MISSING); return -1; }
  const int r = a->ne1;
  if (r <= 0 || (b->data && r > max_mid)) { *st = bad(layer, role_a, AE_BAD_SHAPE); return -1; }
  if ((*st = check_tensor(a, layer, role_a, in, r, 1, 1))) return -1;
  if (!b->data) {
    if (out_fixed && r != out_fixed) { *st = bad(layer, role_a, AE_BAD_SHAPE); return -1; }
    return r;
  }
  const int o = out_fixed ? out_fixed : b->ne1;
  if ((*st = check_tensor(b, layer, role_a + 1, r, o, 1, 1))) return -1;
  return o;
}

/* The compressed variant of a layer, if any: gate and up of the same width w <= hidden_dim, down [w -> dim];
 * low-rank intermediates r <= dim (they live in the (max_batch, dim) run-state buffers). Sets L->cmp.width. */
static int check_variant(ae_model *m, ae_layer *L, int l) {
  ae_ffn_variant *v = &L->cmp;
  v->width = 0;
  const int any = v->gate.a.data || v->gate.b.data || v->up.a.data || v->up.b.data || v->down.a.data || v->down.b.data || v->out_bias.data;
  if (!any) return AE_OK;
  const int D = m->cfg.dim, H = m->cfg.hidden_dim;
  int st = AE_OK;
  const int w = check_fmat(&v->gate, l, AE_T_FFN_GATE_A, D, 0, D, &st);
  if (w < 0) return st;
  if (w > H) return bad(l, v->gate.b.data ? AE_T_FFN_GATE_B : AE_T_FFN_GATE_A, AE_BAD_SHAPE);
  if (check_fmat(&v->up, l, AE_T_FFN_UP_A, D, w, D, &st) < 0) return st;
  if (check_fmat(&v->down, l, AE_T_FFN_DOWN_A, w, D, D, &st) < 0) return st;
  if ((st = check_tensor(&v->out_bias, l, AE_T_FFN_OUT_BIAS, D, 1, 0, 0))) return st;
  v->width = w;
  return AE_OK;
}

static int finite_pos(float v) { return v > 0.0f && v < 3.0e38f; }

static int check_config(const ae_config *c) {
  if (c->arch < AE_ARCH_LLAMA || c->arch > AE_ARCH_LAST) return AE_ERR_BAD_CONFIG;
  if (c->dim <= 0 || c->dim > 65536 || c->n_layers <= 0 || c->n_layers > AE_MAX_LAYERS) return AE_ERR_BAD_CONFIG;
  /* n_heads bounded so that n_heads * head_dim (and q + 2 kv) cannot overflow (also found by fuzz/c model-init) */
  if (c->n_heads <= 0 || c->n_kv_heads <= 0 || c->n_heads % c->n_kv_heads) return AE_ERR_BAD_CONFIG;
  if (c->n_heads > 4096 || (int64_t)c->n_heads * c->head_dim > 262144) return AE_ERR_BAD_CONFIG;  /* q_dim fits an int */
  if (c->head_dim <= 0 || c->head_dim > 1024 || (c->head_dim & 1)) return AE_ERR_BAD_CONFIG;
  if (c->rope_dim <= 0 || c->rope_dim > c->head_dim || (c->rope_dim & 1)) return AE_ERR_BAD_CONFIG;
  if (c->hidden_dim <= 0 || c->hidden_dim > 262144 || c->vocab <= 0 || c->vocab > (1 << 22)) return AE_ERR_BAD_CONFIG;
  if (c->n_ctx <= 0 || c->n_ctx > (1 << 20) || c->max_batch <= 0 || c->max_batch > 4096) return AE_ERR_BAD_CONFIG;
  if (c->max_threads <= 0 || c->max_threads > 256) return AE_ERR_BAD_CONFIG;
  if (!(c->norm_eps > 0.0f) || !(c->rope_theta > 0.0f)) return AE_ERR_BAD_CONFIG;
  if (c->ffn_act != AE_ACT_SILU && c->ffn_act != AE_ACT_GELU_TANH) return AE_ERR_BAD_CONFIG;
  if (c->swa_window < 0) return AE_ERR_BAD_CONFIG;
  if (!ae_kv_types_ok(c->kv_type_k, c->kv_type_v, c->head_dim)) return AE_ERR_BAD_CONFIG;
  if (!finite_pos(c->embd_scale) || !finite_pos(c->rope_freq_scale) || !finite_pos(c->rope_attn_factor) ||
      !finite_pos(c->rope_freq_scale_swa)) return AE_ERR_BAD_CONFIG;
  if (c->attn_scale < 0.0f || c->attn_softcap < 0.0f || c->final_softcap < 0.0f || c->rope_theta_swa < 0.0f) return AE_ERR_BAD_CONFIG;
  return AE_OK;
}

static int dims_ok(ae_model *m) {
  ae_config *c = &m->cfg;
  m->q_dim = c->n_heads * c->head_dim;
  m->kv_dim = c->n_kv_heads * c->head_dim;
  m->qkv_dim = m->q_dim + 2 * m->kv_dim;
  return AE_OK;
}

/* Validate every tensor against the config and the memory. @return ae_status; on AE_ERR_BAD_TENSOR
 * ae_model_bad_layer/role/reason say which and why. */
AE_EXPORT int ae_model_validate(ae_model *m) {
  int st = check_config(&m->cfg);
  if (st) return st;
  dims_ok(m);
  const ae_config *c = &m->cfg;
  const int D = c->dim, H = c->hidden_dim;
  if ((st = check_tensor(&m->tok_embd, -1, AE_T_TOK_EMBD, D, c->vocab, 1, 1))) return st;
  if ((st = check_tensor(&m->output_norm, -1, AE_T_OUTPUT_NORM, D, 1, 0, 1))) return st;
  if ((st = check_tensor(&m->output, -1, AE_T_OUTPUT, D, c->vocab, 1, 0))) return st;
  if ((st = check_tensor(&m->rope_freqs, -1, AE_T_ROPE_FREQS, c->rope_dim / 2, 1, 0, 0))) return st;
  if (m->rope_freqs.data) {
    const float *f = (const float *)m->rope_freqs.data;
    for (int i = 0; i < c->rope_dim / 2; i++) if (!finite_pos(f[i])) return bad(-1, AE_T_ROPE_FREQS, AE_BAD_VALUE);
  }
  for (int l = 0; l < c->n_layers; l++) {
    ae_layer *L = &m->layers[l];
    if ((st = check_tensor(&L->attn_norm, l, AE_T_ATTN_NORM, D, 1, 0, 1))) return st;
    int fused = L->wqkv.data != NULL;
    if ((st = check_tensor(&L->wqkv, l, AE_T_WQKV, D, m->qkv_dim, 1, 0))) return st;
    if ((st = check_tensor(&L->wq, l, AE_T_WQ, D, m->q_dim, 1, !fused))) return st;
    if ((st = check_tensor(&L->wk, l, AE_T_WK, D, m->kv_dim, 1, !fused))) return st;
    if ((st = check_tensor(&L->wv, l, AE_T_WV, D, m->kv_dim, 1, !fused))) return st;
    if (fused && (L->wq.data || L->wk.data || L->wv.data)) return bad(l, AE_T_WQKV, AE_BAD_SHAPE);
    if ((st = check_tensor(&L->bq, l, AE_T_BQ, m->q_dim, 1, 0, 0))) return st;
    if ((st = check_tensor(&L->bk, l, AE_T_BK, m->kv_dim, 1, 0, 0))) return st;
    if ((st = check_tensor(&L->bv, l, AE_T_BV, m->kv_dim, 1, 0, 0))) return st;
    if ((st = check_tensor(&L->wo, l, AE_T_WO, m->q_dim, D, 1, 1))) return st;
    if ((st = check_tensor(&L->ffn_norm, l, AE_T_FFN_NORM, D, 1, 0, 1))) return st;
    if ((st = check_variant(m, L, l))) return st;
    const int dense = !L->cmp.width;  /* dense FFN weights may be left out when there is a variant */
    if ((st = check_tensor(&L->w_gate, l, AE_T_W_GATE, D, H, 1, dense))) return st;
    if ((st = check_tensor(&L->w_up, l, AE_T_W_UP, D, H, 1, dense || L->w_gate.data))) return st;
    if ((st = check_tensor(&L->w_down, l, AE_T_W_DOWN, H, D, 1, dense || L->w_gate.data))) return st;
    if (!L->w_gate.data && (L->w_up.data || L->w_down.data)) return bad(l, AE_T_W_GATE, AE_BAD_MISSING);
    L->cmp_mode = L->cmp.width ? AE_CMP_VARIANT : AE_CMP_DENSE;  /* a file with a variant runs it by default */
    if ((st = check_tensor(&L->q_norm, l, AE_T_ATTN_Q_NORM, c->head_dim, 1, 0, 0))) return st;
    if ((st = check_tensor(&L->k_norm, l, AE_T_ATTN_K_NORM, c->head_dim, 1, 0, 0))) return st;
    if (!L->q_norm.data != !L->k_norm.data) return bad(l, L->q_norm.data ? AE_T_ATTN_K_NORM : AE_T_ATTN_Q_NORM, AE_BAD_MISSING);
    if ((st = check_tensor(&L->attn_post_norm, l, AE_T_ATTN_POST_NORM, D, 1, 0, 0))) return st;
    if ((st = check_tensor(&L->ffn_post_norm, l, AE_T_FFN_POST_NORM, D, 1, 0, 0))) return st;
  }
  return AE_OK;
}

#define AE_ALIGN64(x) (((x) + 63u) & ~(size_t)63u)

/* KV heads of a policy stored locally (0 without a window) */
static int kv_n_stored(const ae_kv_policy *P) {
  return P->window ? __builtin_popcount(P->stored[0]) + __builtin_popcount(P->stored[1]) : 0;
}

/* Whether the ring of a policy with a window keeps every KV head: some segment's dtype differs from the window's */
static int kv_ring_all(const ae_kv_policy *P) {
  for (int s = 0; s < P->n_seg; s++) if (P->seg_type[s] != P->window_type) return 1;
  return 0;
}

static int max3(int a, int b, int c) { int m = a > b ? a : b; return m > c ? m : c; }

/* Arena layout, shared by the size query and init: walks the buffers, assigning when base != 0. */
static uint64_t layout(ae_model *m, uintptr_t base, uint64_t *kv_start) {
  const ae_config *c = &m->cfg;
  const uint64_t B = (uint64_t)c->max_batch;
  const int widest = max3(c->dim, c->hidden_dim, m->q_dim);
  uint64_t off = 0;  /* 64-bit: sizes from a hostile config must not wrap */
#define TAKE(field, bytes) do { if (base) m->field = (void *)(base + (uintptr_t)off); off = (off + (uint64_t)(bytes) + 63u) & ~(uint64_t)63u; } while (0)
  TAKE(x, B * c->dim * 4);
  TAKE(xb, B * (size_t)(c->dim > m->q_dim ? c->dim : m->q_dim) * 4);
  TAKE(qkv, B * m->qkv_dim * 4);
  TAKE(hb, B * c->hidden_dim * 4);
  TAKE(hb2, B * c->hidden_dim * 4);
  TAKE(tmp, B * c->dim * 4);
  for (int t = 0; t < AE_TYPE_COUNT; t++) {   /* one buffer per activation dtype, in dtype order */
    if (!ae_is_act_type(t)) continue;
    const int blk = ae_traits((ae_type)t)->blck_size;
    /* a row: max(dim, hidden, q_dim) values, then a second slot of hidden values (ae_act_hidden_rows) */
    const size_t s = AE_ALIGN64(ae_row_size((ae_type)t, (widest + blk - 1) / blk * blk))
                   + AE_ALIGN64(ae_row_size((ae_type)t, (c->hidden_dim + blk - 1) / blk * blk));
    if (base) m->act_stride[t] = s;
    TAKE(act[t], B * s);
  }
  TAKE(rope_cs, B * c->rope_dim * 4);
  TAKE(rope_cs_swa, B * c->rope_dim * 4);
  const uint64_t group = (uint64_t)(c->n_heads / c->n_kv_heads);
  const uint64_t qrows = (uint64_t)AE_ATTN_TOKENS(c) * group;   /* query rows of one attention item */
  TAKE(att, (uint64_t)c->max_threads * qrows * c->n_ctx * 4);
  TAKE(qconv, (uint64_t)c->max_threads * (qrows + 1) * AE_KV_PAD(c->head_dim) * 4);
  TAKE(logits, (c->logits_all ? B : 1) * (uint64_t)c->vocab * 4);
  TAKE(out_part, (uint64_t)AE_OUT_PARTS(c) * sizeof(struct ae_out_part));
  TAKE(flow, (uint64_t)ae_forward_max_steps(c) * 16u);   /* step counters (pool.h ae_flow) */
  /* KV cache last (the bulk): per layer K then V, each n_kv_heads * n_ctx rows of head_dim values; a layer with
   * a KV policy has its segments and ring instead */
  const uint64_t k_row = ae_kv_row_size((ae_type)c->kv_type_k, c->head_dim), v_row = ae_kv_row_size((ae_type)c->kv_type_v, c->head_dim);
  const uint64_t rows = (uint64_t)c->n_kv_heads * (uint64_t)c->n_ctx;
  const uint64_t kv0 = off;
  for (int l = 0; l < c->n_layers; l++) {
    ae_kv_policy *P = &m->layers[l].kvp;
    if (P->n_seg) {
      int start = 0;
      for (int s = 0; s <= P->n_seg; s++) {   /* segments, then the ring (s == n_seg) */
        const int ring = s == P->n_seg;
        if (ring && !P->window) break;
        ae_kv_store *st = ring ? &P->ring : &P->seg[s];
        const int type = ring ? P->window_type : P->seg_type[s];
        int end = ring ? 0 : (P->seg_end[s] < 0 || P->seg_end[s] > c->n_ctx ? c->n_ctx : P->seg_end[s]);
        if (!ring && end < start) end = start;
        const int cap = ring ? (P->window + c->max_batch < c->n_ctx ? P->window + c->max_batch : c->n_ctx) : end - start;
        /* segments: heads stored locally keep only positions < sinks (lcap rows); the ring: every head, or only the
         * heads stored locally when every segment has the window's dtype (ring_all 0: the others read their window
         * from the segments, the same bytes) */
        const int n_loc = kv_n_stored(P), lend = P->sinks < end ? P->sinks : end, all = kv_ring_all(P);
        const int lcap = ring || lend < start ? 0 : lend - start;
        const uint64_t row = ae_kv_row_size((ae_type)type, c->head_dim);
        const uint64_t full = ring ? (uint64_t)(all ? c->n_kv_heads : n_loc) * (uint64_t)cap * row
                                   : (uint64_t)(c->n_kv_heads - n_loc) * (uint64_t)cap * row;
        const uint64_t loc = (uint64_t)n_loc * (uint64_t)lcap * row;
        if (base && ring) P->ring_all = all;
        const uint64_t bytes = full + loc;
        if (base) {
          st->type = type; st->start = ring ? 0 : start; st->end = ring ? 0 : end; st->cap = cap; st->row = (uint32_t)row;
          st->lcap = lcap;
          st->k = (uint8_t *)(base + (uintptr_t)off);
          st->kl = st->k + full;
          st->v = (uint8_t *)(base + (uintptr_t)(off + bytes));
          st->vl = st->v + full;
        }
        off += AE_ALIGN64(2 * bytes);
        if (!ring) start = end;
      }
      if (base) { m->layers[l].k = m->layers[l].v = NULL; m->layers[l].k_row = m->layers[l].v_row = 0; }
      continue;
    }
    if (base) {
      ae_layer *L = &m->layers[l];
      L->k_type = c->kv_type_k; L->v_type = c->kv_type_v;
      L->k_row = (uint32_t)k_row; L->v_row = (uint32_t)v_row;
      L->k = (uint8_t *)(base + (uintptr_t)off);
      L->v = (uint8_t *)(base + (uintptr_t)(off + rows * k_row));
    }
    off += rows * (k_row + v_row);
  }
  if (base) m->kv = (uint8_t *)(base + (uintptr_t)kv0);
  if (kv_start) *kv_start = kv0;
#undef TAKE
  return off;
}

/* Bytes of arena ae_model_init needs (call after the config is set), computed in 64 bits (a JS BigInt: the
 * host compares it with the memory it can have); 0 on a bad config. */
AE_EXPORT uint64_t ae_model_arena_size(ae_model *m) {
  if (check_config(&m->cfg)) return 0;
  dims_ok(m);
  return layout(m, 0, 0);
}
/* Bytes of the KV cache alone (64 bits; KV policies included); 0 on a bad config. */
AE_EXPORT uint64_t ae_model_kv_size(ae_model *m) {
  if (check_config(&m->cfg)) return 0;
  dims_ok(m);
  uint64_t kv0 = 0;
  const uint64_t end = layout(m, 0, &kv0);
  return end - kv0;
}

/* Bytes of KV cache rows of dtype `type` holding positions < npos (npos = n_ctx: all allocated), K and V. */
AE_EXPORT double ae_model_kv_bytes(const ae_model *m, int type, int npos) {
  const ae_config *c = &m->cfg;
  if (!m->initialised) return 0.0;
  double n = 0.0;
  for (int l = 0; l < c->n_layers; l++) {
    const ae_layer *L = &m->layers[l];
    const ae_kv_policy *P = &L->kvp;
    const int np = npos < c->n_ctx ? npos : c->n_ctx;
    if (!P->n_seg) {
      if (L->k_type == type) n += (double)c->n_kv_heads * np * L->k_row;
      if (L->v_type == type) n += (double)c->n_kv_heads * np * L->v_row;
      continue;
    }
    const int n_loc = kv_n_stored(P);
    for (int s = 0; s < P->n_seg; s++) {
      const ae_kv_store *st = &P->seg[s];
      const int r = np - st->start < 0 ? 0 : np - st->start > st->cap ? st->cap : np - st->start;
      if (st->type == type) n += 2.0 * ((double)(c->n_kv_heads - n_loc) * r + (double)n_loc * (r < st->lcap ? r : st->lcap)) * st->row;
    }
    if (P->window && P->ring.type == type)
      n += 2.0 * (P->ring_all ? c->n_kv_heads : n_loc) * (double)(np < P->ring.cap ? np : P->ring.cap) * P->ring.row;
  }
  return n;
}

/* Bytes (K and V) of `layer` (-1: all layers) saved by the KV heads stored locally: the segment rows beyond the sinks
 * they do not keep, less the ring rows they need when the ring keeps no other head (can be negative: short contexts). */
AE_EXPORT double ae_model_kv_local_saved(const ae_model *m, int layer) {
  const ae_config *c = &m->cfg;
  if (!m->initialised || layer < -1 || layer >= c->n_layers) return 0.0;
  double n = 0.0;
  for (int l = layer < 0 ? 0 : layer; l < (layer < 0 ? c->n_layers : layer + 1); l++) {
    const ae_kv_policy *P = &m->layers[l].kvp;
    const int n_loc = kv_n_stored(P);
    for (int s = 0; s < P->n_seg && n_loc; s++) n += 2.0 * n_loc * (double)(P->seg[s].cap - P->seg[s].lcap) * P->seg[s].row;
    /* less their ring rows when the ring would otherwise keep no head (net saving) */
    if (n_loc && !P->ring_all) n -= 2.0 * n_loc * (double)P->ring.cap * P->ring.row;
  }
  return n;
}

/* KV policy of `layer` (-1: every layer): n_seg segments from position 0, spec[2s] the end of segment s (exclusive;
 * -1 for the last: to n_ctx), spec[2s + 1] its dtype; window (0: none) and its dtype; sinks. n_seg 0 removes the
 * policy. Before init, or after it followed by ae_model_relayout (the cache is emptied). */
AE_EXPORT int ae_model_set_kv_policy(ae_model *m, int layer, int n_seg, const int32_t *spec, int window, int window_type, int sinks) {
  const ae_config *c = &m->cfg;
  if (layer < -1 || layer >= (m->initialised ? c->n_layers : AE_MAX_LAYERS) || n_seg < 0 || n_seg > AE_KV_MAX_SEGS) return AE_ERR_INVALID_ARG;
  if (window < 0 || sinks < 0 || (n_seg == 0 && window)) return AE_ERR_INVALID_ARG;
  int prev = 0;
  for (int s = 0; s < n_seg; s++) {
    const int end = spec[2 * s], type = spec[2 * s + 1];
    if (s == n_seg - 1 ? end != -1 : end <= prev) return AE_ERR_INVALID_ARG;
    if (!ae_kv_types_ok(type, type, c->head_dim)) return AE_ERR_UNSUPPORTED;
    prev = end;
  }
  if (window && !ae_kv_types_ok(window_type, window_type, c->head_dim)) return AE_ERR_UNSUPPORTED;
  const int l0 = layer < 0 ? 0 : layer, l1 = layer < 0 ? AE_MAX_LAYERS : layer + 1;
  for (int l = l0; l < l1; l++) {
    ae_kv_policy *P = &m->layers[l].kvp;
    const uint32_t lo = P->local[0], hi = P->local[1], slo = P->stored[0], shi = P->stored[1];
    __builtin_memset(P, 0, sizeof *P);
    P->n_seg = n_seg; P->window = window; P->window_type = window ? window_type : 0; P->sinks = sinks;
    for (int s = 0; s < n_seg; s++) { P->seg_end[s] = spec[2 * s]; P->seg_type[s] = spec[2 * s + 1]; }
    if (window) { P->local[0] = lo; P->local[1] = hi; P->stored[0] = slo; P->stored[1] = shi; }
  }
  if (m->initialised) m->kv_dirty = 1;
  return AE_OK;
}

/* KV head g of `layer` local (on = 1: attends to [0, sinks) and the window only) or not; needs a policy with a window. */
AE_EXPORT int ae_model_set_kv_local(ae_model *m, int layer, int g, int on) {
  if (layer < 0 || layer >= m->cfg.n_layers || g < 0 || g >= m->cfg.n_kv_heads || g >= 64 || (on != 0 && on != 1)) return AE_ERR_INVALID_ARG;
  ae_kv_policy *P = &m->layers[layer].kvp;
  if (on && !P->window) return AE_ERR_UNSUPPORTED;
  if (!on && ae_kv_head_stored(P, g)) return AE_ERR_UNSUPPORTED;   /* its middle positions are not stored */
  if (on) P->local[g >> 5] |= 1u << (g & 31); else P->local[g >> 5] &= ~(1u << (g & 31));
  return AE_OK;
}

/* KV head g of `layer` stored locally (on = 1: only positions < sinks and the window's ring are kept; it attends
 * locally) or fully (on = 0: it stays local until ae_model_set_kv_local turns it off). Needs a policy with a window.
 * After init the change needs ae_model_relayout (the cache is emptied). */
AE_EXPORT int ae_model_set_kv_stored_local(ae_model *m, int layer, int g, int on) {
  if (layer < 0 || layer >= m->cfg.n_layers || g < 0 || g >= m->cfg.n_kv_heads || g >= 64 || (on != 0 && on != 1)) return AE_ERR_INVALID_ARG;
  ae_kv_policy *P = &m->layers[layer].kvp;
  if (on && !P->window) return AE_ERR_UNSUPPORTED;
  if (ae_kv_head_stored(P, g) == on) return AE_OK;
  if (on) { P->stored[g >> 5] |= 1u << (g & 31); P->local[g >> 5] |= 1u << (g & 31); }
  else P->stored[g >> 5] &= ~(1u << (g & 31));
  if (m->initialised) m->kv_dirty = 1;
  return AE_OK;
}

/* Carve the run state again after a KV policy changed (the cache is emptied). */
AE_EXPORT int ae_model_relayout(ae_model *m, void *arena, size_t size) {
  if (!m->initialised) return AE_ERR_INVALID_ARG;
#ifdef __wasm__
  const uint64_t need = layout(m, 0, 0), mem = (uint64_t)__builtin_wasm_memory_size(0) * 65536u;
#else  /* native test builds: the arena is the harness's own allocation */
  const uint64_t need = layout(m, 0, 0), mem = UINT64_MAX;
#endif
  if (((uintptr_t)arena & 63u) || need > size || (uint64_t)(uintptr_t)arena + need > mem) return AE_ERR_NO_MEMORY;
  layout(m, (uintptr_t)arena, 0);
  m->n_past = 0;
  m->kv_dirty = 0;
  return AE_OK;
}

static uint64_t tensor_bytes(const ae_tensor *t) {
  return t->data ? (uint64_t)ae_row_size((ae_type)t->type, t->ne0) * (uint64_t)t->ne1 : 0;
}
/* Weight bytes one decode token streams through the dense path: every layer's matrices and the output matrix. */
static uint64_t decode_bytes(const ae_model *m) {
  uint64_t b = tensor_bytes(m->output.data ? &m->output : &m->tok_embd);
  for (int l = 0; l < m->cfg.n_layers; l++) {
    const ae_layer *L = &m->layers[l];
    b += tensor_bytes(&L->wq) + tensor_bytes(&L->wk) + tensor_bytes(&L->wv) + tensor_bytes(&L->wqkv) + tensor_bytes(&L->wo)
       + tensor_bytes(&L->w_gate) + tensor_bytes(&L->w_up) + tensor_bytes(&L->w_down);
  }
  return b;
}

/* Validate, then carve the run state out of [arena, arena + size) (64-byte aligned). */
AE_EXPORT int ae_model_init(ae_model *m, void *arena, size_t size) {
  int st = ae_model_validate(m);
  if (st) return st;
#ifdef __wasm__
  const uint64_t need = layout(m, 0, 0), mem = (uint64_t)__builtin_wasm_memory_size(0) * 65536u;
#else  /* native test builds: the arena is the harness's own allocation */
  const uint64_t need = layout(m, 0, 0), mem = UINT64_MAX;
#endif
  if (((uintptr_t)arena & 63u) || need > size || (uint64_t)(uintptr_t)arena + need > mem) return AE_ERR_NO_MEMORY;
  layout(m, (uintptr_t)arena, 0);
  m->n_past = 0;
  m->decode_bytes = decode_bytes(m);
  m->initialised = 1;
  return AE_OK;
}

/* Decode on one thread below this many weight bytes per token (ae_model.decode_bytes; 0: never). @return the
 * model's decode_bytes */
AE_EXPORT double ae_model_set_single_below(ae_model *m, double bytes) {
  m->single_below = bytes > 0 ? (uint64_t)bytes : 0;
  return (double)m->decode_bytes;
}

/* Pointer to the logits (row `row` when logits_all). */
AE_EXPORT float *ae_model_logits(ae_model *m) { return m->logits; }

/* The host changed the logits (the sampler's penalty and bias write them): the chunk summaries no longer hold. */
AE_EXPORT void ae_model_logits_changed(ae_model *m) { m->out_nparts = 0; }

/* Greedy pick over the first n logits: ae_argmax's answer (the first index of the maximum), from the output head's
 * chunk summaries when they hold (every logit finite, n the whole vocabulary; chunks in row order, so the first chunk
 * with the largest maximum holds the first index of it), else from the logits. */
AE_EXPORT int ae_model_greedy(const ae_model *m, int n) {
  const int np = m->out_nparts;
  if (np <= 0 || n != m->cfg.vocab) return ae_argmax(m->logits, n);
  const struct ae_out_part *p = m->out_part;
  int best = 0;
  for (int i = 0; i < np; i++) {
    if (p[i].bad) return ae_argmax(m->logits, n);
    if (p[i].max > p[best].max) best = i;
  }
  return p[best].idx;
}
/* Start of the KV cache (all layers). */
AE_EXPORT uint8_t *ae_model_kv(ae_model *m) { return m->kv; }
