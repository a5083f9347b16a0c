/* dtype traits tables: ae_traits (SIMD128 kernels) and ae_traits_ref (scalar references). */
#include "kernels/kernels.h"

#define ROW(T, NAME, BLK, SIZE, VDT, IMPL, DOT)                                                  \
  [T] = {NAME, BLK, SIZE, VDT, ae_to_float_##IMPL, ae_from_float_##IMPL, DOT}

static const ae_type_traits k_simd[AE_TYPE_COUNT] = {
  ROW(AE_F32, "f32", 1, 4, AE_F32, f32_simd128, ae_vec_dot_f32_simd128),
  ROW(AE_F16, "f16", 1, 2, AE_F32, f16_simd128, ae_vec_dot_f16_simd128),
  ROW(AE_Q4_0, "q4_0", AE_QK4_0, sizeof(ae_block_q4_0), AE_Q8_0, q4_0_simd128, ae_vec_dot_q4_0_simd128),
  ROW(AE_Q8_0, "q8_0", AE_QK8_0, sizeof(ae_block_q8_0), AE_Q8_0, q8_0_simd128, ae_vec_dot_q8_0_simd128),
  ROW(AE_Q4_K, "q4_K", AE_QK_K, sizeof(ae_block_q4_K), AE_Q8_K, q4_K_simd128, ae_vec_dot_q4_K_simd128),
  ROW(AE_Q6_K, "q6_K", AE_QK_K, sizeof(ae_block_q6_K), AE_Q8_K, q6_K_simd128, ae_vec_dot_q6_K_simd128),
  ROW(AE_Q8_K, "q8_K", AE_QK_K, sizeof(ae_block_q8_K), AE_Q8_K, q8_K_simd128, 0),
};

static const ae_type_traits k_ref[AE_TYPE_COUNT] = {
  ROW(AE_F32, "f32", 1, 4, AE_F32, f32_ref, ae_vec_dot_f32_ref),
  ROW(AE_F16, "f16", 1, 2, AE_F32, f16_ref, ae_vec_dot_f16_ref),
  ROW(AE_Q4_0, "q4_0", AE_QK4_0, sizeof(ae_block_q4_0), AE_Q8_0, q4_0_ref, ae_vec_dot_q4_0_ref),
  ROW(AE_Q8_0, "q8_0", AE_QK8_0, sizeof(ae_block_q8_0), AE_Q8_0, q8_0_ref, ae_vec_dot_q8_0_ref),
  ROW(AE_Q4_K, "q4_K", AE_QK_K, sizeof(ae_block_q4_K), AE_Q8_K, q4_K_ref, ae_vec_dot_q4_K_ref),
  ROW(AE_Q6_K, "q6_K", AE_QK_K, sizeof(ae_block_q6_K), AE_Q8_K, q6_K_ref, ae_vec_dot_q6_K_ref),
  ROW(AE_Q8_K, "q8_K", AE_QK_K, sizeof(ae_block_q8_K), AE_Q8_K, q8_K_ref, 0),
};

const ae_type_traits *ae_traits(ae_type t) {
  if ((unsigned)t >= AE_TYPE_COUNT || !k_simd[t].name) return 0;
  return &k_simd[t];
}

const ae_type_traits *ae_traits_ref(ae_type t) {
  if ((unsigned)t >= AE_TYPE_COUNT || !k_ref[t].name) return 0;
  return &k_ref[t];
}

size_t ae_row_size(ae_type t, int n) {
  const ae_type_traits *tr = ae_traits_ref(t);
  if (!tr || n < 0 || n % tr->blck_size) return 0;
  return (size_t)(n / tr->blck_size) * (size_t)tr->type_size;
}
