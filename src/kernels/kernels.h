/* Aether kernel API: dtypes (ggml block layouts, so GGUF tensors load without requantising), the
 * traits table, and every compute kernel the forward pass uses.
 *
 * Each kernel `ae_X` has a scalar reference `ae_X_ref` (src/kernels/ref/, the specification) and a
 * SIMD128 version `ae_X_simd128` (src/kernels/simd128/); `ae_X` is the one the model calls (the SIMD
 * version). Tolerances of SIMD vs reference per dtype: tests/helpers/tolerances.mjs (one place).
 * Pointers are byte offsets into linear memory; nothing here allocates. */
#ifndef AE_KERNELS_H
#define AE_KERNELS_H
#include "core/common.h"

typedef uint16_t ae_fp16;

/* dtype ids are ggml's (GGUF tensor types), one enum entry per row of src/kernels/dtypes.inc. */
typedef enum {
#define AE_DTYPE(ID, name, id, ...) AE_##ID = id,
#include "kernels/dtypes.inc"
} ae_type;
/* One more than the largest dtype id (size of tables indexed by ae_type). */
union ae_type_count_ {
#define AE_DTYPE(ID, name, id, ...) char ID[id + 1];
#include "kernels/dtypes.inc"
};
#define AE_TYPE_COUNT ((int)sizeof(union ae_type_count_))

/* Block layouts (ggml's). f32 / f16 are one element per block. */
typedef float ae_block_f32;
typedef ae_fp16 ae_block_f16;

#define AE_QK4_0 32
typedef struct { ae_fp16 d; uint8_t qs[AE_QK4_0 / 2]; } ae_block_q4_0;  /* x[i] = (q - 8) * d; low nibbles = 0..15, high = 16..31 */
typedef struct { ae_fp16 d; uint8_t qs[16]; } ae_block_iq4_nl;  /* x[i] = d * AE_IQ4NL_VALUES[q] (a non-linear 4-bit code), nibbles as q4_0's */
static_assert(sizeof(ae_block_iq4_nl) == 18, "iq4_nl block");
extern const int8_t AE_IQ4NL_VALUES[16];   /* ggml's kvalues_iq4nl (src/kernels/ref/iq4_nl_ref.c) */
typedef struct {
  ae_fp16 d;            /* super-block scale */
  uint16_t scales_h;    /* the high 2 bits of the 8 sub-block scales (bits 2 ib, 2 ib + 1) */
  uint8_t scales_l[4];  /* their low 4 bits (sub-block ib: scales_l[ib / 2], the high nibble for odd ib) */
  uint8_t qs[128];      /* iq4_nl's codes, 16 bytes per sub-block of 32 (nibbles as q4_0's) */
} ae_block_iq4_xs;      /* x = (d * (ls - 32)) * AE_IQ4NL_VALUES[code] */
static_assert(sizeof(ae_block_iq4_xs) == 136, "iq4_xs block");
static_assert(sizeof(ae_block_q4_0) == 18, "q4_0 block");

#define AE_QK8_0 32
typedef struct { ae_fp16 d; int8_t qs[AE_QK8_0]; } ae_block_q8_0;       /* x[i] = q[i] * d */
static_assert(sizeof(ae_block_q8_0) == 34, "q8_0 block");

/* Legacy 32-element blocks with 5-bit quants or a min (ggml block_q4_1 / q5_0 / q5_1) and q8_1, the
 * activation dtype of q4_1 / q5_1 (q8_0 plus s = d * sum(qs) as f16). Element j < 16 is the low nibble of
 * qs[j], element j + 16 the high nibble; the 5th bit of element e is bit e of qh (a little-endian u32). */
#define AE_QK4_1 32
typedef struct { ae_fp16 d; ae_fp16 m; uint8_t qs[AE_QK4_1 / 2]; } ae_block_q4_1;             /* x = q * d + m */
static_assert(sizeof(ae_block_q4_1) == 20, "q4_1 block");
#define AE_QK5_0 32
typedef struct { ae_fp16 d; uint8_t qh[4]; uint8_t qs[AE_QK5_0 / 2]; } ae_block_q5_0;         /* x = (q - 16) * d */
static_assert(sizeof(ae_block_q5_0) == 22, "q5_0 block");
#define AE_QK5_1 32
typedef struct { ae_fp16 d; ae_fp16 m; uint8_t qh[4]; uint8_t qs[AE_QK5_1 / 2]; } ae_block_q5_1;  /* x = q * d + m */
static_assert(sizeof(ae_block_q5_1) == 24, "q5_1 block");
#define AE_QK8_1 32
typedef struct { ae_fp16 d; ae_fp16 s; int8_t qs[AE_QK8_1]; } ae_block_q8_1;                /* x = q * d; s = fp16(d * sum q) */
static_assert(sizeof(ae_block_q8_1) == 36, "q8_1 block");

/* bfloat16: the top 16 bits of an f32 (ggml GGML_TYPE_BF16). */
typedef uint16_t ae_block_bf16;

#define AE_QK_K 256
#define AE_K_SCALE_SIZE 12
typedef struct {
  uint8_t scales[AE_QK_K / 16]; /* sub-block s (16 elements): its 4-bit scale in the low nibble, its 4-bit min above */
  uint8_t qs[AE_QK_K / 4];      /* 2-bit quants: element 128 n + 32 j + l (n < 2, j < 4, l < 32) in bits 2 j, 2 j + 1 of
                                   qs[32 n + l] (q3_K's low-bit plane) */
  ae_fp16 d;                    /* super-block scale of the scales */
  ae_fp16 dmin;                 /* super-block scale of the mins */
} ae_block_q2_K;                /* x = (d * sc_s) * q - dmin * m_s */
static_assert(sizeof(ae_block_q2_K) == 84, "q2_K block");
typedef struct {
  uint8_t hmask[AE_QK_K / 8];   /* 3rd bit: element 128 n + 32 j + l (n < 2, j < 4, l < 32) has it in bit 4 n + j of hmask[l] */
  uint8_t qs[AE_QK_K / 4];      /* low 2 bits: the same element in bits 2 j, 2 j + 1 of qs[32 n + l] */
  uint8_t scales[12];           /* 16 6-bit sub-block scales (offset 32): scale s has its low 4 bits in scales[s % 8]
                                   (high nibble for s >= 8) and its high 2 in scales[8 + s % 4] >> 2 (s / 4) */
  ae_fp16 d;                    /* super-block scale */
} ae_block_q3_K;
static_assert(sizeof(ae_block_q3_K) == 110, "q3_K block");

typedef struct {
  ae_fp16 d;                        /* super-block scale for the 6-bit scales */
  ae_fp16 dmin;                     /* super-block scale for the 6-bit mins */
  uint8_t scales[AE_K_SCALE_SIZE];  /* 8 scales + 8 mins, 6 bits each (ggml packing) */
  uint8_t qs[AE_QK_K / 2];          /* 4-bit quants */
} ae_block_q4_K;
static_assert(sizeof(ae_block_q4_K) == 144, "q4_K block");

typedef struct {
  ae_fp16 d;                        /* super-block scale for the 6-bit scales */
  ae_fp16 dmin;                     /* super-block scale for the 6-bit mins */
  uint8_t scales[AE_K_SCALE_SIZE];  /* 8 scales + 8 mins, 6 bits each (packed as q4_K's) */
  uint8_t qh[AE_QK_K / 8];          /* 5th bit: element 32 j + l has it in bit j of qh[l] */
  uint8_t qs[AE_QK_K / 2];          /* low 4 bits (laid out as q4_K's) */
} ae_block_q5_K;
static_assert(sizeof(ae_block_q5_K) == 176, "q5_K block");

typedef struct {
  uint8_t ql[AE_QK_K / 2];      /* low 4 bits */
  uint8_t qh[AE_QK_K / 4];      /* high 2 bits */
  int8_t scales[AE_QK_K / 16];  /* 8-bit scales of 16-element sub-blocks */
  ae_fp16 d;                    /* super-block scale */
} ae_block_q6_K;
static_assert(sizeof(ae_block_q6_K) == 210, "q6_K block");

typedef struct {
  float d;                       /* delta */
  int8_t qs[AE_QK_K];            /* quants */
  int16_t bsums[AE_QK_K / 16];   /* sums of quants in groups of 16 */
} ae_block_q8_K;
static_assert(sizeof(ae_block_q8_K) == 292, "q8_K block");

/* y[0..n) = dequantised x (n a multiple of blck_size). */
typedef void (*ae_to_float_fn)(const void *x, float *y, int n);
/* Quantise n floats x into blocks y (n a multiple of blck_size). */
typedef void (*ae_from_float_fn)(const float *x, void *y, int n);
/* *s = dot(w[0..n), x[0..n)) where w has the row's dtype and x is in vec_dot_type. */
typedef void (*ae_vec_dot_fn)(int n, float *s, const void *w, const void *x);
/* y[r] = dot(W[r], xq) for r in [r0, r1) (rows of ncols elements; see ae_matvec). */
typedef void (*ae_matvec_rows_fn)(const void *W, int ncols, const void *xq, float *y, int r0, int r1);
/* Batched rows (see ae_matmul): y[b * y_stride + r] = dot(W[r], xq + b * xq_stride), equal to the row
 * kernel per vector bit for bit. */
typedef void (*ae_matmul_rows_fn)(const void *W, int ncols, const void *xq, size_t xq_stride, int nvec,
                                  float *y, int y_stride, int r0, int r1);

/* One row of src/kernels/dtypes.inc with the kernels of one implementation (SIMD128 or reference). */
typedef struct {
  const char *name;
  int blck_size;            /* elements per block */
  int type_size;            /* bytes per block */
  ae_type vec_dot_type;     /* dtype the activation row is converted to once per row */
  int is_weight;            /* 1: a tensor may have this dtype (vec_dot set); 0: activations only */
  int scale_off[2];         /* byte offsets of the f16 block scales, -1 = none */
  ae_to_float_fn to_float;
  ae_from_float_fn from_float;
  ae_vec_dot_fn vec_dot;    /* NULL for activation-only dtypes */
  ae_matvec_rows_fn matvec; /* SIMD table only (the reference matvec loops vec_dot) */
  ae_matmul_rows_fn matmul; /* SIMD table, optional: NULL = the row kernel over row chunks */
} ae_type_traits;

/* Traits with SIMD128 kernels; NULL for an unknown type. */
const ae_type_traits *ae_traits(ae_type t);
/* Traits with scalar reference kernels. */
const ae_type_traits *ae_traits_ref(ae_type t);
/* Bytes of one row of n elements (n a multiple of the block size), 0 for an unknown type. */
size_t ae_row_size(ae_type t, int n);
/* Whether t is a dtype a weight tensor may have (known, not activations-only). */
int ae_is_weight_type(int t);
/* Whether t is the (non-f32) activation dtype of some weight dtype: the model keeps a buffer for it. */
int ae_is_act_type(int t);

float ae_fp16_to_fp32(ae_fp16 h);
ae_fp16 ae_fp32_to_fp16(float f);   /* round to nearest even, like ggml / numpy */

/* ---- matrix-vector ------------------------------------------------------------------------------
 * W: rows of `ncols` elements of dtype t, row r at W + r * ae_row_size(t, ncols).
 * xq: the activation converted with ae_traits(t)->vec_dot_type's from_float (use ae_quantize_row).
 * y[r] = dot(W[r], x) for r in [r0, r1). */
void ae_matvec(ae_type t, const void *W, int ncols, const void *xq, float *y, int r0, int r1);
void ae_matvec_ref(ae_type t, const void *W, int ncols, const void *xq, float *y, int r0, int r1);
/* Batched: nvec activations, xq + b * xq_stride bytes, y[b * y_stride + r]. Rows outer, vectors inner
 * (a weight row is reused from cache). Results equal ae_matvec per vector bit for bit. */
void ae_matmul(ae_type t, const void *W, int ncols, const void *xq, size_t xq_stride, int nvec,
               float *y, int y_stride, int r0, int r1);
/* Convert one activation row x[0..n) into the vec_dot_type of weights of dtype t; y needs
 * ae_row_size(vec_dot_type, n) bytes. Returns the vec_dot_type. */
ae_type ae_quantize_row(ae_type t, const float *x, void *y, int n);
ae_type ae_quantize_row_ref(ae_type t, const float *x, void *y, int n);

/* ---- element-wise and row ops ------------------------------------------------------------------ */
/* y = x / sqrt(mean(x^2) + eps) * w   (y may equal x) */
void ae_rmsnorm(float *y, const float *x, const float *w, int n, float eps);
void ae_rmsnorm_ref(float *y, const float *x, const float *w, int n, float eps);
/* cs[2i] = cos(pos * theta^(-2i/rot_dim)), cs[2i+1] = sin(...), i in [0, rot_dim/2). Computed in f32
 * as PyTorch does (freq = 1 / theta^(2i/rot_dim), angle = pos * freq). Scalar only. */
void ae_rope_cos_sin(float *cs, int pos, int rot_dim, float theta_base);
/* Rotate the first rot_dim dims of each of n_heads heads (head h at x + h * head_dim).
 * neox = 0: adjacent pairs (x[2i], x[2i+1]) (GGUF llama / ggml NORM); neox = 1: halves
 * (x[i], x[i + rot_dim/2]) (NEOX / HF rotate_half). */
void ae_rope(float *x, int n_heads, int head_dim, int rot_dim, const float *cs, int neox);
void ae_rope_ref(float *x, int n_heads, int head_dim, int rot_dim, const float *cs, int neox);
/* In-place softmax of x[0..n) (max-subtracted). */
void ae_softmax(float *x, int n);
void ae_softmax_ref(float *x, int n);
/* g[i] = silu(g[i]) * u[i], silu(v) = v / (1 + exp(-v)). */
void ae_silu_mul(float *g, const float *u, int n);
void ae_silu_mul_ref(float *g, const float *u, int n);
/* x[i] = gelu(x[i]) (tanh approximation). */
void ae_gelu(float *x, int n);
void ae_gelu_ref(float *x, int n);
/* g[i] = gelu(g[i]) * u[i] (GeGLU: Gemma's FFN, tanh-approximated gelu on the gate). */
void ae_gelu_mul(float *g, const float *u, int n);
void ae_gelu_mul_ref(float *g, const float *u, int n);
/* x[i] = cap * tanh(x[i] / cap) (Gemma 2 attention / final-logit soft-capping); cap > 0. */
void ae_softcap(float *x, int n, float cap);
void ae_softcap_ref(float *x, int n, float cap);
/* y[i] += x[i] */
void ae_add(float *y, const float *x, int n);
void ae_add_ref(float *y, const float *x, int n);

/* ---- attention ----------------------------------------------------------------------------------
 * One query head over n_kv cached positions: out = softmax(cap(scale * q.K^T)) . V
 * k: K of position t at k + t * kv_stride (floats), head_dim values; same for v.
 * softcap > 0: scores become softcap * tanh(score / softcap) before the softmax (ae_softcap); 0: none.
 * att: scratch of n_kv floats (host-allocated). */
void ae_attention(float *out, const float *q, const float *k, const float *v, int n_kv, int head_dim,
                  int kv_stride, float scale, float softcap, float *att);
void ae_attention_ref(float *out, const float *q, const float *k, const float *v, int n_kv, int head_dim,
                      int kv_stride, float scale, float softcap, float *att);

/* ---- attention over a typed KV cache (the forward pass; docs/DESIGN.md "KV cache") -----------------------
 * A run of the cache of one KV head: n positions whose K rows (dtype kt) and V rows (dtype vt) are contiguous,
 * row t at k + t * ae_row_size(kt, head_dim) (same for v). A head's cache may be several runs of different
 * dtypes (mixed-precision policies): the scores of all runs are softmaxed together, then each run adds its
 * share of V, in position order.
 *   kt: any weight dtype (its rows are dotted with q converted to kt's vec_dot_type: ggml's mul_mat, llama.cpp's
 *       cache_type_k semantics); vt: a dtype with ae_attn_accum (f32, f16, q8_0, q4_0, see
 *       ae_attn_accum_supported). A head's row holds head_dim values padded with zeros to a whole number of
 *       blocks (ae_kv_row_size; e.g. head_dim 48 in q8_0: 2 blocks, the last half zeros). */
typedef struct {
  const void *k, *v;   /* first row of the run */
  int32_t kt, vt;      /* ae_type of K and V */
  int32_t n;           /* positions in the run */
} ae_kv_run;

/* Bytes of one head's row of the cache: head_dim values rounded up to t's block size. */
size_t ae_kv_row_size(ae_type t, int head_dim);
/* head_dim rounded up to the largest block size (sizes of the qbuf scratch below). */
#define AE_KV_PAD(hd) (((hd) + 255) & ~255)

/* out[d] = out[d] + att[t] * V_t[d] for t in [0, n) in t order (q8_0 / q4_0: (att[t] * scale_t) * q), d < head_dim.
 * SIMD equals the reference bit for bit, and splitting the run gives the same bits. */
typedef void (*ae_attn_accum_fn)(const void *v, int n, int head_dim, const float *att, float *out);
int ae_attn_accum_supported(int t);
void ae_attn_accum(ae_type t, const void *v, int n, int head_dim, const float *att, float *out);
void ae_attn_accum_ref(ae_type t, const void *v, int n, int head_dim, const float *att, float *out);
#define AE_DECL_ACCUM(T) void ae_attn_accum_##T##_simd128(const void *v, int n, int head_dim, const float *att, float *out);
AE_DECL_ACCUM(f32) AE_DECL_ACCUM(f16) AE_DECL_ACCUM(q8_0) AE_DECL_ACCUM(q4_0)
#undef AE_DECL_ACCUM

/* ng query heads sharing one KV head (GQA; query j at q + j * q_stride floats) over the runs run[0..nrun):
 * s_j = scale * (K q_j) (K rows read once for the ng heads), soft-capped when softcap > 0, att_j = softmax(s_j),
 * out_j = att_j . V (out + j * out_stride floats). Scratch: att ng rows of att_stride >= sum of n floats;
 * qbuf (ng + 1) * AE_KV_PAD(head_dim) * 4 bytes (q in K's vec_dot_type, and a padded copy). The _ref version
 * uses the scalar reference kernels throughout. */
void ae_attention_kv(float *out, int out_stride, const float *q, int q_stride, int ng, const ae_kv_run *run, int nrun,
                     int head_dim, float scale, float softcap, float *att, int att_stride, void *qbuf);
void ae_attention_kv_ref(float *out, int out_stride, const float *q, int q_stride, int ng, const ae_kv_run *run, int nrun,
                         int head_dim, float scale, float softcap, float *att, int att_stride, void *qbuf);
/* Prefill: nq query tokens of one KV head group at once (each K row is read and scored for the nq * ng query rows
 * in one pass, each V row accumulated for 4 rows at a time). Token b's head j is at q + b * q_tok + j * q_stride
 * floats, its output at out + b * out_tok + j * out_stride; token b attends to the positions [lo[b], hi[b]) of the
 * runs taken together (index 0 = the first position of run[0]): causal masks and windows. Equal bit for bit to
 * ae_attention_kv per token on the runs clipped to its [lo, hi) (the _ref version does exactly that with the
 * reference kernels). Scratch: att nq * ng rows of att_stride floats (row b * ng + j ends up holding token b's
 * softmaxed scores from position lo[b] on, as ae_attention_kv leaves them), qbuf (nq * ng + 1) *
 * AE_KV_PAD(head_dim) * 4 bytes. */
#define AE_ATTN_MULTI_ROWS 4
void ae_attention_kv_multi(float *out, int out_stride, int out_tok, const float *q, int q_stride, int q_tok, int ng, int nq,
                           const int *lo, const int *hi, const ae_kv_run *run, int nrun, int head_dim, float scale,
                           float softcap, float *att, int att_stride, void *qbuf);
void ae_attention_kv_multi_ref(float *out, int out_stride, int out_tok, const float *q, int q_stride, int q_tok, int ng,
                               int nq, const int *lo, const int *hi, const ae_kv_run *run, int nrun, int head_dim,
                               float scale, float softcap, float *att, int att_stride, void *qbuf);
/* Whether dtypes (kt, vt) can hold a KV cache of heads of head_dim values (ae_attention_kv's conditions). */
int ae_kv_types_ok(int kt, int vt, int head_dim);

/* ---- embeddings and sampling helpers -------------------------------------------------------------- */
/* y[0..ncols) = row `row` of W (dtype t) as floats. */
void ae_get_row(ae_type t, const void *W, int row, int ncols, float *y);
/* Index of the largest x (lowest index on ties). */
int ae_argmax(const float *x, int n);
int ae_argmax_ref(const float *x, int n);

/* ---- scalar math ----------------------------------------------------------------------------------
 * These modules link no libm (-nostdlib), so references and scalar code use these: evaluated in double
 * precision and rounded once to float (correctly rounded except in rare near-halfway cases).
 * ae_sinf/ae_cosf reduce by pi/2 exactly enough for |x| < 2^26 (ample for RoPE angles). */
float ae_expf(float x);
float ae_logf(float x);
float ae_tanhf(float x);
float ae_powf(float b, float e);
float ae_sinf(float x);
float ae_cosf(float x);

/* ---- per-dtype implementations behind the traits tables (not for direct use by the model) -------
 * ref: src/kernels/ref/, simd128: src/kernels/simd128/. Row kernels compute y[r] for r in [r0, r1)
 * with per-row arithmetic independent of r0, r1 and of the row grouping (1 vs N threads bit-exact). */
#define AE_DT_DECL_A(T)                                                                          \
  void ae_to_float_##T##_ref(const void *x, float *y, int n);                                    \
  void ae_from_float_##T##_ref(const float *x, void *y, int n);                                  \
  void ae_to_float_##T##_simd128(const void *x, float *y, int n);                                \
  void ae_from_float_##T##_simd128(const float *x, void *y, int n);
#define AE_DT_DECL_W(T)                                                                          \
  AE_DT_DECL_A(T)                                                                                \
  void ae_vec_dot_##T##_ref(int n, float *s, const void *w, const void *x);                     \
  void ae_vec_dot_##T##_simd128(int n, float *s, const void *w, const void *x);                 \
  void ae_matvec_rows_##T##_simd128(const void *W, int ncols, const void *xq, float *y, int r0, int r1);
#define AE_DT_DECL_WM(T)                                                                         \
  AE_DT_DECL_W(T)                                                                                \
  void ae_matmul_rows_##T##_simd128(const void *W, int ncols, const void *xq, size_t xq_stride, int nvec, \
                                    float *y, int y_stride, int r0, int r1);
#define AE_DTYPE(ID, name, id, blck, bytes, act, kind, s0, s1) AE_DT_DECL_##kind(name)
#include "kernels/dtypes.inc"
#undef AE_DT_DECL_A
#undef AE_DT_DECL_W
#undef AE_DT_DECL_WM

/* ---- load-time repacked weights (docs/DESIGN.md "Repacked weights") -----------------------------------
 * AE_Q4_0_R4 is not a file dtype (not in dtypes.inc, never in a file): the in-memory layout a q4_0 matrix gets at
 * load (ae_model_repack_tensor), rows in groups of 4. Group g (rows 4g..4g+3) takes the bytes of those 4 rows
 * (4 * row_size), as nb records of 72 B, one per block column b: the 4 rows' f16 scales (8 B), then 4 x 16 B where
 * 16 B chunk j holds, for row k at bytes 4k..4k+3, elements 8j+i (low nibble of byte i) and 8j+4+i (high nibble),
 * i < 4. One record = the 4 rows' block b, so a group streams as ONE sequential run, and with the activation's
 * 4 bytes x[8j+i] splatted, i16x8.relaxed_dot (or i32x4.dot_i16x8) gives the 4 rows' sums in the lanes with no
 * transposition. Only matrices with rows % 4 == 0 are repacked (all rows in groups). Traits: q4_0's sizes and
 * vec_dot_type, matvec / matmul kernels of this layout, no vec_dot / to_float (row access through
 * ae_unpack_q4_0_r4). Results equal the q4_0 kernels' on the unpacked rows bit for bit. */
#define AE_Q4_0_R4 ((ae_type)256)   /* above every ggml id: in no table indexed by a file dtype */
#define AE_R4_REC 72
/* In place: rows [0, nrows) (nrows % 4 == 0) of a q4_0 matrix into the R4 layout; tmp: 4 * row_size bytes.
 * Returns 0, or 1 (nothing changed) when a block scale is inf / nan: the R4 kernels convert scales with the fast
 * path only (exact for finite halves), so such a matrix stays q4_0 (whose kernels handle them). */
int ae_repack_q4_0_r4(void *W, int nrows, int ncols, void *tmp);       /* SIMD128 */
int ae_repack_q4_0_r4_ref(void *W, int nrows, int ncols, void *tmp);   /* the same bytes, scalar (the specification) */
/* The inverse (tests, tools): R4 matrix -> plain q4_0 rows, in place; tmp: 4 * row_size bytes. */
void ae_unpack_q4_0_r4(void *W, int nrows, int ncols, void *tmp);
/* Reference: rows [r0, r1) of an R4 matrix, the q4_0 reference's operation sequence (ae_vec_dot_q4_0_ref). */
void ae_matvec_q4_0_r4_ref(const void *W, int ncols, const void *xq, float *y, int r0, int r1);
void ae_matvec_rows_q4_0_r4_simd128(const void *W, int ncols, const void *xq, float *y, int r0, int r1);
void ae_matmul_rows_q4_0_r4_simd128(const void *W, int ncols, const void *xq, size_t xq_stride, int nvec,
                                    float *y, int y_stride, int r0, int r1);

/* Which form the relaxed build's kernels take where they have two (docs/DESIGN.md "Relaxed SIMD", fused dot); a mask.
 * AE_FUSED_TILES (the R4 q4_0 / q4_K / q5_K / q6_K and the file-layout q8_0 prefill GEMMs, the q5_1 X8 matvec, the R4
 * q4_0 / q5_0 / q5_1 / q4_K / q5_K / q6_K and the iq4_nl / iq4_xs decode matvecs): 0 the i16 relaxed dot (ae_rdot16: one pmaddubsw on x64) with i16 adds (and the k-quants' scales by
 * i32x4.dot_i16x8_s), 1 the i32 relaxed dot (ae_rdot) as the accumulation itself (the k-quants' scales by an i32
 * multiply per sub-block).
 * AE_FUSED_R8 (the AE_Q8_0_R4 matvec and GEMM): 0 ae_rdot_w (the i16 relaxed dot widened by i32x4.dot_i16x8_s against
 * ones in a register: 3 instructions on x64), 1 ae_rdot (one vpdpbusd where the host has AVX-VNNI, 5 instructions in
 * V8 11 / 14 without it). The forms give the same bits; only their speed differs by host, so the host times both
 * (ae_probe_fused_dot, per bit) and picks. A global in the shared memory: every thread's instance sees one value. The
 * plain build has no fused form: ae_set_fused_dot returns 0 there. */
#define AE_FUSED_TILES 1
#define AE_FUSED_R8 2
extern int ae_fused_dot;
int ae_set_fused_dot(int mask);               /* returns the mask now in effect */
/* times the kind's kernel (AE_FUSED_TILES: reps q4_0 R4 GEMMs, AE_FUSED_R8: reps q8_0 R4 GEMMs; 8 rows x 512 cols x 8
 * tokens, static zero data) with that bit of the mask set to `on`; the mask is restored after */
int ae_probe_fused_dot(int kind, int on, int reps);

/* AE_Q5_0_X8 is the in-memory layout a q5_0 matrix gets at load (ae_model_repack_tensor), block by block in place:
 * the same 22 bytes (ae_block_q5_0's size), the f16 scale d first, then T[4] and A[16] in place of qh and qs. With
 * q_e the block's 5-bit values (element e = q_e - 16):
 *   A[p] = ((q_p << 3) ^ 0x80) | (q_{p+16} & 7)                              p < 16
 *   T[p & 3] bit 6 - 2 (p >> 2) = bit 3 of q_{p+16}, bit 7 - 2 (p >> 2) = NOT bit 4 of q_{p+16}
 * so the SIMD kernels get 8 (q - 16) of all 32 elements as bytes in 8 operations (q32_simd128.h ae_q5_0_x8_load)
 * where the file layout takes 17. Every q5_0 matrix is repacked (any shape, any scale: the kernels handle inf / nan
 * scales as the q5_0 ones do). Traits: q5_0's sizes and activation dtype, matvec / matmul of this layout, no
 * vec_dot / to_float (row access through ae_unpack_q5_0_x8). Results equal the q5_0 kernels' bit for bit. */
#define AE_Q5_0_X8 ((ae_type)257)
void ae_repack_q5_0_x8(void *W, size_t nblocks);       /* SIMD128 */
void ae_repack_q5_0_x8_ref(void *W, size_t nblocks);   /* the same bytes, scalar (the specification) */
void ae_unpack_q5_0_x8(void *W, size_t nblocks);       /* the inverse (tests, tools) */
/* Reference: rows [r0, r1) of an X8 matrix, the q5_0 reference's operation sequence (ae_vec_dot_q5_0_ref). */
void ae_matvec_q5_0_x8_ref(const void *W, int ncols, const void *xq, float *y, int r0, int r1);
void ae_matvec_rows_q5_0_x8_simd128(const void *W, int ncols, const void *xq, float *y, int r0, int r1);
void ae_matmul_rows_q5_0_x8_simd128(const void *W, int ncols, const void *xq, size_t xq_stride, int nvec,
                                    float *y, int y_stride, int r0, int r1);

/* AE_Q5_0_R4: the relaxed build's load-time layout of a q5_0 matrix (the plain build keeps AE_Q5_0_X8), rows in groups of
 * 4 as AE_Q4_0_R4: per block column one 88-byte record (4 x 22 B, in place): the 4 rows' f16 scales (8 B), 4 chunks of
 * 16 B with the low 4 bits of the 5-bit values q laid out as AE_Q4_0_R4's nibbles, then 16 B of 5th bits (byte
 * 4k + i, bit 2j / 2j + 1 = bit 4 of q of row k's element 8j + i / 8j + 4 + i; a u16 shift and one mask put it at
 * bit 4 of the chunk's bytes). The 5-bit values are the relaxed dot's 7-bit operand: sum(q x) - 16 sum(x) exact and
 * host-independent, the 4 rows in the lanes as the R4 q4_0 kernels. Only matrices with rows % 4 == 0 and finite
 * scales (the others get AE_Q5_0_X8). Results equal the q5_0 kernels' bit for bit. */
#define AE_Q5_0_R4 ((ae_type)259)
#define AE_R45_REC 88
int ae_repack_q5_0_r4(void *W, int nrows, int ncols, void *tmp);       /* SIMD128 */
int ae_repack_q5_0_r4_ref(void *W, int nrows, int ncols, void *tmp);   /* the same bytes, scalar (the specification) */
void ae_unpack_q5_0_r4(void *W, int nrows, int ncols, void *tmp);      /* the inverse (tests, tools) */
void ae_matvec_q5_0_r4_ref(const void *W, int ncols, const void *xq, float *y, int r0, int r1);
void ae_matvec_rows_q5_0_r4_simd128(const void *W, int ncols, const void *xq, float *y, int r0, int r1);
void ae_matmul_rows_q5_0_r4_simd128(const void *W, int ncols, const void *xq, size_t xq_stride, int nvec,
                                    float *y, int y_stride, int r0, int r1);

/* AE_Q5_1_R4: the same for q5_1 in the relaxed build (the plain one keeps AE_Q5_1_X8): 96-byte records (4 x 24 B): the
 * 4 rows' d (8 B), their m (8 B), the 4 chunks at 16, the 5th bits at 80. Its kernels sum q x (no offset) and take
 * the reference's (d_w d_x) (float)sumi + m_w s_x per row lane. Rows % 4 == 0, finite d and m. */
#define AE_Q5_1_R4 ((ae_type)260)
#define AE_R451_REC 96
int ae_repack_q5_1_r4(void *W, int nrows, int ncols, void *tmp);
int ae_repack_q5_1_r4_ref(void *W, int nrows, int ncols, void *tmp);
void ae_unpack_q5_1_r4(void *W, int nrows, int ncols, void *tmp);
void ae_matvec_q5_1_r4_ref(const void *W, int ncols, const void *xq, float *y, int r0, int r1);
void ae_matvec_rows_q5_1_r4_simd128(const void *W, int ncols, const void *xq, float *y, int r0, int r1);
void ae_matmul_rows_q5_1_r4_simd128(const void *W, int ncols, const void *xq, size_t xq_stride, int nvec,
                                    float *y, int y_stride, int r0, int r1);

/* AE_Q8_0_R4: the relaxed build's load-time layout of a q8_0 matrix (the plain build keeps q8_0), rows in groups of 4 as
 * AE_Q4_0_R4: per block column one 136-byte record (4 x 34 B, in place): the 4 rows' f16 scales (8 B), then chunks
 * j < 8 of 16 B, row k's elements 4j..4j+3 at bytes 4k..4k+3. With the activation's 4 bytes of chunk j splatted, one
 * i32 relaxed dot gives the 4 rows' partial sums in the lanes: the activation's sign moves onto the weights (w ^ m, m =
 * 0xff where x < 0, is -w - 1), sum(w x) = sum((w ^ m) |x|) + sum(|x| over x < 0), |x| <= 127 (the q8_0 quantiser's
 * range) the 7-bit operand: exact and host-independent for any weight byte. Rows % 4 == 0 and finite scales only.
 * Results equal the q8_0 kernels' on the unpacked rows bit for bit. */
#define AE_Q8_0_R4 ((ae_type)261)
#define AE_R8_REC 136
int ae_repack_q8_0_r4(void *W, int nrows, int ncols, void *tmp);       /* SIMD128 */
int ae_repack_q8_0_r4_ref(void *W, int nrows, int ncols, void *tmp);   /* the same bytes, scalar (the specification) */
void ae_unpack_q8_0_r4(void *W, int nrows, int ncols, void *tmp);      /* the inverse (tests, tools) */
/* One row as floats (get_rows of a repacked token embedding), each block converted by to_float (q8_0's). */
void ae_get_row_q8_0_r4(const void *W, int row, int ncols, float *y, void (*to_float)(const void *, float *, int));
void ae_matvec_q8_0_r4_ref(const void *W, int ncols, const void *xq, float *y, int r0, int r1);
void ae_matvec_rows_q8_0_r4_simd128(const void *W, int ncols, const void *xq, float *y, int r0, int r1);
void ae_matmul_rows_q8_0_r4_simd128(const void *W, int ncols, const void *xq, size_t xq_stride, int nvec,
                                    float *y, int y_stride, int r0, int r1);
/* iq4_nl's prefill on the q8_0 R4 tiles (the relaxed build; dot_q8_0_r4_simd128.c): rows [rc, re), re - rc a multiple of 4
 * and at most 64, every block scale finite, nvec >= 2; bit for bit ae_matvec_rows_iq4_nl_simd128 per token. */
void ae_matmul_rows_iq4_nl_r8(const void *W, int ncols, const void *xq, size_t xq_stride, int nvec, float *y, int y_stride,
                              int rc, int re);
/* iq4_xs's the same way (its sub-block scales in the tile's i16 dot): rows [rc, re), re - rc a multiple of 4 and at most 32,
 * nvec >= 2, any scales; bit for bit ae_matvec_rows_iq4_xs_simd128 per token. */
void ae_matmul_rows_iq4_xs_r8(const void *W, int ncols, const void *xq, size_t xq_stride, int nvec, float *y, int y_stride,
                              int rc, int re);

/* AE_Q4_K_R4: the relaxed build's load-time layout of a q4_K matrix (the plain build keeps q4_K), rows in groups of 4:
 * per super-block column one 576-byte record (4 x 144 B, in place): the 4 rows' d (8 B) and dmin (8 B), their 6-bit
 * scales and mins re-packed for a SIMD decode (48 B: repack_ref.c), then 32 chunks of 16 B, 4 per sub-block j, laid out
 * within the sub-block as AE_Q4_0_R4's chunks (row k's bytes 4k..4k+3: elements 8c + i low, 8c + 4 + i high nibble).
 * The nibbles are the 7-bit operand of i16x8.relaxed_dot against the splatted activation bytes: the 4 rows'
 * sub-block sums in the lanes, scaled per row with one i32x4.dot_i16x8_s. Rows % 4 == 0 and finite d / dmin only.
 * Results equal the q4_K kernels' on the unpacked rows bit for bit. */
#define AE_Q4_K_R4 ((ae_type)262)
#define AE_RK4_REC 576
int ae_repack_q4_K_r4(void *W, int nrows, int ncols, void *tmp);       /* SIMD128 */
int ae_repack_q4_K_r4_ref(void *W, int nrows, int ncols, void *tmp);   /* the same bytes, scalar (the specification) */
void ae_unpack_q4_K_r4(void *W, int nrows, int ncols, void *tmp);      /* the inverse (tests, tools) */
void ae_matvec_q4_K_r4_ref(const void *W, int ncols, const void *xq, float *y, int r0, int r1);
void ae_matvec_rows_q4_K_r4_simd128(const void *W, int ncols, const void *xq, float *y, int r0, int r1);
void ae_matmul_rows_q4_K_r4_simd128(const void *W, int ncols, const void *xq, size_t xq_stride, int nvec,
                                    float *y, int y_stride, int r0, int r1);

/* AE_Q5_1_X8: the same for q5_1 (Q5_K_M files fall back to it for rows not a multiple of 256 long), in place: d and
 * m first, then T[4] and A[16] from the 5-bit values q (element = q d + m) as in AE_Q5_0_X8. Its kernels get the
 * bytes 8 (q - 16) and add 16 sum(x) (the activation block's integer sum) back to the integer sums: exact. */
#define AE_Q5_1_X8 ((ae_type)258)
void ae_repack_q5_1_x8(void *W, size_t nblocks);       /* SIMD128 */
void ae_repack_q5_1_x8_ref(void *W, size_t nblocks);   /* the same bytes, scalar (the specification) */
void ae_unpack_q5_1_x8(void *W, size_t nblocks);       /* the inverse (tests, tools) */
void ae_matvec_q5_1_x8_ref(const void *W, int ncols, const void *xq, float *y, int r0, int r1);
void ae_matvec_rows_q5_1_x8_simd128(const void *W, int ncols, const void *xq, float *y, int r0, int r1);
void ae_matmul_rows_q5_1_x8_simd128(const void *W, int ncols, const void *xq, size_t xq_stride, int nvec,
                                    float *y, int y_stride, int r0, int r1);

/* AE_Q5_K_X: the relaxed build's load-time layout of a q5_K matrix (the plain build keeps q5_K), block by block in place
 * (176 B): d, dmin and the scales as q5_K's; the 160 bytes of qh / qs rewritten as two groups of 80 B for values
 * 128G .. 128G + 127 (repack_ref.c is the specification): 4 vectors of 16 B whose low 5 bits are the values
 * 128G + 16i + e (one and), whose top 3 bits and a fifth vector give the values 128G + 64 + 16i + e (and, shift, a
 * shifted fifth vector masked, or). 24 operations per 128 values where the file layout's 5th bits take 36; the
 * kernels are q5_K's (dot_q5_K_simd128.c, gemm_k_simd128.c) with that decode: the same integers and float
 * sequence, so the results equal the q5_K kernels' on the unpacked rows bit for bit. */
#define AE_Q5_K_X ((ae_type)263)
void ae_repack_q5_K_x(void *W, size_t nblocks);       /* SIMD128 */
void ae_repack_q5_K_x_ref(void *W, size_t nblocks);   /* the same bytes, scalar (the specification) */
void ae_unpack_q5_K_x(void *W, size_t nblocks);       /* the inverse (tests, tools) */
void ae_matvec_q5_K_x_ref(const void *W, int ncols, const void *xq, float *y, int r0, int r1);
void ae_matvec_rows_q5_K_x_simd128(const void *W, int ncols, const void *xq, float *y, int r0, int r1);
void ae_matmul_rows_q5_K_x_simd128(const void *W, int ncols, const void *xq, size_t xq_stride, int nvec,
                                   float *y, int y_stride, int r0, int r1);

/* AE_Q6_K_X: the same for q6_K (the relaxed build; block by block in place, 210 B): the scales and d as q6_K's; the 192
 * bytes of ql / qh rewritten as four groups of 48 B for values 64G .. 64G + 63 (repack_ref.c is the specification): 3
 * vectors of 16 B whose low 6 bits are the values 64G + 16i + e (one and) and whose top 2 bits give the values 64G + 48
 * + e (3 x (and, shift), 2 ors): 11 operations per 64 values where q6_K's ql / qh take 17. The kernels are q6_K's
 * (dot_q6_K_simd128.c, gemm_k_simd128.c) with that decode, so the results equal the q6_K kernels' bit for bit. A q6_K
 * token embedding is repacked too (get_rows: ae_get_row_q6_K_x), so a tied output (Llama-3.2, Gemma-2) gets it. Used
 * where AE_Q6_K_R4 cannot be (rows % 4 != 0, an inf / nan d). */
#define AE_Q6_K_X ((ae_type)264)
void ae_repack_q6_K_x(void *W, size_t nblocks);       /* SIMD128 */
void ae_repack_q6_K_x_ref(void *W, size_t nblocks);   /* the same bytes, scalar (the specification) */
void ae_unpack_q6_K_x(void *W, size_t nblocks);       /* the inverse (tests, tools) */
void ae_get_row_q6_K_x(const void *W, int row, int ncols, float *y, void (*to_float)(const void *, float *, int));
void ae_matvec_q6_K_x_ref(const void *W, int ncols, const void *xq, float *y, int r0, int r1);
void ae_matvec_rows_q6_K_x_simd128(const void *W, int ncols, const void *xq, float *y, int r0, int r1);
void ae_matmul_rows_q6_K_x_simd128(const void *W, int ncols, const void *xq, size_t xq_stride, int nvec,
                                   float *y, int y_stride, int r0, int r1);

/* AE_Q6_K_R4: the relaxed build's load-time layout of a q6_K matrix whose rows are a multiple of 4 with finite d (else
 * AE_Q6_K_X), rows in groups of 4: per super-block column one 840-byte record (4 x 210 B, in place): the 4 rows' d
 * (8 B); their scales in pairs (64 B: pair p at 8 + 8p = sc_k[2p], sc_k[2p + 1] for k = 0..3, so one sign-extending
 * load gives i16 lanes that i32x4.dot_i16x8 pairs per row); then per sub-block j (16 elements) 48 B at 72 + 48j: the
 * 4 chunks U_c (c < 4: row k's bytes 4k..4k+3 = its elements 16j + 4c + i, i < 4, the unsigned 6-bit values) packed as
 * AE_Q6_K_X packs a group: V_i = U_i | ((U_3 >> 2i) & 3) << 6, i < 3 (repack_ref.c is the specification). The values
 * are the 7-bit operand of i16x8.relaxed_dot against the splatted activation bytes: the 4 rows' sums in the lanes,
 * scaled per row by one i32x4.dot_i16x8_s per two chunks, the -32 offset through the activation's bsums (as q6_K's
 * kernels). Results equal the q6_K kernels' on the unpacked rows bit for bit. A q6_K token embedding gets it too
 * (get_rows: ae_get_row_q6_K_r4), so a tied output does. */
#define AE_Q6_K_R4 ((ae_type)265)
#define AE_RK6_REC 840
int ae_repack_q6_K_r4(void *W, int nrows, int ncols, void *tmp);       /* SIMD128 */
int ae_repack_q6_K_r4_ref(void *W, int nrows, int ncols, void *tmp);   /* the same bytes, scalar (the specification) */
void ae_unpack_q6_K_r4(void *W, int nrows, int ncols, void *tmp);      /* the inverse (tests, tools) */
void ae_get_row_q6_K_r4(const void *W, int row, int ncols, float *y, void (*to_float)(const void *, float *, int));
void ae_matvec_q6_K_r4_ref(const void *W, int ncols, const void *xq, float *y, int r0, int r1);
void ae_matvec_rows_q6_K_r4_simd128(const void *W, int ncols, const void *xq, float *y, int r0, int r1);
void ae_matmul_rows_q6_K_r4_simd128(const void *W, int ncols, const void *xq, size_t xq_stride, int nvec,
                                    float *y, int y_stride, int r0, int r1);

/* AE_Q5_K_R4: the relaxed build's load-time layout of a q5_K matrix whose rows are a multiple of 4 with finite d and
 * dmin (else AE_Q5_K_X), rows in groups of 4: per super-block column one 704-byte record (4 x 176 B, in place): the 4
 * rows' d and dmin and their 6-bit scales and mins exactly as AE_Q4_K_R4's first 64 bytes; then per sub-block j (32
 * elements) 80 B at 64 + 80j, the 8 chunks U_m (m < 8: row k's bytes 4k..4k+3 = its elements 32j + 4m + e, e < 4, the
 * unsigned 5-bit values) packed as AE_Q5_K_X packs a group: V_i = U_i | (U_{4+i} & 7) << 5 (i < 4) and V_4 = sum_i
 * ((U_{4+i} >> 3) & 3) << 2i (repack_ref.c is the specification). U_i = V_i & 0x1f, U_{4+i} = (V_i & 0xe0) >> 5 |
 * (V_4 moved by 3 - 2i) & 0x18: 24 operations per 128 values, and the values are the 7-bit operand of i16x8.relaxed_dot
 * against the splatted activation bytes, the 4 rows' sums in the lanes (as AE_Q4_K_R4). Results equal the q5_K
 * kernels' on the unpacked rows bit for bit. Not used for a token embedding (get_rows reads q5_K rows). */
#define AE_Q5_K_R4 ((ae_type)266)
#define AE_RK5_REC 704
int ae_repack_q5_K_r4(void *W, int nrows, int ncols, void *tmp);       /* SIMD128 */
int ae_repack_q5_K_r4_ref(void *W, int nrows, int ncols, void *tmp);   /* the same bytes, scalar (the specification) */
void ae_unpack_q5_K_r4(void *W, int nrows, int ncols, void *tmp);      /* the inverse (tests, tools) */
void ae_matvec_q5_K_r4_ref(const void *W, int ncols, const void *xq, float *y, int r0, int r1);
void ae_matvec_rows_q5_K_r4_simd128(const void *W, int ncols, const void *xq, float *y, int r0, int r1);
void ae_matmul_rows_q5_K_r4_simd128(const void *W, int ncols, const void *xq, size_t xq_stride, int nvec,
                                    float *y, int y_stride, int r0, int r1);

/* AE_Q3_K_X: q3_K blocks with their 3-bit values rearranged (the relaxed build; block by block in place, 110 B): bytes
 * 96..109 (the 12 scale bytes, d) as q3_K's; bytes 0..95 two groups of 48 B for the values 128n .. 128n + 127 (u = value
 * + 4 in 0..7; repack_ref.c is the specification): vectors A, B, C of 16 B whose byte i packs U_t[i] = u(128n + 16t + i):
 * A = U_0 | U_1 << 3 | (U_6 & 3) << 6, B = U_2 | U_3 << 3 | (U_7 & 3) << 6, C = U_4 | U_5 << 3 | (U_6 >> 2) << 6 |
 * (U_7 >> 2) << 7. 19 operations give the 8 vectors of 16 values where q3_K's two planes take 36. The kernel is q3_K's
 * (dot_q3_K_simd128.c) with that decode: the same integers and float sequence, so it equals the q3_K reference bit for
 * bit on the unpacked rows. Not for a token embedding (get_rows reads the file layout). */
#define AE_Q3_K_X ((ae_type)267)
void ae_repack_q3_K_x(void *W, size_t nblocks);       /* SIMD128 */
void ae_repack_q3_K_x_ref(void *W, size_t nblocks);   /* the same bytes, scalar (the specification) */
void ae_unpack_q3_K_x(void *W, size_t nblocks);       /* the inverse (tests, tools) */
void ae_matvec_q3_K_x_ref(const void *W, int ncols, const void *xq, float *y, int r0, int r1);
void ae_matvec_rows_q3_K_x_simd128(const void *W, int ncols, const void *xq, float *y, int r0, int r1);
void ae_matmul_rows_q3_K_x_simd128(const void *W, int ncols, const void *xq, size_t xq_stride, int nvec,
                                   float *y, int y_stride, int r0, int r1);

/* ---- kernels of the ffn-saturated module ---------------------------------------------------------
 * ae_axpy_rows (the neuron-major down): y[c] += sum over k < cnt, in k order, of coef[k] * W_k[c] for c in
 * [d0, d1), W_k = base + idx[k] * rs a row of dtype t: f32, f16 (finite values), q8_0 or q4_0 (d0, d1
 * multiples of 32). Per element y = y + coef_k * w_k (q8_0 / q4_0: (coef_k * d) * q), so SIMD equals the
 * reference bit for bit and the result does not depend on the column split or the neuron grouping.
 * ae_axpy_rows_supported(t): whether dtype t has it. */
typedef void (*ae_axpy_rows_fn)(const uint8_t *base, size_t rs, const int32_t *idx, const float *coef, int cnt,
                                int d0, int d1, float *y);
int ae_axpy_rows_supported(int t);
void ae_axpy_rows(ae_type t, const uint8_t *base, size_t rs, const int32_t *idx, const float *coef, int cnt,
                  int d0, int d1, float *y);
void ae_axpy_rows_ref(ae_type t, const uint8_t *base, size_t rs, const int32_t *idx, const float *coef, int cnt,
                      int d0, int d1, float *y);
#define AE_DECL_AXPY(T)                                                                                      \
  void ae_axpy_rows_##T##_simd128(const uint8_t *base, size_t rs, const int32_t *idx, const float *coef, int cnt, \
                                  int d0, int d1, float *y);
AE_DECL_AXPY(f32) AE_DECL_AXPY(f16) AE_DECL_AXPY(q8_0) AE_DECL_AXPY(q4_0)
#undef AE_DECL_AXPY
/* ae_gather_dot: y[k] = dot(rows[k], x) for k < cnt, rows of nb blocks of dtype t (q8_0 or q4_0) at any
 * addresses, x nb q8_0 blocks; per row bit for bit ae_vec_dot_<t>_ref. The SIMD version reads x prepared
 * once by ae_gather_prep_simd128 (AE_GATHER_BLK_BYTES per block into prep, 16-byte aligned, and nb
 * scales into dx). */
#define AE_GATHER_BLK_BYTES 64
void ae_gather_prep_simd128(const void *xq, int nb, void *prep, float *dx);
void ae_gather_dot_simd128(ae_type t, const uint8_t *const *rows, int cnt, int nb, const void *prep, const float *dx, float *y);
void ae_gather_dot_ref(ae_type t, const uint8_t *const *rows, int cnt, int nb, const void *xq, float *y);

/* SIMD versions of the row ops (ae_X calls ae_X_simd128). */
void ae_rmsnorm_simd128(float *y, const float *x, const float *w, int n, float eps);
void ae_rope_simd128(float *x, int n_heads, int head_dim, int rot_dim, const float *cs, int neox);
void ae_softmax_simd128(float *x, int n);
void ae_silu_mul_simd128(float *g, const float *u, int n);
void ae_gelu_simd128(float *x, int n);
void ae_gelu_mul_simd128(float *g, const float *u, int n);
void ae_softcap_simd128(float *x, int n, float cap);
void ae_add_simd128(float *y, const float *x, int n);
void ae_attention_simd128(float *out, const float *q, const float *k, const float *v, int n_kv, int head_dim,
                          int kv_stride, float scale, float softcap, float *att);
int ae_argmax_simd128(const float *x, int n);
/* y[i] = exp(x[i]) with the SIMD polynomial exp (tests measure its error). */
void ae_vexp_simd128(float *y, const float *x, int n);
void ae_get_row_ref(ae_type t, const void *W, int row, int ncols, float *y);

#endif
