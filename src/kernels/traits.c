/* dtype traits tables generated from the registry (src/kernels/dtypes.inc): ae_traits (SIMD128
 * kernels) and ae_traits_ref (scalar references). */
#include "kernels/kernels.h"

/* Every row's block size and bytes match its block struct. */
#define AE_DTYPE(ID, name, id, blck, bytes, act, kind, s0, s1)                                  \
  static_assert(sizeof(ae_block_##name) == (bytes), #name " block bytes (dtypes.inc)");         \
  static_assert((s0) < (bytes) && (s1) < (bytes), #name " scale offsets (dtypes.inc)");
#include "kernels/dtypes.inc"

/* Entry points per kind (dtypes.inc): A activations only, W weights, WM weights with a batched kernel. */
#define AE_DT_WEIGHT_A 0
#define AE_DT_WEIGHT_W 1
#define AE_DT_WEIGHT_WM 1
#define AE_DT_DOT_A(T, impl) 0
#define AE_DT_DOT_W(T, impl) ae_vec_dot_##T##_##impl
#define AE_DT_DOT_WM(T, impl) ae_vec_dot_##T##_##impl
#define AE_DT_MATVEC_A(T) 0
#define AE_DT_MATVEC_W(T) ae_matvec_rows_##T##_simd128
#define AE_DT_MATVEC_WM(T) ae_matvec_rows_##T##_simd128
#define AE_DT_MATMUL_A(T) 0
#define AE_DT_MATMUL_W(T) 0
#define AE_DT_MATMUL_WM(T) ae_matmul_rows_##T##_simd128

#define AE_DT_ROW(ID, name, blck, bytes, act, kind, s0, s1, impl, matvec, matmul)                 \
  [AE_##ID] = {#name, blck, bytes, AE_##act, AE_DT_WEIGHT_##kind, {s0, s1}, ae_to_float_##name##_##impl, \
               ae_from_float_##name##_##impl, AE_DT_DOT_##kind(name, impl), matvec, matmul},

static const ae_type_traits k_simd[AE_TYPE_COUNT] = {
#define AE_DTYPE(ID, name, id, blck, bytes, act, kind, s0, s1) \
  AE_DT_ROW(ID, name, blck, bytes, act, kind, s0, s1, simd128, AE_DT_MATVEC_##kind(name), AE_DT_MATMUL_##kind(name))
#include "kernels/dtypes.inc"
};

static const ae_type_traits k_ref[AE_TYPE_COUNT] = {
#define AE_DTYPE(ID, name, id, blck, bytes, act, kind, s0, s1) \
  AE_DT_ROW(ID, name, blck, bytes, act, kind, s0, s1, ref, 0, 0)
#include "kernels/dtypes.inc"
};

/* The load-time repacked layout (kernels.h AE_Q4_0_R4): q4_0's sizes and activation dtype, its own matvec / matmul;
 * no vec_dot / to_float / from_float (rows are not contiguous). The reference table's entry has no kernels either:
 * ae_matvec_ref runs ae_matvec_q4_0_r4_ref for it. */
static const ae_type_traits k_q4_0_r4 = {"q4_0_r4", AE_QK4_0, sizeof(ae_block_q4_0), AE_Q8_0, 1, {0, -1}, 0, 0, 0,
                                         ae_matvec_rows_q4_0_r4_simd128, ae_matmul_rows_q4_0_r4_simd128};
static const ae_type_traits k_q4_0_r4_ref = {"q4_0_r4", AE_QK4_0, sizeof(ae_block_q4_0), AE_Q8_0, 1, {0, -1}, 0, 0, 0, 0, 0};
/* The same for q5_0's load-time layout (kernels.h AE_Q5_0_X8; ae_matvec_ref runs ae_matvec_q5_0_x8_ref for it). */
static const ae_type_traits k_q5_0_x8 = {"q5_0_x8", AE_QK5_0, sizeof(ae_block_q5_0), AE_Q8_0, 1, {0, -1}, 0, 0, 0,
                                         ae_matvec_rows_q5_0_x8_simd128, ae_matmul_rows_q5_0_x8_simd128};
static const ae_type_traits k_q5_0_x8_ref = {"q5_0_x8", AE_QK5_0, sizeof(ae_block_q5_0), AE_Q8_0, 1, {0, -1}, 0, 0, 0, 0, 0};
static const ae_type_traits k_q5_0_r4 = {"q5_0_r4", AE_QK5_0, sizeof(ae_block_q5_0), AE_Q8_0, 1, {0, -1}, 0, 0, 0,
                                         ae_matvec_rows_q5_0_r4_simd128, ae_matmul_rows_q5_0_r4_simd128};
static const ae_type_traits k_q5_0_r4_ref = {"q5_0_r4", AE_QK5_0, sizeof(ae_block_q5_0), AE_Q8_0, 1, {0, -1}, 0, 0, 0, 0, 0};
static const ae_type_traits k_q5_1_r4 = {"q5_1_r4", AE_QK5_1, sizeof(ae_block_q5_1), AE_Q8_1, 1, {0, 2}, 0, 0, 0,
                                         ae_matvec_rows_q5_1_r4_simd128, ae_matmul_rows_q5_1_r4_simd128};
static const ae_type_traits k_q5_1_r4_ref = {"q5_1_r4", AE_QK5_1, sizeof(ae_block_q5_1), AE_Q8_1, 1, {0, 2}, 0, 0, 0, 0, 0};
static const ae_type_traits k_q8_0_r4 = {"q8_0_r4", AE_QK8_0, sizeof(ae_block_q8_0), AE_Q8_0, 1, {0, -1}, 0, 0, 0,
                                         ae_matvec_rows_q8_0_r4_simd128, ae_matmul_rows_q8_0_r4_simd128};
static const ae_type_traits k_q8_0_r4_ref = {"q8_0_r4", AE_QK8_0, sizeof(ae_block_q8_0), AE_Q8_0, 1, {0, -1}, 0, 0, 0, 0, 0};
static const ae_type_traits k_q4_K_r4 = {"q4_K_r4", AE_QK_K, sizeof(ae_block_q4_K), AE_Q8_K, 1, {0, 2}, 0, 0, 0,
                                         ae_matvec_rows_q4_K_r4_simd128, ae_matmul_rows_q4_K_r4_simd128};
static const ae_type_traits k_q4_K_r4_ref = {"q4_K_r4", AE_QK_K, sizeof(ae_block_q4_K), AE_Q8_K, 1, {0, 2}, 0, 0, 0, 0, 0};
static const ae_type_traits k_q5_K_r4 = {"q5_K_r4", AE_QK_K, sizeof(ae_block_q5_K), AE_Q8_K, 1, {0, 2}, 0, 0, 0,
                                         ae_matvec_rows_q5_K_r4_simd128, ae_matmul_rows_q5_K_r4_simd128};
static const ae_type_traits k_q5_K_r4_ref = {"q5_K_r4", AE_QK_K, sizeof(ae_block_q5_K), AE_Q8_K, 1, {0, 2}, 0, 0, 0, 0, 0};
static const ae_type_traits k_q5_K_x = {"q5_K_x", AE_QK_K, sizeof(ae_block_q5_K), AE_Q8_K, 1, {0, 2}, 0, 0, 0,
                                        ae_matvec_rows_q5_K_x_simd128, ae_matmul_rows_q5_K_x_simd128};
static const ae_type_traits k_q5_K_x_ref = {"q5_K_x", AE_QK_K, sizeof(ae_block_q5_K), AE_Q8_K, 1, {0, 2}, 0, 0, 0, 0, 0};
static const ae_type_traits k_q6_K_x = {"q6_K_x", AE_QK_K, sizeof(ae_block_q6_K), AE_Q8_K, 1, {208, -1}, 0, 0, 0,
                                        ae_matvec_rows_q6_K_x_simd128, ae_matmul_rows_q6_K_x_simd128};
static const ae_type_traits k_q6_K_x_ref = {"q6_K_x", AE_QK_K, sizeof(ae_block_q6_K), AE_Q8_K, 1, {208, -1}, 0, 0, 0, 0, 0};
static const ae_type_traits k_q3_K_x = {"q3_K_x", AE_QK_K, sizeof(ae_block_q3_K), AE_Q8_K, 1, {108, -1}, 0, 0, 0,
                                        ae_matvec_rows_q3_K_x_simd128, ae_matmul_rows_q3_K_x_simd128};
static const ae_type_traits k_q3_K_x_ref = {"q3_K_x", AE_QK_K, sizeof(ae_block_q3_K), AE_Q8_K, 1, {108, -1}, 0, 0, 0, 0, 0};
static const ae_type_traits k_q6_K_r4 = {"q6_K_r4", AE_QK_K, sizeof(ae_block_q6_K), AE_Q8_K, 1, {208, -1}, 0, 0, 0,
                                         ae_matvec_rows_q6_K_r4_simd128, ae_matmul_rows_q6_K_r4_simd128};
static const ae_type_traits k_q6_K_r4_ref = {"q6_K_r4", AE_QK_K, sizeof(ae_block_q6_K), AE_Q8_K, 1, {208, -1}, 0, 0, 0, 0, 0};
static const ae_type_traits k_q5_1_x8 = {"q5_1_x8", AE_QK5_1, sizeof(ae_block_q5_1), AE_Q8_1, 1, {0, 2}, 0, 0, 0,
                                         ae_matvec_rows_q5_1_x8_simd128, ae_matmul_rows_q5_1_x8_simd128};
static const ae_type_traits k_q5_1_x8_ref = {"q5_1_x8", AE_QK5_1, sizeof(ae_block_q5_1), AE_Q8_1, 1, {0, 2}, 0, 0, 0, 0, 0};

const ae_type_traits *ae_traits(ae_type t) {
  if (t == AE_Q4_0_R4) return &k_q4_0_r4;
  if (t == AE_Q5_0_X8) return &k_q5_0_x8;
  if (t == AE_Q5_0_R4) return &k_q5_0_r4;
  if (t == AE_Q5_1_R4) return &k_q5_1_r4;
  if (t == AE_Q8_0_R4) return &k_q8_0_r4;
  if (t == AE_Q4_K_R4) return &k_q4_K_r4;
  if (t == AE_Q5_K_R4) return &k_q5_K_r4;
  if (t == AE_Q5_K_X) return &k_q5_K_x;
  if (t == AE_Q6_K_X) return &k_q6_K_x;
  if (t == AE_Q3_K_X) return &k_q3_K_x;
  if (t == AE_Q6_K_R4) return &k_q6_K_r4;
  if (t == AE_Q5_1_X8) return &k_q5_1_x8;
  if ((unsigned)t >= (unsigned)AE_TYPE_COUNT || !k_simd[t].name) return 0;
  return &k_simd[t];
}

const ae_type_traits *ae_traits_ref(ae_type t) {
  if (t == AE_Q4_0_R4) return &k_q4_0_r4_ref;
  if (t == AE_Q5_0_X8) return &k_q5_0_x8_ref;
  if (t == AE_Q5_0_R4) return &k_q5_0_r4_ref;
  if (t == AE_Q5_1_R4) return &k_q5_1_r4_ref;
  if (t == AE_Q8_0_R4) return &k_q8_0_r4_ref;
  if (t == AE_Q4_K_R4) return &k_q4_K_r4_ref;
  if (t == AE_Q5_K_R4) return &k_q5_K_r4_ref;
  if (t == AE_Q5_K_X) return &k_q5_K_x_ref;
  if (t == AE_Q6_K_X) return &k_q6_K_x_ref;
  if (t == AE_Q3_K_X) return &k_q3_K_x_ref;
  if (t == AE_Q6_K_R4) return &k_q6_K_r4_ref;
  if (t == AE_Q5_1_X8) return &k_q5_1_x8_ref;
  if ((unsigned)t >= (unsigned)AE_TYPE_COUNT || !k_ref[t].name) return 0;
  return &k_ref[t];
}

size_t ae_row_size(ae_type t, int n) {
  const ae_type_traits *tr = ae_traits_ref(t);
  if (!tr || n < 0 || n % tr->blck_size) return 0;
  return (size_t)(n / tr->blck_size) * (size_t)tr->type_size;
}

int ae_is_weight_type(int t) {
  const ae_type_traits *tr = ae_traits((ae_type)t);
  return tr && tr->is_weight;
}

int ae_is_act_type(int t) {
  if (t == AE_F32 || !ae_traits((ae_type)t)) return 0;
  for (int w = 0; w < AE_TYPE_COUNT; w++)
    if (ae_is_weight_type(w) && k_simd[w].vec_dot_type == (ae_type)t) return 1;
  return 0;
}
