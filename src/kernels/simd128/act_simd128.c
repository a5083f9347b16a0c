/* Element-wise ops built on the polynomial exp (simd128_util.h, <= 2 ulp):
 *   silu(v) u = v / (1 + e^-v) u,   gelu_tanh(x) = x / (1 + e^(-2 sqrt(2/pi) (x + 0.044715 x^3))),
 *   softcap(x) = cap tanh(x / cap) with tanh(y) = sign(y) (1 - e^-2|y|) / (1 + e^-2|y|) for |y| >= 1/8 and its
 *   odd Taylor polynomial to y^9 below (where 1 - e^-2|y| would cancel; truncation error < 1e-11 relative)
 * (0.5 (1 + tanh z) = 1 / (1 + e^-2z) exactly; this form has no cancellation for negative x, unlike the
 * float 1 + tanh of the reference, which is why gelu is compared with an absolute tolerance in |x|).
 * Tails (n % 4) go through a padded 4-lane buffer so every element uses the same vector code. */
#include "simd128_util.h"

void ae_vexp_simd128(float *y, const float *x, int n) {
  int i = 0;
  for (; i + 4 <= n; i += 4) ae_store(y + i, ae_v_exp(ae_load(x + i)));
  if (i < n) {
    float t[4] = {0, 0, 0, 0};
    for (int j = 0; j < n - i; j++) t[j] = x[i + j];
    ae_store(t, ae_v_exp(ae_load(t)));
    for (int j = 0; j < n - i; j++) y[i + j] = t[j];
  }
}

AE_INLINE v128 silu_mul4(v128 g, v128 u) {
  const v128 e = ae_v_exp(wasm_f32x4_neg(g));
  return wasm_f32x4_mul(wasm_f32x4_div(g, wasm_f32x4_add(wasm_f32x4_splat(1.0f), e)), u);
}

void ae_silu_mul_simd128(float *g, const float *u, int n) {
  int i = 0;
  for (; i + 4 <= n; i += 4) ae_store(g + i, silu_mul4(ae_load(g + i), ae_load(u + i)));
  if (i < n) {
    float a[4] = {0, 0, 0, 0}, b[4] = {0, 0, 0, 0};
    for (int j = 0; j < n - i; j++) { a[j] = g[i + j]; b[j] = u[i + j]; }
    ae_store(a, silu_mul4(ae_load(a), ae_load(b)));
    for (int j = 0; j < n - i; j++) g[i + j] = a[j];
  }
}

AE_INLINE v128 gelu4(v128 x) {
  const v128 x3 = wasm_f32x4_mul(wasm_f32x4_mul(x, x), x);
  const v128 inner = wasm_f32x4_add(x, wasm_f32x4_mul(wasm_f32x4_splat(0.044715f), x3));
  const v128 e = ae_v_exp(wasm_f32x4_mul(wasm_f32x4_splat(-2.0f * 0.7978845608028654f), inner));
  return wasm_f32x4_div(x, wasm_f32x4_add(wasm_f32x4_splat(1.0f), e));
}

void ae_gelu_simd128(float *x, int n) {
  int i = 0;
  for (; i + 4 <= n; i += 4) ae_store(x + i, gelu4(ae_load(x + i)));
  if (i < n) {
    float a[4] = {0, 0, 0, 0};
    for (int j = 0; j < n - i; j++) a[j] = x[i + j];
    ae_store(a, gelu4(ae_load(a)));
    for (int j = 0; j < n - i; j++) x[i + j] = a[j];
  }
}

void ae_gelu_mul_simd128(float *g, const float *u, int n) {
  int i = 0;
  for (; i + 4 <= n; i += 4) ae_store(g + i, wasm_f32x4_mul(gelu4(ae_load(g + i)), ae_load(u + i)));
  if (i < n) {
    float a[4] = {0, 0, 0, 0}, b[4] = {0, 0, 0, 0};
    for (int j = 0; j < n - i; j++) { a[j] = g[i + j]; b[j] = u[i + j]; }
    ae_store(a, wasm_f32x4_mul(gelu4(ae_load(a)), ae_load(b)));
    for (int j = 0; j < n - i; j++) g[i + j] = a[j];
  }
}

AE_INLINE v128 tanh4(v128 y) {
  const v128 sign = wasm_v128_and(y, wasm_i32x4_splat((int32_t)0x80000000u));
  const v128 a = wasm_f32x4_abs(y);
  const v128 e = ae_v_exp(wasm_f32x4_mul(a, wasm_f32x4_splat(-2.0f)));
  const v128 one = wasm_f32x4_splat(1.0f);
  const v128 big = wasm_f32x4_div(wasm_f32x4_sub(one, e), wasm_f32x4_add(one, e));
  const v128 a2 = wasm_f32x4_mul(a, a);
  v128 p = wasm_f32x4_splat(62.0f / 2835.0f);
  p = wasm_f32x4_add(wasm_f32x4_mul(p, a2), wasm_f32x4_splat(-17.0f / 315.0f));
  p = wasm_f32x4_add(wasm_f32x4_mul(p, a2), wasm_f32x4_splat(2.0f / 15.0f));
  p = wasm_f32x4_add(wasm_f32x4_mul(p, a2), wasm_f32x4_splat(-1.0f / 3.0f));
  const v128 small = wasm_f32x4_add(a, wasm_f32x4_mul(wasm_f32x4_mul(p, a2), a));
  const v128 t = wasm_v128_bitselect(small, big, wasm_f32x4_lt(a, wasm_f32x4_splat(0.125f)));
  return wasm_v128_or(t, sign);
}

void ae_softcap_simd128(float *x, int n, float cap) {
  const v128 c = wasm_f32x4_splat(cap);
  int i = 0;
  for (; i + 4 <= n; i += 4) ae_store(x + i, wasm_f32x4_mul(c, tanh4(wasm_f32x4_div(ae_load(x + i), c))));
  if (i < n) {
    float a[4] = {0, 0, 0, 0};
    for (int j = 0; j < n - i; j++) a[j] = x[i + j];
    ae_store(a, wasm_f32x4_mul(c, tanh4(wasm_f32x4_div(ae_load(a), c))));
    for (int j = 0; j < n - i; j++) x[i + j] = a[j];
  }
}

void ae_add_simd128(float *y, const float *x, int n) {
  int i = 0;
  for (; i + 8 <= n; i += 8) {
    ae_store(y + i, wasm_f32x4_add(ae_load(y + i), ae_load(x + i)));
    ae_store(y + i + 4, wasm_f32x4_add(ae_load(y + i + 4), ae_load(x + i + 4)));
  }
  for (; i + 4 <= n; i += 4) ae_store(y + i, wasm_f32x4_add(ae_load(y + i), ae_load(x + i)));
  for (; i < n; i++) y[i] += x[i];
}
