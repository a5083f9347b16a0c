/* Activation preparation, the one routine shared by the core's forward pass and the FFN modules.
 *
 * A weight of dtype wt is dotted with activations in ae_traits(wt)->vec_dot_type (its "activation
 * dtype", src/kernels/dtypes.inc). f32 activations are read from x itself; any other activation dtype
 * has one buffer in the model (m->act[vt], row stride m->act_stride[vt], carved by ae_model_init), so
 * several matrices with the same activation dtype share one conversion of x. */
#ifndef AE_ACT_H
#define AE_ACT_H
#include "model/model.h"

/* Where rows of x converted for weights of dtype wt live, and their row stride in bytes (x itself,
 * x_stride floats apart, when the activation dtype is f32). */
AE_INLINE const void *ae_act_rows(const ae_model *m, ae_type wt, const float *x, int x_stride, size_t *stride) {
  const ae_type vt = ae_traits(wt)->vec_dot_type;
  if (vt == AE_F32) { *stride = (size_t)x_stride * 4; return x; }
  *stride = m->act_stride[vt];
  return m->act[vt];
}

/* A second buffer of rows of hidden_dim values in the activation dtype of weights of dtype wt (the dense
 * FFN converts its hidden activations for down there while other threads still read x's rows from
 * ae_act_rows): the slot after the first one in each row of m->act[vt] (model.c layout()); NULL for f32. */
AE_INLINE uint8_t *ae_act_hidden_rows(const ae_model *m, ae_type wt, size_t *stride) {
  const ae_type vt = ae_traits(wt)->vec_dot_type;
  if (vt == AE_F32) return 0;
  const ae_config *c = &m->cfg;
  int widest = c->dim > c->hidden_dim ? c->dim : c->hidden_dim;
  if (m->q_dim > widest) widest = m->q_dim;
  const int blk = ae_traits(vt)->blck_size;
  *stride = m->act_stride[vt];
  return (uint8_t *)m->act[vt] + ((ae_row_size(vt, (widest + blk - 1) / blk * blk) + 63u) & ~(size_t)63u);
}

/* Convert rows b in [0, n) of x (x + b * x_stride, ncols values each) for weights of dtype wt; rows are
 * split over the nth threads (the caller puts a barrier before the result is read). Returns
 * ae_act_rows(). */
AE_INLINE const void *ae_act_prep(ae_model *m, ae_type wt, const float *x, int x_stride, int ncols, int n,
                                  size_t *stride, int ith, int nth) {
  const void *buf = ae_act_rows(m, wt, x, x_stride, stride);
  if (ae_traits(wt)->vec_dot_type == AE_F32) return buf;
  int b0, b1;
  ae_split(n, ith, nth, &b0, &b1);
  for (int b = b0; b < b1; b++)
    ae_quantize_row(wt, x + (size_t)b * x_stride, (uint8_t *)buf + (size_t)b * *stride, ncols);
  return buf;
}

#endif
