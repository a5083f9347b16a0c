/* Transformer decoder forward pass (llama / Llama 3 / SmolLM2, qwen2, qwen3, phi3, gemma 1/2/3 families),
 * run by every thread of the pool.
 *
 * A batch of n tokens at positions pos..pos+n-1 goes through all layers at once (prefill), or one
 * token (decode). Work is split by (ith, nth) over matrix rows, (token, head) pairs or tokens, with a
 * barrier between dependent steps. Every output element is computed by the same code whatever nth
 * is, so 1 and N threads give identical bits.
 *
 * Architecture variants are data, not code paths per arch: the config flags (embedding scale, FFN
 * activation, attention scale and soft-caps, RoPE scaling, sliding window) and the optional tensors
 * (q/k norms, post-attention / post-FFN norms, RoPE frequency factors) select the steps below; the small
 * helpers in the next section are the only places that know about them. */
#include "model/act.h"

/* ---- architecture variants ---------------------------------------------------------------------- */

/* RoPE cos/sin of one position: angle_i = pos * freq_scale * theta^(-2i/rd) / ff[i], cos and sin times
 * mscale. ff = frequency divisors (llama3 rope_freqs, LongRoPE factors; ggml's freq_factors), NULL = 1.
 * Without scaling this is ae_rope_cos_sin exactly. */
static void rope_table(float *cs, int pos, int rd, float theta, float freq_scale, const float *ff, float mscale) {
  if (!ff && freq_scale == 1.0f && mscale == 1.0f) { ae_rope_cos_sin(cs, pos, rd, theta); return; }
  for (int i = 0; i < rd / 2; i++) {
    const float e = (float)(2 * i) / (float)rd;
    float freq = 1.0f / ae_powf(theta, e);
    if (ff) freq /= ff[i];
    const float a = (float)pos * freq * freq_scale;
    cs[2 * i] = ae_cosf(a) * mscale;
    cs[2 * i + 1] = ae_sinf(a) * mscale;
  }
}

/* Whether SWA layers need their own RoPE table (Gemma 3: local base 10000, no linear scaling). */
static int swa_rope_differs(const ae_config *c) {
  const float th = c->rope_theta_swa > 0.0f ? c->rope_theta_swa : c->rope_theta;
  return th != c->rope_theta || c->rope_freq_scale_swa != c->rope_freq_scale;
}

/* Attention of one layer: which keys a query at position p sees, the q.k scale and soft-cap, the RoPE table. */
typedef struct {
  int window;        /* 0: all positions <= p; W: positions p-W+1 .. p */
  float scale, softcap;
  const float *cs;   /* RoPE cos/sin, rope_dim per token */
} attn_cfg;

static attn_cfg layer_attn(const ae_model *m, const ae_layer *L) {
  const ae_config *c = &m->cfg;
  attn_cfg a;
  a.window = L->swa ? c->swa_window : 0;
  a.scale = c->attn_scale > 0.0f ? c->attn_scale : 1.0f / __builtin_sqrtf((float)c->head_dim);
  a.softcap = c->attn_softcap;
  a.cs = L->swa ? m->rope_cs_swa : m->rope_cs;
  return a;
}

/* RMSNorm of each of n_heads heads of x (head_dim values each) with one weight vector, in place (Qwen3, Gemma 3). */
static AE_NOINLINE void head_norm(float *x, int n_heads, int hd, const float *w, float eps) {
  for (int h = 0; h < n_heads; h++) ae_rmsnorm(x + (size_t)h * hd, x + (size_t)h * hd, w, hd, eps);
}

/* y = rmsnorm(y) * w in place when the (optional) norm is present. */
static void post_norm(float *y, const ae_tensor *w, int dim, float eps) {
  if (w->data) ae_rmsnorm(y, y, w->data, dim, eps);
}

#define AE_KV_MAX_RUNS (AE_KV_MAX_SEGS + 2)

/* ---- KV cache (docs/DESIGN.md "KV cache") ---------------------------------------------------------------
 * Head-major per layer: KV head g's position t at L->k + (g * n_ctx + t) * L->k_row (same for v), one dtype
 * per layer's K and V. kv_runs() is the one place that maps positions to storage: it describes positions
 * [t0, t1) of head g as runs of contiguous rows of one dtype (one run for the plain cache; a layer with a KV policy,
 * src/model/model.h ae_kv_policy, gives its segments and the ring's one or two pieces), which ae_attention_kv
 * consumes. */
static void kv_put(ae_type t, const float *x, int hd, uint8_t *dst, float *pad) {
  const ae_type_traits *tr = ae_traits(t);
  const int hp = (hd + tr->blck_size - 1) / tr->blck_size * tr->blck_size;
  if (hp != hd) { for (int i = 0; i < hp; i++) pad[i] = i < hd ? x[i] : 0.0f; x = pad; }
  tr->from_float(x, dst, hp);
}
/* pad: AE_KV_PAD(head_dim) floats of scratch (rows padded to whole blocks with zeros) */
static void kv_store_at(const ae_kv_store *st, int g, int i, const float *k, const float *v, int hd, float *pad) {
  const size_t row = (size_t)g * (size_t)st->cap + (size_t)i;
  kv_put((ae_type)st->type, k, hd, st->k + row * st->row, pad);
  kv_put((ae_type)st->type, v, hd, st->v + row * st->row, pad);
}
static void kv_store(const ae_model *m, const ae_layer *L, int g, int t, const float *k, const float *v, float *pad) {
  const size_t row = (size_t)g * (size_t)m->cfg.n_ctx + (size_t)t;
  const int hd = m->cfg.head_dim;
  const ae_kv_policy *P = &L->kvp;
  if (P->n_seg) {   /* policy: into the segment holding t (quantised once, from f32) and into the window's ring */
    for (int s = 0; s < P->n_seg; s++)
      if (t >= P->seg[s].start && t < P->seg[s].end) {
        uint8_t *dk, *dv;   /* a head stored locally keeps only positions < sinks */
        if (ae_kv_seg_row(&P->seg[s], P, g, t - P->seg[s].start, &dk, &dv)) {
          kv_put((ae_type)P->seg[s].type, k, hd, dk, pad);
          kv_put((ae_type)P->seg[s].type, v, hd, dv, pad);
        }
        break;
      }
    const int rs = ae_kv_ring_slot(P, g);
    if (rs >= 0) kv_store_at(&P->ring, rs, t % P->ring.cap, k, v, hd, pad);
    return;
  }
  kv_put((ae_type)L->k_type, k, hd, L->k + row * L->k_row, pad);
  kv_put((ae_type)L->v_type, v, hd, L->v + row * L->v_row, pad);
}

static int kv_add_run_at(ae_kv_run *run, int nr, uint8_t *k, uint8_t *v, int type, int n) {
  run[nr].k = k;
  run[nr].v = v;
  run[nr].kt = run[nr].vt = type;
  run[nr].n = n;
  return nr + 1;
}
static int kv_add_run(ae_kv_run *run, int nr, const ae_kv_store *st, size_t row, int n) {
  return kv_add_run_at(run, nr, st->k + row * st->row, st->v + row * st->row, st->type, n);
}
/* Runs of head g's segment rows for positions [a, b) (all kept: a head stored locally is only asked for < sinks). */
static int kv_seg_runs(const ae_kv_policy *P, int g, int a0, int b0, ae_kv_run *run, int nr) {
  for (int s = 0; s < P->n_seg; s++) {
    const ae_kv_store *st = &P->seg[s];
    const int a = a0 > st->start ? a0 : st->start, b = b0 < st->end ? b0 : st->end;
    uint8_t *k, *v;
    if (a < b && ae_kv_seg_row(st, P, g, a - st->start, &k, &v)) nr = kv_add_run_at(run, nr, k, v, st->type, b - a);
  }
  return nr;
}
static int kv_runs(const ae_model *m, const ae_layer *L, int g, int t0, int t1, ae_kv_run *run) {
  const ae_kv_policy *P = &L->kvp;
  if (P->n_seg) {
    /* positions [t0, ws) from the segments (a local head: only those < sinks), the window [ws, t1) from the ring when
     * it keeps the head, else from the segments; in position order (at most n_seg + 2 runs) */
    const int ws = P->window ? (t1 - P->window > t0 ? t1 - P->window : t0) : t1;
    const int local = P->window && ((P->local[g >> 5] >> (g & 31)) & 1u), rs = ae_kv_ring_slot(P, g);
    int old_end = rs >= 0 || local ? ws : t1;
    if (local && P->sinks < old_end) old_end = P->sinks;
    int nr = kv_seg_runs(P, g, t0, old_end, run, 0);
    if (rs < 0) return local ? kv_seg_runs(P, g, ws, t1, run, nr) : nr;   /* local: old_end <= ws */
    for (int a = ws; a < t1;) {
      const int r = a % P->ring.cap, k = t1 - a < P->ring.cap - r ? t1 - a : P->ring.cap - r;
      nr = kv_add_run(run, nr, &P->ring, (size_t)rs * P->ring.cap + (size_t)r, k);
      a += k;
    }
    return nr;
  }
  const size_t row = (size_t)g * (size_t)m->cfg.n_ctx + (size_t)t0;
  run[0].k = L->k + row * L->k_row;
  run[0].v = L->v + row * L->v_row;
  run[0].kt = L->k_type;
  run[0].vt = L->v_type;
  run[0].n = t1 - t0;
  return 1;
}

/* Convert rows b in [b0, b1) of x for every activation dtype the given weights need, once per dtype (several
 * matmuls share it). Returns 1 if the weights need a conversion at all (then the caller needs a barrier
 * before the matmuls read it), 0 if every weight reads x as is (f32 activations); the same on every thread. */
static int prep_rows(ae_model *m, const ae_tensor *const *ws, int nw, const float *x, int x_stride, int ncols,
                     int b0, int b1) {
  int any = 0;
  for (int i = 0; i < nw; i++) {
    if (!ws[i]->data) continue;
    const ae_type wt = (ae_type)ws[i]->type, vt = ae_traits(wt)->vec_dot_type;
    if (vt == AE_F32) continue;
    any = 1;
    int done = 0;
    for (int j = 0; j < i; j++)
      done |= ws[j]->data && ae_traits((ae_type)ws[j]->type)->vec_dot_type == vt;
    if (done) continue;
    size_t st;
    uint8_t *buf = (uint8_t *)ae_act_rows(m, wt, x, x_stride, &st);
    for (int b = b0; b < b1; b++) ae_quantize_row(wt, x + (size_t)b * x_stride, buf + (size_t)b * st, ncols);
  }
  return any;
}

/* The same, rows b < n split over the threads. */
static int prep_all(ae_model *m, const ae_tensor *const *ws, int nw, const float *x, int x_stride, int ncols,
                    int n, int ith, int nth) {
  int b0, b1;
  ae_split(n, ith, nth, &b0, &b1);
  return prep_rows(m, ws, nw, x, x_stride, ncols, b0, b1);
}

/* Rows of one thread's chunk: how many rows a chunk of a matmul section of `n` tokens has (whole range on 1 thread).
 * Prefill (n > 1): about 8 chunks per thread (a descheduled or slower thread's share is taken over in small pieces:
 * a chunk is long there), at least 16 rows. Decode (n == 1): at least AE_DECODE_CHUNK_MACS multiply-adds (rows x
 * cols; cols 0: no such minimum) and 64 rows each, at most 8 per thread, their count a multiple of the thread count
 * (balanced halves when both threads run). A decode chunk is one matvec call from DRAM: each call starts its 4 row
 * streams cold (~1 us before the prefetchers run, session 21) and costs a claim and a done count on counters both
 * threads touch. With 64K multiply-adds (sessions 19-20) SmolLM2-135M's 2-thread decode ran no faster than 1 thread
 * (gate / up in 12 chunks of 128 rows: each thread's half took as long as the whole on 1 thread); with 4M it runs
 * 1.3x faster, Qwen2.5-0.5B 1.16x, Llama-3.2-1B 1.05x, Phi-3 1.04x, and also with a busy process on the other core
 * (docs/PERFORMANCE.md "Session 21"). Rows are a multiple of `align` (4: the 4-row matvec groups; or an activation
 * block size when the chunk's output is converted). */
#define AE_DECODE_CHUNK_MACS (1 << 22)
static int chunk_rows(int rows, int cols, int n, int nth, int align) {
  if (nth <= 1) return rows > 0 ? rows : 1;
  int c;
  if (n > 1) {
    c = (rows + 8 * nth - 1) / (8 * nth);
    if (c < 16) c = 16;
  } else {
    int mr = cols > 0 ? AE_DECODE_CHUNK_MACS / cols : 0;
    if (mr < 64) mr = 64;
    int nch = rows / mr;                       /* chunks of at least 64 rows and ~4M multiply-adds */
    if (nch > 8 * nth) nch = 8 * nth;          /* at most 8 per thread */
    nch = nch / nth * nth;                     /* a multiple of the thread count */
    if (nch < nth) nch = nth;
    c = (rows + nch - 1) / nch;
  }
  return (c + align - 1) / align * align;
}

/* One matmul of a section: y[b * y_stride + r] = W[r] . act(x[b]), x already prepared by prep_all. */
typedef struct { const ae_tensor *w; float *y; int y_stride; } mm_item;

static void matmul_range(ae_model *m, const ae_tensor *w, const float *x, int x_stride, int n, float *y, int y_stride,
                         int r0, int r1) {
  const ae_type t = (ae_type)w->type;
  size_t xs;
  const void *xq = ae_act_rows(m, t, x, x_stride, &xs);
  if (r0 >= r1) return;
  if (n == 1) ae_matvec(t, w->data, w->ne0, xq, y, r0, r1);
  else ae_matmul(t, w->data, w->ne0, xq, xs, n, y, y_stride, r0, r1);
}

/* This thread's static share of W's rows (4-aligned split): the compressed FFN variant's matmuls. */
static void matmul_rows(ae_model *m, const ae_tensor *w, const float *x, int x_stride, int n, float *y,
                        int y_stride, int ith, int nth) {
  int r0, r1;
  ae_split_aligned(w->ne1, 4, ith, nth, &r0, &r1);
  matmul_range(m, w, x, x_stride, n, y, y_stride, r0, r1);
}

/* Calibration capture (model.h AE_CAP_*): rows b0..b1 of x (width w) into block `which` of the layer's area. */
static void capture_rows(const ae_model *m, const ae_layer *L, int which, const float *x, int w, int b0, int b1) {
  if (!L->cap) return;
  const int D = m->cfg.dim, B = m->cfg.max_batch;
  const size_t off = which == AE_CAP_ATTN ? 0 : which == AE_CAP_WO ? (size_t)B * D
                   : which == AE_CAP_FFN ? (size_t)B * (D + m->q_dim) : (size_t)B * (2 * D + m->q_dim);
  for (int b = b0; b < b1; b++) __builtin_memcpy(L->cap + off + (size_t)b * w, x + (size_t)b * w, (size_t)w * 4);
}

/* ---- time counters per (layer, op class), thread 0, when the host set m->op_time ---- */
__attribute__((import_module("env"), import_name("ae_clock_ms")))
double ae_clock_ms(void);

static AE_NOINLINE void tick_slow(ae_model *m, int row, int op) {
  const double t = ae_clock_ms();
  m->op_time[row * AE_OP_COUNT + op] += t - m->op_t0;
  m->op_t0 = t;
}
/* Charge the time since the last boundary to (row, op): call right after a step's closing barrier. */
#define TICK(row, op) do { if (ith == 0 && m->op_time) tick_slow(m, (row), (op)); } while (0)

/* ---- attention statistics (aether profile-heads): att = the softmaxed row of query head h at position p over
 * positions t0 .. p, added to this thread's accumulators ---- */
static AE_NOINLINE void head_stats_add(ae_model *m, int ith, int l, int h, int p, int t0, const float *att) {
  const int n = p + 1 - t0, S = m->hs_sinks, W = m->hs_window;
  if (p < S + W) return;
  double ent = 0.0, sink = 0.0, win = 0.0;
  for (int i = 0; i < n; i++) {
    const double a = att[i];
    if (a > 0.0) ent -= a * ae_logf((float)a);
    if (t0 + i < S) sink += a;
    if (t0 + i > p - W) win += a;
  }
  double *acc = m->head_stats + (((size_t)ith * m->cfg.n_layers + l) * m->cfg.n_heads + h) * AE_HS_N;
  acc[AE_HS_COUNT] += 1.0;
  acc[AE_HS_ENTROPY] += ent;
  acc[AE_HS_LOGN] += ae_logf((float)n);
  acc[AE_HS_SINK] += sink;
  acc[AE_HS_WINDOW] += win;
}

/* Tokens [b0, b1): x[b] += post_norm(add[b]) when add is set, xb[b] = rmsnorm(x[b]) * norm, then xb[b] converted for
 * the weights ws (one step instead of three). */
static void resid_norm_rows(ae_model *m, const float *add, const ae_tensor *post, const float *norm,
                            const ae_tensor *const *ws, int nw, const ae_layer *cap_layer, int cap, int b0, int b1) {
  const int D = m->cfg.dim;
  const float eps = m->cfg.norm_eps;
  for (int b = b0; b < b1; b++) {
    float *x = m->x + (size_t)b * D;
    if (add) {
      float *t = (float *)add + (size_t)b * D;
      post_norm(t, post, D, eps);
      ae_add(x, t, D);
    }
    if (norm) ae_rmsnorm(m->xb + (size_t)b * D, x, norm, D, eps);
  }
  if (norm && cap_layer) capture_rows(m, cap_layer, cap, m->xb, D, b0, b1);
  /* the same rows, so no barrier between norm and conversion */
  if (norm) prep_rows(m, ws, nw, m->xb, D, D, b0, b1);
}

/* The same, rows b < n split by (ith, nth) (the barrier-synchronised FFN of ae_ffn_block). */
static void resid_norm_prep(ae_model *m, int n, const float *add, const ae_tensor *post, const float *norm,
                            const ae_tensor *const *ws, int nw, const ae_layer *cap_layer, int cap, int ith, int nth) {
  int b0, b1;
  ae_split(n, ith, nth, &b0, &b1);
  resid_norm_rows(m, add, post, norm, ws, nw, cap_layer, cap, b0, b1);
}

/* ---- FFN (SwiGLU / GeGLU), dense path ----
 * xb holds rmsnorm(x) (already converted for gate / up when `prepped`). Gate and up rows go in chunks aligned
 * to the activation block of down; the thread that computed a chunk applies silu / gelu(gate) * up to it
 * and converts it for down right away (same rows, so no barrier between those steps); barrier; down;
 * barrier. The residual add x += post_norm(tmp) is left to the caller when defer_add (the forward fuses it
 * with the next norm), done here otherwise. */
/* Gate / up rows [r0, r1) of the n tokens, silu / gelu(gate) * up, and the conversion of those columns for down
 * (into the hidden slot of the activation rows: other threads may still read x's conversion). */
static void gate_up_chunk(ae_model *m, ae_layer *L, int n, int r0, int r1) {
  const int D = m->cfg.dim, H = m->cfg.hidden_dim;
  const ae_type dt = (ae_type)L->w_down.type, dvt = ae_traits(dt)->vec_dot_type;
  size_t hs = 0;
  uint8_t *hq = ae_act_hidden_rows(m, dt, &hs);
  matmul_range(m, &L->w_gate, m->xb, D, n, m->hb, H, r0, r1);
  matmul_range(m, &L->w_up, m->xb, D, n, m->hb2, H, r0, r1);
  for (int b = 0; b < n; b++) {
    float *g = m->hb + (size_t)b * H + r0;
    const float *u = m->hb2 + (size_t)b * H + r0;
    if (m->cfg.ffn_act == AE_ACT_GELU_TANH) ae_gelu_mul(g, u, r1 - r0);
    else ae_silu_mul(g, u, r1 - r0);
    if (hq) ae_quantize_row(dt, g, hq + (size_t)b * hs + ae_row_size(dvt, r0), r1 - r0);
    if (L->cap)   /* calibration capture of down's input (capture_rows' AE_CAP_DOWN block), this chunk's columns */
      __builtin_memcpy(L->cap + (size_t)m->cfg.max_batch * (2 * D + m->q_dim) + (size_t)b * H + r0, g, (size_t)(r1 - r0) * 4);
  }
}

/* Down rows [r0, r1) into tmp (reads the hidden slot). */
static void down_chunk(ae_model *m, ae_layer *L, int n, int r0, int r1) {
  const int D = m->cfg.dim, H = m->cfg.hidden_dim;
  const ae_type dt = (ae_type)L->w_down.type;
  size_t hs = 0;
  const uint8_t *hq = ae_act_hidden_rows(m, dt, &hs);
  if (!hq) { matmul_range(m, &L->w_down, m->hb, H, n, m->tmp, D, r0, r1); return; }
  if (n == 1) ae_matvec(dt, L->w_down.data, H, hq, m->tmp, r0, r1);
  else ae_matmul(dt, L->w_down.data, H, hq, hs, n, m->tmp, D, r0, r1);
}

static void ffn_dense(ae_model *m, ae_layer *L, int n, int ith, int nth, ae_pool *pool, ae_dyn *d, int prepped,
                      int defer_add) {
  const int D = m->cfg.dim, H = m->cfg.hidden_dim;
  if (!prepped) {
    const ae_tensor *ws[] = {&L->w_gate, &L->w_up};
    if (prep_all(m, ws, 2, m->xb, D, D, n, ith, nth)) ae_barrier(pool);
  }
  const ae_type dt = (ae_type)L->w_down.type, dvt = ae_traits(dt)->vec_dot_type;
  const int blk = dvt == AE_F32 ? 4 : ae_traits(dvt)->blck_size;
  const int cr = chunk_rows(H, D, n, nth, blk % 4 ? 4 * blk : blk), nch = (H + cr - 1) / cr;
  const int cr_down = chunk_rows(D, H, n, nth, 4), nch_down = (D + cr_down - 1) / cr_down;
  for (int c; (c = ae_dyn_claim(d, nch)) >= 0;) gate_up_chunk(m, L, n, c * cr, c * cr + cr < H ? c * cr + cr : H);
  if (ith == 0) L->ffn_active = n * H;
  ae_barrier(pool);
  for (int c; (c = ae_dyn_claim(d, nch_down)) >= 0;)
    down_chunk(m, L, n, c * cr_down, c * cr_down + cr_down < D ? c * cr_down + cr_down : D);
  ae_barrier(pool);
  if (!defer_add) {
    resid_norm_prep(m, n, m->tmp, &L->ffn_post_norm, 0, 0, 0, 0, 0, ith, nth);
    ae_barrier(pool);
  }
}

/* ---- FFN, compressed variant (ae_ffn_variant): width-pruned matrices and/or low-rank factors ---- */

/* y = F x for this thread's rows: one matmul (F.a), or two (t = F.a x into t, then y = F.b t). Starts with x
 * written by every thread and ends with a barrier. The factored product is exactly two dense matmuls of the
 * kernels (each factor's activations prepared as for any weight), so it is bit-identical to computing
 * F.a x and then F.b (F.a x) as two separate matrix-vector products. */
static void fmat_apply(ae_model *m, const ae_fmat *F, const float *x, int xs, int n, float *t, float *y, int ys,
                       int ith, int nth, ae_pool *pool) {
  const ae_tensor *a = &F->a, *b = &F->b;
  {
    const ae_tensor *ws[] = {a};
    prep_all(m, ws, 1, x, xs, a->ne0, n, ith, nth);
  }
  ae_barrier(pool);
  if (!b->data) {
    matmul_rows(m, a, x, xs, n, y, ys, ith, nth);
    ae_barrier(pool);
    return;
  }
  const int r = a->ne1;
  matmul_rows(m, a, x, xs, n, t, r, ith, nth);
  ae_barrier(pool);
  {
    const ae_tensor *ws[] = {b};
    prep_all(m, ws, 1, t, r, r, n, ith, nth);
  }
  ae_barrier(pool);
  matmul_rows(m, b, t, r, n, y, ys, ith, nth);
  ae_barrier(pool);
}

/* x[b] += down(act(gate(xb[b])) * up(xb[b])) (+ out_bias) with the layer's variant of width w. Scratch: hb / hb2
 * (n x w), tmp holds gate/up intermediates (r <= dim), xb (no longer needed) down's intermediate, tmp the output. */
static void ffn_variant(ae_model *m, ae_layer *L, int n, int ith, int nth, ae_pool *pool) {
  const ae_ffn_variant *v = &L->cmp;
  const int D = m->cfg.dim, w = v->width;
  fmat_apply(m, &v->gate, m->xb, D, n, m->tmp, m->hb, w, ith, nth, pool);
  fmat_apply(m, &v->up, m->xb, D, n, m->tmp, m->hb2, w, ith, nth, pool);
  {
    int b0, b1;
    ae_split(n, ith, nth, &b0, &b1);
    for (int b = b0; b < b1; b++) {
      if (m->cfg.ffn_act == AE_ACT_GELU_TANH) ae_gelu_mul(m->hb + (size_t)b * w, m->hb2 + (size_t)b * w, w);
      else ae_silu_mul(m->hb + (size_t)b * w, m->hb2 + (size_t)b * w, w);
    }
  }
  if (ith == 0) L->ffn_active = n * w;
  ae_barrier(pool);
  fmat_apply(m, &v->down, m->hb, w, n, m->xb, m->tmp, D, ith, nth, pool);
  {
    int b0, b1;
    ae_split(n, ith, nth, &b0, &b1);
    for (int b = b0; b < b1; b++) {
      float *y = m->tmp + (size_t)b * D;
      if (v->out_bias.data) ae_add(y, v->out_bias.data, D);
      post_norm(y, &L->ffn_post_norm, D, m->cfg.norm_eps);
      ae_add(m->x + (size_t)b * D, y, D);
    }
  }
  ae_barrier(pool);
}

/* FFN modules (wasm imports, wired by js/src/runtime/instance.ts; a module that is not loaded is a stub
 * returning AE_ERR_UNSUPPORTED). Same contract as ae_ffn_block; they check everything before their
 * first barrier, so a refusal leaves nothing half done. */
__attribute__((import_module("ffn_fused"), import_name("ae_ffn_fused_run")))
int ae_ffn_fused_run(ae_model *m, int layer, int n, int ith, int nth, ae_pool *pool);
__attribute__((import_module("ffn_saturated"), import_name("ae_ffn_saturated_run")))
int ae_ffn_saturated_run(ae_model *m, int layer, int n, int ith, int nth, ae_pool *pool);

/* The FFN block; the dense path leaves its residual add to the caller (*deferred = 1, x += post_norm(tmp)). */
static int ffn_block(ae_model *m, int layer, int n, int ith, int nth, ae_pool *pool, ae_dyn *d, int prepped, int *deferred) {
  ae_layer *L = &m->layers[layer];
  int st = AE_OK;
  *deferred = 1;
  if (L->cmp_mode == AE_CMP_VARIANT) { *deferred = 0; ffn_variant(m, L, n, ith, nth, pool); return AE_OK; }
  switch (L->ffn_mode) {
    case AE_FFN_FUSED:
      st = ae_ffn_fused_run(m, layer, n, ith, nth, pool);
      break;
    case AE_FFN_SAT_STATIC: case AE_FFN_SAT_DYNAMIC: case AE_FFN_PROFILE:
      st = ae_ffn_saturated_run(m, layer, n, ith, nth, pool);
      break;
    default:
      ffn_dense(m, L, n, ith, nth, pool, d, prepped, 1);
      return AE_OK;
  }
  if (st) ffn_dense(m, L, n, ith, nth, pool, d, 0, 1);
  else *deferred = 0;
  return st;
}

int ae_ffn_block(ae_model *m, int layer, int n, int ith, int nth, ae_pool *pool) {
  ae_dyn d = ae_dyn_start(pool, nth);
  int deferred;
  const int st = ffn_block(m, layer, n, ith, nth, pool, &d, 0, &deferred);
  if (deferred) {
    resid_norm_prep(m, n, m->tmp, &m->layers[layer].ffn_post_norm, 0, 0, 0, 0, 0, ith, nth);
    ae_barrier(pool);
  }
  return st;
}

/* ---- the forward pass as steps (pool.h ae_flow): every thread claims chunks of a step, the thread that finishes
 * a step's last chunk runs its epilogue, and threads wait for a step to be complete, never for each other. ----
 * Per layer at decode (n = 1): qkv rows; attention by KV head (biases, q/k norms, RoPE and the K/V store of the
 * head's rows, then its attention: the head reads only rows it wrote itself or earlier positions), epilogue: the
 * conversion for wo; wo rows, epilogue: residual add, FFN norm, conversion for gate/up; gate/up rows (+ act +
 * conversion for down per chunk); down rows, epilogue: the residual add, the next layer's norm and its conversion
 * for q/k/v (or the output norm). 5 steps per layer. Prefill (n > 1) has token-chunked steps for the per-token work
 * (norms and conversions, RoPE and K/V stores) and attention by (token block, KV head): 9 steps. */

/* Steps per layer at most (prefill: rnp, qkv, rope, attn, prep wo, wo, rnp ffn, gate/up, down) and global ones. */
#define AE_FLOW_LAYER_STEPS 9
#define AE_FLOW_GLOBAL_STEPS 6
int ae_forward_max_steps(const ae_config *c) { return c->n_layers * AE_FLOW_LAYER_STEPS + AE_FLOW_GLOBAL_STEPS; }

/* Token chunks of a per-token step: about 4 per thread, whole tokens; one chunk on one thread. */
static int tok_chunk(int n, int nth) {
  if (nth <= 1) return n > 0 ? n : 1;
  const int c = (n + 4 * nth - 1) / (4 * nth);
  return c > 0 ? c : 1;
}

/* The matmuls of one section (same input x), split into row chunks: chunk c -> matmul i rows [r0, r1). */
typedef struct { int cr[4], nc[4], total; } mm_plan;
static mm_plan mm_plan_of(const mm_item *it, int nit, int n, int nth) {
  mm_plan p;
  p.total = 0;
  for (int i = 0; i < nit; i++) {
    p.cr[i] = chunk_rows(it[i].w->ne1, it[i].w->ne0, n, nth, 4);
    p.nc[i] = it[i].w->data ? (it[i].w->ne1 + p.cr[i] - 1) / p.cr[i] : 0;
    p.total += p.nc[i];
  }
  return p;
}
static void mm_chunk(ae_model *m, const mm_item *it, const mm_plan *p, int c, const float *x, int x_stride, int n) {
  int i = 0;
  while (c >= p->nc[i]) c -= p->nc[i++];
  const int r0 = c * p->cr[i], r1 = r0 + p->cr[i] < it[i].w->ne1 ? r0 + p->cr[i] : it[i].w->ne1;
  matmul_range(m, it[i].w, x, x_stride, n, it[i].y, it[i].y_stride, r0, r1);
}

/* Tokens [b0, b1): the pending residual add of the previous dense FFN (x += post_norm(tmp)), the attention norm of
 * layer l and the conversion for its q/k/v. */
static void pre_attn_rows(ae_model *m, int l, const ae_tensor *pending, int b0, int b1) {
  ae_layer *L = &m->layers[l];
  const ae_tensor *ws[] = {&L->wq, &L->wk, &L->wv, &L->wqkv};
  resid_norm_rows(m, pending ? m->tmp : 0, pending, L->attn_norm.data, ws, 4, L, AE_CAP_ATTN, b0, b1);
}

/* Tokens [b0, b1) of the output head: the pending residual add, then for the rows that get logits the output
 * norm and the conversion for the output matrix. */
static void pre_out_rows(ae_model *m, const ae_tensor *pending, int n, int all, int b0, int b1) {
  const ae_config *c = &m->cfg;
  const int D = c->dim;
  const ae_tensor *out = m->output.data ? &m->output : &m->tok_embd;
  const ae_tensor *ws[] = {out};
  for (int b = b0; b < b1; b++) {
    float *x = m->x + (size_t)b * D;
    if (pending) {
      float *t = m->tmp + (size_t)b * D;
      post_norm(t, pending, D, c->norm_eps);
      ae_add(x, t, D);
    }
    const int o = all ? b : b == n - 1 ? 0 : -1;   /* output row of token b */
    if (o < 0) continue;
    ae_rmsnorm(m->xb + (size_t)o * D, x, m->output_norm.data, D, c->norm_eps);
    prep_rows(m, ws, 1, m->xb, D, D, o, o + 1);
  }
}

/* Biases, q/k norms, RoPE and the K/V store of token b, KV heads [g0, g1) (with their query heads). */
static void rope_kv_rows(ae_model *m, ae_layer *L, const attn_cfg *ac, int pos, int b, int g0, int g1, int ith) {
  const ae_config *c = &m->cfg;
  const int hd = c->head_dim, qd = m->q_dim, kvd = m->kv_dim, qkvd = m->qkv_dim, group = c->n_heads / c->n_kv_heads;
  float *q = m->qkv + (size_t)b * qkvd, *k = q + qd, *v = k + kvd;
  const size_t q0 = (size_t)g0 * group * hd, k0 = (size_t)g0 * hd;
  const int nq = (g1 - g0) * group, nk = g1 - g0;
  if (L->bq.data) ae_add(q + q0, (const float *)L->bq.data + q0, nq * hd);
  if (L->bk.data) ae_add(k + k0, (const float *)L->bk.data + k0, nk * hd);
  if (L->bv.data) ae_add(v + k0, (const float *)L->bv.data + k0, nk * hd);
  if (L->q_norm.data) {
    head_norm(q + q0, nq, hd, L->q_norm.data, c->norm_eps);
    head_norm(k + k0, nk, hd, L->k_norm.data, c->norm_eps);
  }
  const float *cs = ac->cs + (size_t)b * c->rope_dim;
  ae_rope(q + q0, nq, hd, c->rope_dim, cs, c->rope_neox);
  ae_rope(k + k0, nk, hd, c->rope_dim, cs, c->rope_neox);
  float *pad = (float *)(m->qconv + (size_t)ith * (AE_ATTN_TOKENS(c) * group + 1) * AE_KV_PAD(hd) * 4);
  for (int g = g0; g < g1; g++) kv_store(m, L, g, pos + b, k + (size_t)g * hd, v + (size_t)g * hd, pad);
}

/* Attention item i of layer l: (token block of tb tokens, KV head), the group's query heads together (GQA: K and
 * V rows read once per group); causal, within the layer's window. tb > 1 (prefill on a cache without a KV
 * policy): ae_attention_kv_multi (K / V rows read once for the block, the same bits as token by token). */
static void attn_item(ae_model *m, ae_layer *L, const attn_cfg *ac, int l, int n, int pos, int tb, int i, int ith) {
  const ae_config *c = &m->cfg;
  const int hd = c->head_dim, qd = m->q_dim, qkvd = m->qkv_dim, group = c->n_heads / c->n_kv_heads;
  float *att = m->att + (size_t)ith * AE_ATTN_TOKENS(c) * group * c->n_ctx;
  uint8_t *qconv = m->qconv + (size_t)ith * (AE_ATTN_TOKENS(c) * group + 1) * AE_KV_PAD(hd) * 4;
  ae_kv_run run[AE_KV_MAX_RUNS];
  const int g = i % c->n_kv_heads;
  const size_t h0 = (size_t)g * group * hd;
  if (tb == 1) {
    const int b = i / c->n_kv_heads, p = pos + b;
    const int t0 = ac->window > 0 && p + 1 > ac->window ? p + 1 - ac->window : 0;
    const int nrun = kv_runs(m, L, g, t0, p + 1, run);
    ae_attention_kv(m->xb + (size_t)b * qd + h0, hd, m->qkv + (size_t)b * qkvd + h0, hd, group, run, nrun, hd,
                    ac->scale, ac->softcap, att, c->n_ctx, qconv);
    /* att holds the group's softmaxed rows (row j at att + j * n_ctx, positions t0 .. p) */
    if (m->head_stats && !((L->kvp.local[g >> 5] >> (g & 31)) & 1u))   /* rows over contiguous positions only */
      for (int j = 0; j < group; j++) head_stats_add(m, ith, l, g * group + j, p, t0, att + (size_t)j * c->n_ctx);
    return;
  }
  const int b0 = (i / c->n_kv_heads) * tb, nq = n - b0 < tb ? n - b0 : tb;
  int lo[4], hi[4], t0s[4];
  for (int q = 0; q < nq; q++) {
    const int p = pos + b0 + q;
    t0s[q] = ac->window > 0 && p + 1 > ac->window ? p + 1 - ac->window : 0;
  }
  const int u0 = t0s[0];   /* windows start at nondecreasing positions */
  for (int q = 0; q < nq; q++) { lo[q] = t0s[q] - u0; hi[q] = pos + b0 + q + 1 - u0; }
  const int nrun = kv_runs(m, L, g, u0, pos + b0 + nq, run);
  ae_attention_kv_multi(m->xb + (size_t)b0 * qd + h0, hd, qd, m->qkv + (size_t)b0 * qkvd + h0, hd, qkvd, group, nq,
                        lo, hi, run, nrun, hd, ac->scale, ac->softcap, att, c->n_ctx, qconv);
  /* att row q * group + j: token b0 + q's softmaxed scores for head j, positions t0s[q] .. p */
  if (m->head_stats && !((L->kvp.local[g >> 5] >> (g & 31)) & 1u))
    for (int q = 0; q < nq; q++)
      for (int j = 0; j < group; j++)
        head_stats_add(m, ith, l, g * group + j, pos + b0 + q, t0s[q], att + (size_t)(q * group + j) * c->n_ctx);
}

/* Summary of logits x[0..n) (rows base..): NaN / inf among them, the first index of their maximum and the maximum. */
static void out_part_of(const float *x, int n, int base, struct ae_out_part *p) {
  const int i = ae_argmax(x, n);
  p->max = x[i]; p->idx = base + i; p->bad = ae_any_nonfinite(x, (size_t)n); p->pad = 0;
}

/* Run one step: chunks of the body, the epilogue by the thread that finished the last chunk, then wait for the
 * step to be complete; leave the job (return from the enclosing function) when it is over for this thread. */
#define FLOW_CHUNKS(nc, c) for (int c; (c = ae_flow_claim(&fl, (nc))) >= 0;)
#define FLOW_LAST(nc) if (ae_flow_done(&fl, (nc)))
#define FLOW_WAIT(nc) do { if (!ae_flow_wait(&fl, (nc))) return; } while (0)

void ae_forward_job(ae_forward_args *a, int ith, int nth, ae_pool *pool, int32_t tag) {
  ae_model *m = a->model;
  const ae_config *c = &m->cfg;
  const int n = a->n_tokens, pos = a->pos, D = c->dim, H = c->hidden_dim;
  const int qd = m->q_dim, kvd = m->kv_dim, qkvd = m->qkv_dim;
  if (ith == 0) a->status = AE_OK;
  /* Checks every thread can make on its own (same answer everywhere, so no barrier needed). */
  if (!m->initialised || m->kv_dirty || n <= 0 || n > c->max_batch || pos < 0) { if (ith == 0) a->status = AE_ERR_INVALID_ARG; return; }
  if (pos + n > c->n_ctx) { if (ith == 0) a->status = AE_ERR_CTX_FULL; return; }
  for (int b = 0; b < n; b++)
    if (a->tokens[b] < 0 || a->tokens[b] >= c->vocab) { if (ith == 0) a->status = AE_ERR_INVALID_ARG; return; }

  ae_flow fl = ae_flow_start(pool, m->flow, ae_forward_max_steps(c), tag, nth);
  const int tc = tok_chunk(n, nth), ntc = (n + tc - 1) / tc;   /* token chunks of the per-token steps */
  const int decode = n == 1 && !a->hidden_sum;                  /* epilogues fold the per-token work */
  if (ith == 0 && m->op_time) m->op_t0 = ae_clock_ms();
  /* embeddings (scaled: Gemma) and RoPE tables (full-attention layers, and SWA layers when theirs differs), by
   * token chunk; at decode also layer 0's attention norm and conversion */
  FLOW_CHUNKS(ntc, ch) {
    const int b0 = ch * tc, b1 = b0 + tc < n ? b0 + tc : n;
    const float *ff = (const float *)m->rope_freqs.data;
    const int swa_own = swa_rope_differs(c);
    const float theta_swa = c->rope_theta_swa > 0.0f ? c->rope_theta_swa : c->rope_theta;
    for (int b = b0; b < b1; b++) {
      float *xr = m->x + (size_t)b * D;
      ae_get_row((ae_type)m->tok_embd.type, m->tok_embd.data, a->tokens[b], D, xr);
      if (c->embd_scale != 1.0f) for (int i = 0; i < D; i++) xr[i] *= c->embd_scale;
      float *cs = m->rope_cs + (size_t)b * c->rope_dim, *cs_swa = m->rope_cs_swa + (size_t)b * c->rope_dim;
      rope_table(cs, pos + b, c->rope_dim, c->rope_theta, c->rope_freq_scale, ff, c->rope_attn_factor);
      if (swa_own) rope_table(cs_swa, pos + b, c->rope_dim, theta_swa, c->rope_freq_scale_swa, ff, c->rope_attn_factor);
      else __builtin_memcpy(cs_swa, cs, (size_t)c->rope_dim * 4);
    }
    FLOW_LAST(ntc) {
      if (decode) pre_attn_rows(m, 0, 0, 0, 1);
      ae_flow_complete(&fl);
    }
  }
  FLOW_WAIT(ntc);
  TICK(c->n_layers, AE_OP_EMBED);

  const ae_tensor *pending = 0;   /* the previous dense FFN's post-norm: x += post_norm(tmp) still to do */
  int ready = decode;             /* layer l's q/k/v input is normed and converted */
  for (int l = 0; l < c->n_layers; l++) {
    ae_layer *L = &m->layers[l];
    const attn_cfg ac = layer_attn(m, L);

    /* ---- attention ---- */
    if (!ready) {   /* the previous FFN's residual add, the norm and the conversion for q/k/v (token chunks) */
      FLOW_CHUNKS(ntc, ch) {
        const int b0 = ch * tc, b1 = b0 + tc < n ? b0 + tc : n;
        pre_attn_rows(m, l, pending, b0, b1);
        FLOW_LAST(ntc) ae_flow_complete(&fl);
      }
      FLOW_WAIT(ntc);
    }
    pending = 0;
    ready = 0;
    {   /* q, k, v rows */
      const mm_item fused[] = {{&L->wqkv, m->qkv, qkvd}};
      const mm_item sep[] = {{&L->wq, m->qkv, qkvd}, {&L->wk, m->qkv + qd, qkvd}, {&L->wv, m->qkv + qd + kvd, qkvd}};
      const mm_item *it = L->wqkv.data ? fused : sep;
      const int nit = L->wqkv.data ? 1 : 3;
      const mm_plan pl = mm_plan_of(it, nit, n, nth);
      FLOW_CHUNKS(pl.total, ch) {
        mm_chunk(m, it, &pl, ch, m->xb, D, n);
        FLOW_LAST(pl.total) ae_flow_complete(&fl);
      }
      FLOW_WAIT(pl.total);
    }
    TICK(l, AE_OP_QKV);
    const ae_tensor *wo_ws[] = {&L->wo};
    const int nkv = c->n_kv_heads;
    if (decode) {   /* per KV head: biases, norms, RoPE, K/V store and attention; epilogue: conversion for wo */
      FLOW_CHUNKS(nkv, g) {
        rope_kv_rows(m, L, &ac, pos, 0, g, g + 1, ith);
        attn_item(m, L, &ac, l, 1, pos, 1, g, ith);
        FLOW_LAST(nkv) {
          capture_rows(m, L, AE_CAP_WO, m->xb, qd, 0, 1);
          prep_rows(m, wo_ws, 1, m->xb, qd, qd, 0, 1);
          ae_flow_complete(&fl);
        }
      }
      FLOW_WAIT(nkv);
      TICK(l, AE_OP_ATTENTION);
    } else {
      FLOW_CHUNKS(ntc, ch) {   /* biases, q/k norms, RoPE, K/V into the cache: token chunks */
        const int b0 = ch * tc, b1 = b0 + tc < n ? b0 + tc : n;
        for (int b = b0; b < b1; b++) rope_kv_rows(m, L, &ac, pos, b, 0, nkv, ith);
        FLOW_LAST(ntc) ae_flow_complete(&fl);
      }
      FLOW_WAIT(ntc);
      TICK(l, AE_OP_ROPE_KV);
      const int tb = n > 1 && !L->kvp.n_seg ? AE_ATTN_TOKENS(c) : 1, nblk = (n + tb - 1) / tb, nit = nblk * nkv;
      FLOW_CHUNKS(nit, i) {   /* head-major: consecutive items read the same KV head's rows (in cache for the next) */
        attn_item(m, L, &ac, l, n, pos, tb, (i % nblk) * nkv + i / nblk, ith);
        FLOW_LAST(nit) ae_flow_complete(&fl);
      }
      FLOW_WAIT(nit);
      TICK(l, AE_OP_ATTENTION);
      FLOW_CHUNKS(ntc, ch) {   /* capture, conversion for wo */
        const int b0 = ch * tc, b1 = b0 + tc < n ? b0 + tc : n;
        capture_rows(m, L, AE_CAP_WO, m->xb, qd, b0, b1);
        prep_rows(m, wo_ws, 1, m->xb, qd, qd, b0, b1);
        FLOW_LAST(ntc) ae_flow_complete(&fl);
      }
      FLOW_WAIT(ntc);
    }
    {   /* wo rows; residual add, FFN norm and the conversion for gate / up (decode: the epilogue) */
      const mm_item it[] = {{&L->wo, m->tmp, D}};
      const mm_plan pl = mm_plan_of(it, 1, n, nth);
      const ae_tensor *ws[] = {&L->w_gate, &L->w_up};
      FLOW_CHUNKS(pl.total, ch) {
        mm_chunk(m, it, &pl, ch, m->xb, qd, n);
        FLOW_LAST(pl.total) {
          if (decode) resid_norm_rows(m, m->tmp, &L->attn_post_norm, L->ffn_norm.data, ws, 2, L, AE_CAP_FFN, 0, 1);
          ae_flow_complete(&fl);
        }
      }
      FLOW_WAIT(pl.total);
      if (!decode) {
        FLOW_CHUNKS(ntc, ch) {
          const int b0 = ch * tc, b1 = b0 + tc < n ? b0 + tc : n;
          resid_norm_rows(m, m->tmp, &L->attn_post_norm, L->ffn_norm.data, ws, 2, L, AE_CAP_FFN, b0, b1);
          FLOW_LAST(ntc) ae_flow_complete(&fl);
        }
        FLOW_WAIT(ntc);
      }
    }
    TICK(l, AE_OP_ATTN_OUT);

    /* ---- FFN (SwiGLU / GeGLU). The FFN modules and the compressed variant synchronise by barriers (every thread
     * takes part; ae_flow_live first: a worker still in a finished job must not enter them); a module that refuses
     * the layer (the same answer on every thread, before its first barrier) leaves it to the dense path. ---- */
    int dense = 1;
    if (L->cmp_mode == AE_CMP_VARIANT || L->ffn_mode != AE_FFN_DENSE) {
      if (!ae_flow_live(&fl)) return;
      int fst = AE_OK;
      if (L->cmp_mode == AE_CMP_VARIANT) ffn_variant(m, L, n, ith, nth, pool);
      else if (L->ffn_mode == AE_FFN_FUSED) fst = ae_ffn_fused_run(m, l, n, ith, nth, pool);
      else fst = ae_ffn_saturated_run(m, l, n, ith, nth, pool);
      if (fst && ith == 0 && a->status == AE_OK) a->status = fst;
      dense = fst != AE_OK;
    }
    if (dense) {   /* gate / up rows in chunks aligned to down's activation block, act and conversion per chunk */
      const ae_type dt = (ae_type)L->w_down.type, dvt = ae_traits(dt)->vec_dot_type;
      const int blk = dvt == AE_F32 ? 4 : ae_traits(dvt)->blck_size;
      const int cr = chunk_rows(H, D, n, nth, blk % 4 ? 4 * blk : blk), nch = (H + cr - 1) / cr;
      const int cr_down = chunk_rows(D, H, n, nth, 4), nch_down = (D + cr_down - 1) / cr_down;
      FLOW_CHUNKS(nch, ch) {
        gate_up_chunk(m, L, n, ch * cr, ch * cr + cr < H ? ch * cr + cr : H);
        FLOW_LAST(nch) { L->ffn_active = n * H; ae_flow_complete(&fl); }
      }
      FLOW_WAIT(nch);
      const int last = l + 1 == c->n_layers;
      FLOW_CHUNKS(nch_down, ch) {
        down_chunk(m, L, n, ch * cr_down, ch * cr_down + cr_down < D ? ch * cr_down + cr_down : D);
        FLOW_LAST(nch_down) {   /* decode: the residual add, the next norm and conversion */
          if (decode && !last) pre_attn_rows(m, l + 1, &L->ffn_post_norm, 0, 1);
          else if (decode) pre_out_rows(m, &L->ffn_post_norm, 1, 0, 0, 1);
          ae_flow_complete(&fl);
        }
      }
      FLOW_WAIT(nch_down);
      if (decode) ready = 1;
      else pending = &L->ffn_post_norm;
    }
    if (ith == 0) { L->ffn_active_sum += L->ffn_active; L->ffn_token_sum += n; }
    TICK(l, AE_OP_FFN);
  }

  /* ---- hidden states instead of logits (embeddings): final norm of every row, summed per dimension ---- */
  if (a->hidden_sum) {
    FLOW_CHUNKS(ntc, ch) {
      const int b0 = ch * tc, b1 = b0 + tc < n ? b0 + tc : n;
      for (int b = b0; b < b1; b++) {
        if (pending) {   /* the last dense FFN's residual add */
          post_norm(m->tmp + (size_t)b * D, pending, D, c->norm_eps);
          ae_add(m->x + (size_t)b * D, m->tmp + (size_t)b * D, D);
        }
        ae_rmsnorm(m->xb + (size_t)b * D, m->x + (size_t)b * D, m->output_norm.data, D, c->norm_eps);
      }
      FLOW_LAST(ntc) ae_flow_complete(&fl);
    }
    FLOW_WAIT(ntc);
    const int dc = chunk_rows(D, 0, n, nth, 4), ndc = (D + dc - 1) / dc;
    FLOW_CHUNKS(ndc, ch) {   /* split by dimension, rows summed in order: the same sums on any thread count */
      const int i0 = ch * dc, i1 = i0 + dc < D ? i0 + dc : D;
      for (int i = i0; i < i1; i++) {
        float acc = a->hidden_sum[i];
        for (int b = 0; b < n; b++) acc += m->xb[(size_t)b * D + i];
        a->hidden_sum[i] = acc;
      }
      FLOW_LAST(ndc) ae_flow_complete(&fl);
    }
    FLOW_WAIT(ndc);
    if (ith == 0) m->n_past = pos + n;
    return;
  }

  /* ---- no logits (a prompt chunk before the last): the KV cache is all this forward was for ---- */
  if (a->want_all < 0) {
    if (ith == 0) m->n_past = pos + n;
    TICK(c->n_layers, AE_OP_OUTPUT);
    return;
  }

  /* ---- output head: last token, or all tokens when asked ---- */
  const int all = a->want_all > 0 && c->logits_all;
  const int nout = all ? n : 1;
  const ae_tensor *out = m->output.data ? &m->output : &m->tok_embd;
  if (!ready) {   /* the last FFN's residual add (every token), the output norm and conversion */
    FLOW_CHUNKS(ntc, ch) {
      const int b0 = ch * tc, b1 = b0 + tc < n ? b0 + tc : n;
      pre_out_rows(m, pending, n, all, b0, b1);
      FLOW_LAST(ntc) ae_flow_complete(&fl);
    }
    FLOW_WAIT(ntc);
  }
  {   /* logits rows; Gemma 2's final soft-capping on each chunk's rows; one row: the chunk's summary (out_part) */
    const mm_item it[] = {{out, m->logits, c->vocab}};
    const mm_plan pl = mm_plan_of(it, 1, nout, nth);
    const int parts = nout == 1 && pl.total <= AE_OUT_PARTS(c);
    FLOW_CHUNKS(pl.total, ch) {
      mm_chunk(m, it, &pl, ch, m->xb, D, nout);
      const int r0 = ch * pl.cr[0], r1 = r0 + pl.cr[0] < c->vocab ? r0 + pl.cr[0] : c->vocab;
      if (c->final_softcap > 0.0f)
        for (int b = 0; b < nout; b++) ae_softcap(m->logits + (size_t)b * c->vocab + r0, r1 - r0, c->final_softcap);
      if (parts && r0 < r1) out_part_of(m->logits + r0, r1 - r0, r0, m->out_part + ch);
      FLOW_LAST(pl.total) { m->out_nparts = parts ? pl.total : 0; ae_flow_complete(&fl); }
    }
    FLOW_WAIT(pl.total);
  }
  if (ith == 0) m->n_past = pos + n;
  TICK(c->n_layers, AE_OP_OUTPUT);
}
