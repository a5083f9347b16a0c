/* RoPE with precomputed cos/sin pairs. Each output is the reference's expression (x0 c - x1 s,
 * x0 s + x1 c; a - b computed as a + (-b), and + is commutative), so results are bit-exact. */
#include "simd128_util.h"

void ae_rope_simd128(float *x, int n_heads, int head_dim, int rot_dim, const float *cs, int neox) {
  const int half = rot_dim / 2;
  const v128 sgn = wasm_i32x4_const((int32_t)0x80000000u, 0, (int32_t)0x80000000u, 0);
  for (int h = 0; h < n_heads; h++) {
    float *v = x + (size_t)h * head_dim;
    int i = 0;
    if (neox) {
      for (; i + 4 <= half; i += 4) {
        const v128 p = ae_load(cs + 2 * i), q = ae_load(cs + 2 * i + 4);
        const v128 c = wasm_i32x4_shuffle(p, q, 0, 2, 4, 6), s = wasm_i32x4_shuffle(p, q, 1, 3, 5, 7);
        const v128 x0 = ae_load(v + i), x1 = ae_load(v + i + half);
        ae_store(v + i, wasm_f32x4_sub(wasm_f32x4_mul(x0, c), wasm_f32x4_mul(x1, s)));
        ae_store(v + i + half, wasm_f32x4_add(wasm_f32x4_mul(x0, s), wasm_f32x4_mul(x1, c)));
      }
      for (; i < half; i++) {
        const float c = cs[2 * i], s = cs[2 * i + 1], x0 = v[i], x1 = v[i + half];
        v[i] = x0 * c - x1 * s;
        v[i + half] = x0 * s + x1 * c;
      }
    } else {
      for (; i + 2 <= half; i += 2) {          /* 2 pairs = 4 floats */
        const v128 xv = ae_load(v + 2 * i), p = ae_load(cs + 2 * i);
        const v128 c = wasm_i32x4_shuffle(p, p, 0, 0, 2, 2), s = wasm_i32x4_shuffle(p, p, 1, 1, 3, 3);
        const v128 xs = wasm_i32x4_shuffle(xv, xv, 1, 0, 3, 2);
        ae_store(v + 2 * i, wasm_f32x4_add(wasm_f32x4_mul(xv, c), wasm_v128_xor(wasm_f32x4_mul(xs, s), sgn)));
      }
      for (; i < half; i++) {
        const float c = cs[2 * i], s = cs[2 * i + 1], x0 = v[2 * i], x1 = v[2 * i + 1];
        v[2 * i] = x0 * c - x1 * s;
        v[2 * i + 1] = x0 * s + x1 * c;
      }
    }
  }
}
