/* q8_K (activation type of the K-quants): ggml quantize_row_q8_K semantics, bit-exact with the
 * reference: max = first value of largest magnitude, iscale = -127 / max, q = min(127, nearest(iscale x))
 * (ties to even), d = 1 / iscale, bsums = sums of 16 consecutive q. */
#include "simd128_util.h"

void ae_from_float_q8_K_simd128(const float *x, void *y, int n) {
  ae_block_q8_K *b = (ae_block_q8_K *)y;
  for (int i = 0; i < n / AE_QK_K; i++) {
    const float *v = x + i * AE_QK_K;
    v128 am = wasm_f32x4_splat(0.0f);
    for (int j = 0; j < AE_QK_K; j += 4) am = wasm_f32x4_pmax(am, wasm_f32x4_abs(ae_load(v + j)));
    am = wasm_f32x4_pmax(am, wasm_i32x4_shuffle(am, am, 2, 3, 0, 1));
    am = wasm_f32x4_pmax(am, wasm_i32x4_shuffle(am, am, 1, 0, 3, 2));
    const float amax = wasm_f32x4_extract_lane(am, 0);
    if (amax == 0.0f) {
      __builtin_memset(&b[i], 0, sizeof b[i]);
      continue;
    }
    /* first element whose magnitude equals amax */
    float max = 0.0f;
    const v128 amv = wasm_f32x4_splat(amax);
    for (int j = 0; j < AE_QK_K; j += 4) {
      const int mask = wasm_i32x4_bitmask(wasm_f32x4_eq(wasm_f32x4_abs(ae_load(v + j)), amv));
      if (mask) { max = v[j + __builtin_ctz((unsigned)mask)]; break; }
    }
    const float iscale = -127.0f / max;
    const v128 is = wasm_f32x4_splat(iscale), lim = wasm_i32x4_splat(127);
    for (int j = 0; j < AE_QK_K; j += 16) {
      v128 q[4];
      for (int k = 0; k < 4; k++)
        q[k] = wasm_i32x4_min(wasm_i32x4_trunc_sat_f32x4(wasm_f32x4_nearest(wasm_f32x4_mul(ae_load(v + j + 4 * k), is))), lim);
      const v128 h0 = wasm_i16x8_narrow_i32x4(q[0], q[1]), h1 = wasm_i16x8_narrow_i32x4(q[2], q[3]);
      ae_store(b[i].qs + j, wasm_i8x16_narrow_i16x8(h0, h1));
      b[i].bsums[j / 16] = (int16_t)ae_hsum_i32(wasm_i32x4_extadd_pairwise_i16x8(wasm_i16x8_add(h0, h1)));
    }
    b[i].d = 1.0f / iscale;
  }
}

void ae_to_float_q8_K_simd128(const void *x, float *y, int n) {
  const ae_block_q8_K *b = (const ae_block_q8_K *)x;
  for (int i = 0; i < n / AE_QK_K; i++) {
    const v128 d = wasm_f32x4_splat(b[i].d);
    float *o = y + i * AE_QK_K;
    for (int j = 0; j < AE_QK_K; j += 16) {
      const v128 q = ae_load(b[i].qs + j);
      const v128 lo = wasm_i16x8_extend_low_i8x16(q), hi = wasm_i16x8_extend_high_i8x16(q);
      ae_store(o + j, wasm_f32x4_mul(d, wasm_f32x4_convert_i32x4(wasm_i32x4_extend_low_i16x8(lo))));
      ae_store(o + j + 4, wasm_f32x4_mul(d, wasm_f32x4_convert_i32x4(wasm_i32x4_extend_high_i16x8(lo))));
      ae_store(o + j + 8, wasm_f32x4_mul(d, wasm_f32x4_convert_i32x4(wasm_i32x4_extend_low_i16x8(hi))));
      ae_store(o + j + 12, wasm_f32x4_mul(d, wasm_f32x4_convert_i32x4(wasm_i32x4_extend_high_i16x8(hi))));
    }
  }
}
