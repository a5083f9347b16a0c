/* Reference matrix-vector product, activation conversion and row fetch through ae_traits_ref. */
#include "kernels/kernels.h"

void ae_matvec_ref(ae_type t, const void *W, int ncols, const void *xq, float *y, int r0, int r1) {
  if (t == AE_Q4_0_R4) { ae_matvec_q4_0_r4_ref(W, ncols, xq, y, r0, r1); return; }
  if (t == AE_Q5_0_X8) { ae_matvec_q5_0_x8_ref(W, ncols, xq, y, r0, r1); return; }
  if (t == AE_Q5_0_R4) { ae_matvec_q5_0_r4_ref(W, ncols, xq, y, r0, r1); return; }
  if (t == AE_Q5_1_R4) { ae_matvec_q5_1_r4_ref(W, ncols, xq, y, r0, r1); return; }
  if (t == AE_Q8_0_R4) { ae_matvec_q8_0_r4_ref(W, ncols, xq, y, r0, r1); return; }
  if (t == AE_Q4_K_R4) { ae_matvec_q4_K_r4_ref(W, ncols, xq, y, r0, r1); return; }
  if (t == AE_Q5_K_R4) { ae_matvec_q5_K_r4_ref(W, ncols, xq, y, r0, r1); return; }
  if (t == AE_Q5_K_X) { ae_matvec_q5_K_x_ref(W, ncols, xq, y, r0, r1); return; }
  if (t == AE_Q6_K_X) { ae_matvec_q6_K_x_ref(W, ncols, xq, y, r0, r1); return; }
  if (t == AE_Q3_K_X) { ae_matvec_q3_K_x_ref(W, ncols, xq, y, r0, r1); return; }
  if (t == AE_Q6_K_R4) { ae_matvec_q6_K_r4_ref(W, ncols, xq, y, r0, r1); return; }
  if (t == AE_Q5_1_X8) { ae_matvec_q5_1_x8_ref(W, ncols, xq, y, r0, r1); return; }
  const ae_type_traits *tr = ae_traits_ref(t);
  if (!tr || !tr->vec_dot) return;
  const size_t rs = ae_row_size(t, ncols);
  for (int r = r0; r < r1; r++) tr->vec_dot(ncols, &y[r], (const uint8_t *)W + (size_t)r * rs, xq);
}

ae_type ae_quantize_row_ref(ae_type t, const float *x, void *y, int n) {
  const ae_type_traits *tr = ae_traits_ref(t);
  if (!tr) return (ae_type)AE_TYPE_COUNT;
  const ae_type_traits *vt = ae_traits_ref(tr->vec_dot_type);
  vt->from_float(x, y, n);
  return tr->vec_dot_type;
}

void ae_get_row_ref(ae_type t, const void *W, int row, int ncols, float *y) {
  if (t == AE_Q8_0_R4) { ae_get_row_q8_0_r4(W, row, ncols, y, ae_to_float_q8_0_ref); return; }
  if (t == AE_Q6_K_X) { ae_get_row_q6_K_x(W, row, ncols, y, ae_to_float_q6_K_ref); return; }
  if (t == AE_Q6_K_R4) { ae_get_row_q6_K_r4(W, row, ncols, y, ae_to_float_q6_K_ref); return; }
  const ae_type_traits *tr = ae_traits_ref(t);
  if (!tr) return;
  tr->to_float((const uint8_t *)W + (size_t)row * ae_row_size(t, ncols), y, ncols);
}
