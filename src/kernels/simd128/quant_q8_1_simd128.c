/* q8_1 (activation dtype of q4_1 / q5_1): ggml quantize_row_q8_1_ref semantics, bit-exact with the
 * reference: q8_0's d = amax / 127 and q = roundf(x * (1/d)), plus s = fp16((float)sum(q) * d) with the
 * f32 d. */
#include "simd128_util.h"

AE_INLINE v128 round_half_away(v128 v) {
  const v128 t = wasm_f32x4_trunc(v);
  const v128 d = wasm_f32x4_sub(v, t);   /* exact */
  const v128 one = wasm_f32x4_splat(1.0f);
  const v128 up = wasm_v128_and(wasm_f32x4_ge(d, wasm_f32x4_splat(0.5f)), one);
  const v128 dn = wasm_v128_and(wasm_f32x4_le(d, wasm_f32x4_splat(-0.5f)), one);
  return wasm_f32x4_sub(wasm_f32x4_add(t, up), dn);
}

void ae_from_float_q8_1_simd128(const float *x, void *y, int n) {
  ae_block_q8_1 *b = (ae_block_q8_1 *)y;
  for (int i = 0; i < n / AE_QK8_1; i++) {
    const float *v = x + i * AE_QK8_1;
    v128 f[8];
    v128 am = wasm_f32x4_splat(0.0f);
    for (int j = 0; j < 8; j++) {
      f[j] = ae_load(v + 4 * j);
      am = wasm_f32x4_pmax(am, wasm_f32x4_abs(f[j]));
    }
    am = wasm_f32x4_pmax(am, wasm_i32x4_shuffle(am, am, 2, 3, 0, 1));
    am = wasm_f32x4_pmax(am, wasm_i32x4_shuffle(am, am, 1, 0, 3, 2));
    const float d = wasm_f32x4_extract_lane(am, 0) / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    const v128 idv = wasm_f32x4_splat(id);
    v128 q[8], sum = wasm_i32x4_splat(0);
    for (int j = 0; j < 8; j++) {
      q[j] = wasm_i32x4_trunc_sat_f32x4(round_half_away(wasm_f32x4_mul(f[j], idv)));
      sum = wasm_i32x4_add(sum, q[j]);
    }
    const v128 h0 = wasm_i16x8_narrow_i32x4(q[0], q[1]), h1 = wasm_i16x8_narrow_i32x4(q[2], q[3]);
    const v128 h2 = wasm_i16x8_narrow_i32x4(q[4], q[5]), h3 = wasm_i16x8_narrow_i32x4(q[6], q[7]);
    ae_store(b[i].qs, wasm_i8x16_narrow_i16x8(h0, h1));
    ae_store(b[i].qs + 16, wasm_i8x16_narrow_i16x8(h2, h3));
    b[i].d = ae_fp32_to_fp16(d);
    b[i].s = ae_fp32_to_fp16((float)ae_hsum_i32(sum) * d);
  }
}

void ae_to_float_q8_1_simd128(const void *x, float *y, int n) {
  const ae_block_q8_1 *b = (const ae_block_q8_1 *)x;
  for (int i = 0; i < n / AE_QK8_1; i++) {
    const v128 d = wasm_f32x4_splat(ae_h2f_s(b[i].d));
    float *o = y + i * AE_QK8_1;
    for (int h = 0; h < 2; h++) {
      const v128 q = ae_load(b[i].qs + 16 * h);
      const v128 lo = wasm_i16x8_extend_low_i8x16(q), hi = wasm_i16x8_extend_high_i8x16(q);
      ae_store(o + 16 * h + 0, wasm_f32x4_mul(wasm_f32x4_convert_i32x4(wasm_i32x4_extend_low_i16x8(lo)), d));
      ae_store(o + 16 * h + 4, wasm_f32x4_mul(wasm_f32x4_convert_i32x4(wasm_i32x4_extend_high_i16x8(lo)), d));
      ae_store(o + 16 * h + 8, wasm_f32x4_mul(wasm_f32x4_convert_i32x4(wasm_i32x4_extend_low_i16x8(hi)), d));
      ae_store(o + 16 * h + 12, wasm_f32x4_mul(wasm_f32x4_convert_i32x4(wasm_i32x4_extend_high_i16x8(hi)), d));
    }
  }
}
