/* q4_K weights repacked at load into groups of 4 rows (kernels.h AE_Q4_K_R4; the relaxed build's layout) x q8_K
 * activations: the repack itself (SIMD, in place), the matvec (decode) and the batched GEMM (prefill). Bit-exact with
 * ae_vec_dot_q4_K_ref on the unpacked rows (ae_matvec_q4_K_r4_ref) for any row range, and so with the q4_K kernels of
 * either build.
 *
 * A record (576 B) = super-block b of the group's 4 rows: d_k, dmin_k (f16), the 6-bit scales and mins re-packed
 * (L0, L1, H: kernels.h, repack_ref.c), then per sub-block j (32 elements) 4 chunks of 16 B laid out as AE_Q4_0_R4's:
 * row k's bytes 4k..4k+3 hold elements 8c + i (low nibble) and 8c + 4 + i (high nibble). Per chunk the activation's
 * bytes x[32j + 8c ..] and x[32j + 8c + 4 ..] are splatted (v128.load32_splat) as the i8 operand of
 * i16x8.relaxed_dot_i8x16_i7x16_s against the nibbles (0..15: the 7-bit operand, exact and host-independent); i16
 * lanes 2k, 2k+1 hold row k's pair sums, 4 chunks add up in i16 (a lane: 16 products, |.| <= 16 * 15 * 128 < 2^15).
 * Then i32x4.dot_i16x8_s against the sub-block's scales (lanes 2k, 2k+1 = sc_k[j], one shuffle of the decoded scales)
 * adds sc_k[j] sum(q x) to row lane k: sumi_q. sumi_m = sum_j m_k[j] (bsums[2j] + bsums[2j+1]) with 4 i32x4.dot_i16x8_s
 * per record. Then per row lane the reference's float sequence
 *   acc += (d_w d_x) (float)sumi_q - (dmin_w d_x) (float)sumi_m
 * with d_w, dmin_w converted exactly (rk4_d; finite halves, which the repack guarantees).
 *
 * The matvec reads 4 groups from the 4 quarters of its row range record by record, chunk-major within a record
 * (splats loaded once for the 4 groups; the 4 sums stored to a volatile slot after each chunk: see
 * dot_q4_0_r4_simd128.c group4s). Where the q4_K file layout's matvec (dot_q4_K_simd128.c) reduces each row's
 * sub-block sums across lanes, here the 4 rows' sums already sit in the lanes. The plain build keeps q4_K (model.c):
 * its entry points here run the reference. */
#include "simd128_util.h"

/* ---- repack (in place; both builds: tests and tools) ---- */
/* 32 nibbles (e0: elements 0..15, e1: 16..31, one per byte) -> the 4 chunks' words of one row: word c = byte i
 * element 8c + i | element 8c + 4 + i << 4 */
AE_INLINE v128 k4_words(v128 e0, v128 e1) {
  const v128 a = wasm_i8x16_shuffle(e0, e1, 0, 1, 2, 3, 8, 9, 10, 11, 16, 17, 18, 19, 24, 25, 26, 27);
  const v128 b = wasm_i8x16_shuffle(e0, e1, 4, 5, 6, 7, 12, 13, 14, 15, 20, 21, 22, 23, 28, 29, 30, 31);
  return wasm_v128_or(a, wasm_i16x8_shl(b, 4));   /* nibbles < 16: no carry across bytes */
}
/* One record from the 4 rows' super-block b (p[k] = row k's block). */
/* The record's first 64 bytes (d, dmin, the scales and mins re-packed): AE_Q4_K_R4 and AE_Q5_K_R4 alike. */
AE_INLINE void pack_rec_k4_head(const uint8_t *const p[4], uint8_t *rec) {
  const ae_block_q4_K *const *bk = (const ae_block_q4_K *const *)p;
  const v128 f = wasm_i8x16_splat(0x0f);
  v128 t[4];
  /* scales: [sc0..7, m0..7] per row; the transpose gives SCa, SCb, MNa, MNb (lane 4k + j) */
  ae_transpose32_4x4(ae_k4_unpack_scales(bk[0]->scales), ae_k4_unpack_scales(bk[1]->scales), ae_k4_unpack_scales(bk[2]->scales),
               ae_k4_unpack_scales(bk[3]->scales), t);
  ae_store(rec + 16, wasm_v128_or(wasm_v128_and(t[0], f), wasm_i16x8_shl(wasm_v128_and(t[1], f), 4)));
  ae_store(rec + 32, wasm_v128_or(wasm_v128_and(t[2], f), wasm_i16x8_shl(wasm_v128_and(t[3], f), 4)));
  ae_store(rec + 48, wasm_v128_or(wasm_v128_or(wasm_v128_and(wasm_u16x8_shr(t[0], 4), wasm_i8x16_splat(0x03)),
                                               wasm_v128_and(wasm_u16x8_shr(t[1], 2), wasm_i8x16_splat(0x0c))),
                                  wasm_v128_or(wasm_v128_and(t[2], wasm_i8x16_splat(0x30)),
                                               wasm_v128_and(wasm_i16x8_shl(t[3], 2), wasm_i8x16_splat((int8_t)0xc0)))));
  for (int k = 0; k < 4; k++) { __builtin_memcpy(rec + 2 * k, &bk[k]->d, 2); __builtin_memcpy(rec + 8 + 2 * k, &bk[k]->dmin, 2); }
}
AE_INLINE void pack_rec_k4(const uint8_t *const p[4], uint8_t *rec) {
  const ae_block_q4_K *const *bk = (const ae_block_q4_K *const *)p;
  const v128 f = wasm_i8x16_splat(0x0f);
  pack_rec_k4_head(p, rec);
  for (int pr = 0; pr < 4; pr++) {   /* sub-blocks 2pr (low nibbles of qs[32pr..]) and 2pr + 1 (high nibbles) */
    v128 lo[4], hi[4];
    for (int k = 0; k < 4; k++) {
      const v128 q0 = ae_load(bk[k]->qs + 32 * pr), q1 = ae_load(bk[k]->qs + 32 * pr + 16);
      lo[k] = k4_words(wasm_v128_and(q0, f), wasm_v128_and(q1, f));
      hi[k] = k4_words(wasm_v128_and(wasm_u16x8_shr(q0, 4), f), wasm_v128_and(wasm_u16x8_shr(q1, 4), f));
    }
    v128 o[4];
    ae_transpose32_4x4(lo[0], lo[1], lo[2], lo[3], o);
    for (int c = 0; c < 4; c++) ae_store(rec + 64 + 16 * (4 * (2 * pr) + c), o[c]);
    ae_transpose32_4x4(hi[0], hi[1], hi[2], hi[3], o);
    for (int c = 0; c < 4; c++) ae_store(rec + 64 + 16 * (4 * (2 * pr + 1) + c), o[c]);
  }
}

static void pack_rec_k4_a(const uint8_t *const p[4], uint8_t *rec, int arg) { (void)arg; pack_rec_k4(p, rec); }
int ae_repack_q4_K_r4(void *W, int nrows, int ncols, void *tmp) {
  return ae_group_repack(W, nrows, ncols / AE_QK_K, sizeof(ae_block_q4_K), AE_RK4_REC, tmp, 0, 2, pack_rec_k4_a, 0);
}
/* AE_Q5_K_R4: the head as AE_Q4_K_R4's (q5_K's d, dmin and scales sit where q4_K's do), then per sub-block j the 8
 * chunks (a 4x4 transpose of 32-bit words of the rows' values 32j .. 32j + 15, and of 32j + 16 .. 32j + 31) packed as
 * AE_Q5_K_X packs a group. */
static void pack_rec_k5_a(const uint8_t *const p[4], uint8_t *rec, int arg) {
  (void)arg;
  pack_rec_k4_head(p, rec);
  v128 q[4][16];
  for (int k = 0; k < 4; k++) ae_q5k_values(p[k], q[k]);
  for (int j = 0; j < 8; j++) {
    v128 u[8];
    ae_transpose32_4x4(q[0][2 * j], q[1][2 * j], q[2][2 * j], q[3][2 * j], u);
    ae_transpose32_4x4(q[0][2 * j + 1], q[1][2 * j + 1], q[2][2 * j + 1], q[3][2 * j + 1], u + 4);
    ae_q5x_pack(u, rec + 64 + 80 * j);
  }
}
int ae_repack_q5_K_r4(void *W, int nrows, int ncols, void *tmp) {
  return ae_group_repack(W, nrows, ncols / AE_QK_K, sizeof(ae_block_q5_K), AE_RK5_REC, tmp, 0, 2, pack_rec_k5_a, 0);
}

#if AE_RELAXED
/* One token's super-block, prepared: xa / xb = [s0..s3, s0..s3] / [s4..s7, s4..s7] (i16, s_j = bsums[2j] +
 * bsums[2j + 1]: the sub-block sums of x), d_x. */
typedef struct { v128 xa, xb; float dx; int32_t pad[3]; } rk4x;

AE_INLINE void prepk(const ae_block_q8_K *x, rk4x *o) {
  const v128 b0 = ae_load(x->bsums), b1 = ae_load(x->bsums + 8);
  const v128 s = wasm_i16x8_add(wasm_i16x8_shuffle(b0, b1, 0, 2, 4, 6, 8, 10, 12, 14), wasm_i16x8_shuffle(b0, b1, 1, 3, 5, 7, 9, 11, 13, 15));
  o->xa = wasm_i64x2_shuffle(s, s, 0, 0);
  o->xb = wasm_i64x2_shuffle(s, s, 1, 1);
  o->dx = x->d;
}

/* the record's scales, decoded: SCa (sc_k[j], lane 4k + j, j < 4) and SCb (sc_k[4 + j]) */
AE_INLINE v128 rk4_sca(const uint8_t *rec) {
  return wasm_v128_or(wasm_v128_and(ae_load(rec + 16), wasm_i8x16_splat(0x0f)), wasm_v128_and(wasm_i16x8_shl(ae_load(rec + 48), 4), wasm_i8x16_splat(0x30)));
}
AE_INLINE v128 rk4_scb(const uint8_t *rec) {
  return wasm_v128_or(wasm_v128_and(wasm_u16x8_shr(ae_load(rec + 16), 4), wasm_i8x16_splat(0x0f)),
                      wasm_v128_and(wasm_i16x8_shl(ae_load(rec + 48), 2), wasm_i8x16_splat(0x30)));
}
/* The record's mins widened to i16 (MNa, MNb: low halves, then high halves), for rk4_mins_w */
AE_INLINE void rk4_mins_i16(const uint8_t *rec, v128 mn[4]) {
  const v128 l1 = ae_load(rec + 32), h = ae_load(rec + 48), f = wasm_i8x16_splat(0x0f), t = wasm_i8x16_splat(0x30);
  const v128 ma = wasm_v128_or(wasm_v128_and(l1, f), wasm_v128_and(h, t));
  const v128 mb = wasm_v128_or(wasm_v128_and(wasm_u16x8_shr(l1, 4), f), wasm_v128_and(wasm_u16x8_shr(h, 2), t));
  mn[0] = wasm_u16x8_extend_low_u8x16(ma); mn[1] = wasm_u16x8_extend_low_u8x16(mb);
  mn[2] = wasm_u16x8_extend_high_u8x16(ma); mn[3] = wasm_u16x8_extend_high_u8x16(mb);
}
/* sumi_m of the 4 rows from the widened mins: sum_j m_k[j] s_j */
AE_INLINE v128 rk4_mins_w(const v128 mn[4], const rk4x *x) {
  const v128 s01 = wasm_i32x4_add(wasm_i32x4_dot_i16x8(mn[0], x->xa), wasm_i32x4_dot_i16x8(mn[1], x->xb));
  const v128 s23 = wasm_i32x4_add(wasm_i32x4_dot_i16x8(mn[2], x->xa), wasm_i32x4_dot_i16x8(mn[3], x->xb));
  return wasm_i32x4_add(wasm_i32x4_shuffle(s01, s23, 0, 2, 4, 6), wasm_i32x4_shuffle(s01, s23, 1, 3, 5, 7));
}
AE_INLINE v128 rk4_mins(const uint8_t *rec, const rk4x *x) {
  v128 mn[4];
  rk4_mins_i16(rec, mn);
  return rk4_mins_w(mn, x);
}
/* acc += (d_w d_x) (float)sumi_q - (dmin_w d_x) (float)sumi_m per row lane (d_w, dmin_w converted) */
AE_INLINE v128 rk4_step(v128 acc, v128 sq, v128 sm, v128 dw, v128 dm, const rk4x *x) {
  const v128 dx = wasm_v128_load32_splat(&x->dx);
  const v128 dall = wasm_f32x4_mul(dw, dx), dmin = wasm_f32x4_mul(dm, dx);
  return wasm_f32x4_add(acc, wasm_f32x4_sub(wasm_f32x4_mul(dall, wasm_f32x4_convert_i32x4(sq)),
                                            wasm_f32x4_mul(dmin, wasm_f32x4_convert_i32x4(sm))));
}
/* d_w (or dmin_w) of the 4 rows, exact. q5_K (five): ae_h4_f32, no subnormal float operand for the halves below 2^-14
 * that q5_K's d often is (weights ~N(0, 0.02) give d ~5e-5; bench/gen-gguf.mjs's files); q4_K's d (~1e-4) and dmin are
 * normal halves as a rule, and its matvec keeps the 3-operation form (the half's bits moved into a float's, d 2^-112,
 * times 2^112: a subnormal half costs a microcode assist on x86, not a wrong bit). */
AE_INLINE v128 rk4_d(const uint8_t *p, int five) {
  return five ? ae_h4_f32(p) : wasm_f32x4_mul(ae_h4_scaled(p), wasm_f32x4_splat(0x1p112f));
}
/* rk4_step on a record of the file's bytes */
AE_INLINE v128 rk4_fma(v128 acc, v128 sq, const uint8_t *rec, const rk4x *x, int five) {
  return rk4_step(acc, sq, rk4_mins(rec, x), rk4_d(rec, five), rk4_d(rec + 8, five), x);
}
/* s += row pair sums of chunk (j, c) of record p against the splats xl, xh */
/* chunk (j, c)'s nibbles: lo (row k's elements 8c + i of the sub-block) and hi (8c + 4 + i) */
AE_INLINE void rk4_nib(const uint8_t *p, int j, int c, v128 *lo, v128 *hi) {
  const v128 v = ae_load(p + 64 + 16 * (4 * j + c)), f = wasm_i8x16_splat(0x0f);
  *lo = wasm_v128_and(v, f);
  *hi = wasm_v128_and(wasm_u16x8_shr(v, 4), f);
}
AE_INLINE v128 rk4_chunk(v128 s, const uint8_t *p, int j, int c, v128 xl, v128 xh) {
  v128 lo, hi;
  rk4_nib(p, j, c, &lo, &hi);
  return wasm_i16x8_add(s, wasm_i16x8_add(ae_rdot16(xl, lo), ae_rdot16(xh, hi)));
}

/* rk4_chunk with the fused dot (kernels.h ae_fused_dot): s + the 4 rows' sums of chunk (j, c) in i32 lanes */
AE_INLINE v128 rk4_chunk32(v128 s, const uint8_t *p, int j, int c, v128 xl, v128 xh) {
  v128 lo, hi;
  rk4_nib(p, j, c, &lo, &hi);
  return ae_rdot(xh, hi, ae_rdot(xl, lo, s));
}
/* sub-block jj's scale of row k in i32 lane k, from SCa / SCb (byte 4k + jj) */
AE_INLINE v128 rk4_sc32(v128 S, int jj, v128 ff) {
  return jj == 3 ? wasm_u32x4_shr(S, 24) : wasm_v128_and(jj ? wasm_u32x4_shr(S, 8 * jj) : S, ff);
}

/* Index vectors M[jj] (jj = 0..3): ae_rswizzle(SCa or SCb, M[jj]) puts scale jj of row k (byte 4k + jj) in i16 lanes
 * 2k and 2k + 1 (high bytes 0). Loaded once per call (rk4_masks): a constant i8x16.shuffle's mask is rebuilt by V8 at
 * every use (4 instructions); this is 1.07-1.16x on the matvec, 1.02x on the GEMM (docs/PERFORMANCE.md "Session 16"). */
static const uint8_t rk4_pm[4][16] = {
#define RK4_PM(jj) { (jj), 0x80, (jj), 0x80, 4 + (jj), 0x80, 4 + (jj), 0x80, 8 + (jj), 0x80, 8 + (jj), 0x80, 12 + (jj), 0x80, 12 + (jj), 0x80 }
  RK4_PM(0), RK4_PM(1), RK4_PM(2), RK4_PM(3)
#undef RK4_PM
};

AE_INLINE void rk4_masks(v128 M[4]) {
  const uint8_t *pm = &rk4_pm[0][0];
  __asm__("" : "+r"(pm));
  for (int i = 0; i < 4; i++) M[i] = ae_load(pm + 16 * i);
}

/* The 4 groups' records at byte offset off: the pointers made opaque (every chunk load takes a constant offset:
 * DESIGN.md "Repacked weights"), their scales decoded into sc, the i32 sums zeroed (group4_k4, group4_k5) */
AE_INLINE void rk4_rec4(const uint8_t *const r[4], size_t off, const uint8_t *p[4], volatile v128 sc[4][2], volatile v128 sq[4]) {
  for (int k = 0; k < 4; k++) {
    const uint8_t *a = r[k] + off;
    __asm__("" : "+r"(a));
    p[k] = a;
    sc[k][0] = rk4_sca(a); sc[k][1] = rk4_scb(a); sq[k] = wasm_i32x4_splat(0);
  }
}

/* One group, super-blocks [0, n) */
AE_INLINE v128 group_k4(const uint8_t *rec, int n, const ae_block_q8_K *x, const rk4x *xa, v128 acc) {
  v128 M[4];
  rk4_masks(M);
  for (int b = 0; b < n; b++, rec += AE_RK4_REC) {
    const int8_t *q = x[b].qs;
    const v128 sa = rk4_sca(rec), sb = rk4_scb(rec);
    v128 sq = wasm_i32x4_splat(0);
#define RK4_SUB1(j) do { \
      v128 s = wasm_i32x4_splat(0); \
      for (int c = 0; c < 4; c++) s = rk4_chunk(s, rec, j, c, wasm_v128_load32_splat(q + 32 * (j) + 8 * c), wasm_v128_load32_splat(q + 32 * (j) + 8 * c + 4)); \
      sq = wasm_i32x4_add(sq, wasm_i32x4_dot_i16x8(s, ae_rswizzle((j) < 4 ? sa : sb, M[(j) & 3]))); \
    } while (0)
    RK4_SUB1(0); RK4_SUB1(1); RK4_SUB1(2); RK4_SUB1(3); RK4_SUB1(4); RK4_SUB1(5); RK4_SUB1(6); RK4_SUB1(7);
#undef RK4_SUB1
    acc = rk4_fma(acc, sq, rec, xa + b, 0);
  }
  return acc;
}
/* Four groups far apart, record by record, chunk-major within a record (see the top); the decoded scales and the
 * i32 sums wait in volatile slots (only touched once per sub-block). */
AE_INLINE void group4_k4(const uint8_t *const r[4], int n, const ae_block_q8_K *x, const rk4x *xa, v128 acc[4], const int fused) {
  volatile v128 sink[4], sc[4][2], sq[4];
  const v128 ff = wasm_i32x4_splat(0xff);
  v128 M[4];
  rk4_masks(M);
  for (int b = 0; b < n; b++) {
    const uint8_t *p[4];
    rk4_rec4(r, (size_t)b * AE_RK4_REC, p, sc, sq);
    const uint8_t *p0 = p[0], *p1 = p[1], *p2 = p[2], *p3 = p[3];
    const int8_t *q = x[b].qs;
#define RK4_SUB4(j) do { \
      v128 s0 = wasm_i32x4_splat(0), s1 = s0, s2 = s0, s3 = s0; \
      _Pragma("clang loop unroll(full)") \
      for (int c = 0; c < 4; c++) { \
        const v128 xl = wasm_v128_load32_splat(q + 32 * (j) + 8 * c), xh = wasm_v128_load32_splat(q + 32 * (j) + 8 * c + 4); \
        if (fused) { \
          s0 = rk4_chunk32(s0, p0, j, c, xl, xh); s1 = rk4_chunk32(s1, p1, j, c, xl, xh); \
          s2 = rk4_chunk32(s2, p2, j, c, xl, xh); s3 = rk4_chunk32(s3, p3, j, c, xl, xh); \
        } else { \
          s0 = rk4_chunk(s0, p0, j, c, xl, xh); s1 = rk4_chunk(s1, p1, j, c, xl, xh); \
          s2 = rk4_chunk(s2, p2, j, c, xl, xh); s3 = rk4_chunk(s3, p3, j, c, xl, xh); \
        } \
        sink[0] = s0; sink[1] = s1; sink[2] = s2; sink[3] = s3; \
      } \
      if (fused) { \
        sq[0] = wasm_i32x4_add(sq[0], wasm_i32x4_mul(s0, rk4_sc32(sc[0][(j) >> 2], (j) & 3, ff))); \
        sq[1] = wasm_i32x4_add(sq[1], wasm_i32x4_mul(s1, rk4_sc32(sc[1][(j) >> 2], (j) & 3, ff))); \
        sq[2] = wasm_i32x4_add(sq[2], wasm_i32x4_mul(s2, rk4_sc32(sc[2][(j) >> 2], (j) & 3, ff))); \
        sq[3] = wasm_i32x4_add(sq[3], wasm_i32x4_mul(s3, rk4_sc32(sc[3][(j) >> 2], (j) & 3, ff))); \
      } else { \
        sq[0] = wasm_i32x4_add(sq[0], wasm_i32x4_dot_i16x8(s0, ae_rswizzle(sc[0][(j) >> 2], M[(j) & 3]))); \
        sq[1] = wasm_i32x4_add(sq[1], wasm_i32x4_dot_i16x8(s1, ae_rswizzle(sc[1][(j) >> 2], M[(j) & 3]))); \
        sq[2] = wasm_i32x4_add(sq[2], wasm_i32x4_dot_i16x8(s2, ae_rswizzle(sc[2][(j) >> 2], M[(j) & 3]))); \
        sq[3] = wasm_i32x4_add(sq[3], wasm_i32x4_dot_i16x8(s3, ae_rswizzle(sc[3][(j) >> 2], M[(j) & 3]))); \
      } \
    } while (0)
    RK4_SUB4(0); RK4_SUB4(1); RK4_SUB4(2); RK4_SUB4(3); RK4_SUB4(4); RK4_SUB4(5); RK4_SUB4(6); RK4_SUB4(7);
#undef RK4_SUB4
    acc[0] = rk4_fma(acc[0], sq[0], p0, xa + b, 0); acc[1] = rk4_fma(acc[1], sq[1], p1, xa + b, 0);
    acc[2] = rk4_fma(acc[2], sq[2], p2, xa + b, 0); acc[3] = rk4_fma(acc[3], sq[3], p3, xa + b, 0);
  }
}

/* ---- AE_Q5_K_R4 (kernels.h): AE_Q4_K_R4's first 64 bytes (the same scale code), then per sub-block j the 80 bytes at
 * 64 + 80j, AE_Q5_K_X's group packing of the 8 chunks U_m (row k's bytes 4k..4k+3 = its values 32j + 4m + e). Chunk
 * pair i < 4: lo = U_i = V_i & 0x1f (activation bytes x[32j + 4i ..]), hi = U_{4+i} = (V_i & 0xe0) >> 5 | (V_4 moved by
 * 3 - 2i) & 0x18 (x[32j + 16 + 4i ..]); the u16 shifts move no neighbouring byte's bit under the masks. Values < 32:
 * a relaxed dot lane is at most 2 * 31 * 128, so two chunk pairs (4 dots) add up in i16, then one i32x4.dot_i16x8
 * against the sub-block's scales; per sub-block two of those. ---- */
AE_INLINE void rk5_vals(const uint8_t *p, int j, int i, v128 m1f, v128 m18, v128 *lo, v128 *hi) {
  const v128 V = ae_load(p + 64 + 80 * j + 16 * i), H = ae_load(p + 64 + 80 * j + 64);
  const v128 h = i == 0 ? wasm_i16x8_shl(H, 3) : i == 1 ? wasm_i16x8_shl(H, 1) : i == 2 ? wasm_u16x8_shr(H, 1) : wasm_u16x8_shr(H, 3);
  *lo = wasm_v128_and(V, m1f);
  *hi = wasm_v128_or(wasm_u16x8_shr(wasm_v128_andnot(V, m1f), 5), wasm_v128_and(h, m18));
}
/* s + the row pair sums of chunk pair i of sub-block j against the splats xl (x[32j + 4i ..]), xh (x[32j + 16 + 4i ..]) */
AE_INLINE v128 rk5_pair(v128 s, const uint8_t *p, int j, int i, v128 xl, v128 xh, v128 m1f, v128 m18) {
  v128 lo, hi;
  rk5_vals(p, j, i, m1f, m18, &lo, &hi);
  return wasm_i16x8_add(s, wasm_i16x8_add(ae_rdot16(xl, lo), ae_rdot16(xh, hi)));
}
/* rk5_pair with the fused dot: s + the row sums of chunk pair i in i32 lanes */
AE_INLINE v128 rk5_pair32(v128 s, const uint8_t *p, int j, int i, v128 xl, v128 xh, v128 m1f, v128 m18) {
  v128 lo, hi;
  rk5_vals(p, j, i, m1f, m18, &lo, &hi);
  return ae_rdot(xh, hi, ae_rdot(xl, lo, s));
}
#define RK5_XL(q, j, i) wasm_v128_load32_splat((q) + 32 * (j) + 4 * (i))
#define RK5_XH(q, j, i) wasm_v128_load32_splat((q) + 32 * (j) + 16 + 4 * (i))

/* One group, super-blocks [0, n) */
AE_INLINE v128 group_k5(const uint8_t *rec, int n, const ae_block_q8_K *x, const rk4x *xa, v128 acc) {
  v128 M[4];
  rk4_masks(M);
  const v128 m1f = wasm_i8x16_splat(0x1f), m18 = wasm_i8x16_splat(0x18);
  for (int b = 0; b < n; b++, rec += AE_RK5_REC) {
    const int8_t *q = x[b].qs;
    __asm__("" : "+r"(q));   /* opaque: the splats fold their constant offsets (1.06x, docs/PERFORMANCE.md "Session 19") */
    const v128 sa = rk4_sca(rec), sb = rk4_scb(rec);
    v128 sq = wasm_i32x4_splat(0);
#pragma clang loop unroll(full)
    for (int j = 0; j < 8; j++) {
      const v128 P = ae_rswizzle(j < 4 ? sa : sb, M[j & 3]);
#pragma clang loop unroll(full)
      for (int h = 0; h < 2; h++) {
        v128 s = wasm_i32x4_splat(0);
        for (int i = 2 * h; i < 2 * h + 2; i++) s = rk5_pair(s, rec, j, i, RK5_XL(q, j, i), RK5_XH(q, j, i), m1f, m18);
        sq = wasm_i32x4_add(sq, wasm_i32x4_dot_i16x8(s, P));
      }
    }
    acc = rk4_fma(acc, sq, rec, xa + b, 1);
  }
  return acc;
}
/* Four groups far apart, record by record, chunk-pair-major within a sub-block (the splats loaded once for the 4
 * groups; the 4 sums stored to a volatile slot after each pair, the decoded scales and the i32 sums in volatile slots) */
AE_INLINE void group4_k5(const uint8_t *const r[4], int n, const ae_block_q8_K *x, const rk4x *xa, v128 acc[4], const int fused) {
  volatile v128 sink[4], sc[4][2], sq[4];
  const v128 ff = wasm_i32x4_splat(0xff);
  v128 M[4];
  rk4_masks(M);
  const v128 m1f = wasm_i8x16_splat(0x1f), m18 = wasm_i8x16_splat(0x18);
  for (int b = 0; b < n; b++) {
    const uint8_t *p[4];
    rk4_rec4(r, (size_t)b * AE_RK5_REC, p, sc, sq);
    const uint8_t *p0 = p[0], *p1 = p[1], *p2 = p[2], *p3 = p[3];
    const int8_t *q = x[b].qs;
    __asm__("" : "+r"(q));   /* opaque: the splats fold their constant offsets (1.06x, docs/PERFORMANCE.md "Session 19") */
#pragma clang loop unroll(full)
    for (int j = 0; j < 8; j++) {
      if (fused) {   /* the sub-block's 8 dots in one i32 chain per group, then the scales by an i32 multiply */
        v128 s0 = wasm_i32x4_splat(0), s1 = s0, s2 = s0, s3 = s0;
#pragma clang loop unroll(full)
        for (int i = 0; i < 4; i++) {
          const v128 xl = RK5_XL(q, j, i), xh = RK5_XH(q, j, i);
          s0 = rk5_pair32(s0, p0, j, i, xl, xh, m1f, m18); s1 = rk5_pair32(s1, p1, j, i, xl, xh, m1f, m18);
          s2 = rk5_pair32(s2, p2, j, i, xl, xh, m1f, m18); s3 = rk5_pair32(s3, p3, j, i, xl, xh, m1f, m18);
          sink[0] = s0; sink[1] = s1; sink[2] = s2; sink[3] = s3;
        }
        sq[0] = wasm_i32x4_add(sq[0], wasm_i32x4_mul(s0, rk4_sc32(sc[0][j >> 2], j & 3, ff)));
        sq[1] = wasm_i32x4_add(sq[1], wasm_i32x4_mul(s1, rk4_sc32(sc[1][j >> 2], j & 3, ff)));
        sq[2] = wasm_i32x4_add(sq[2], wasm_i32x4_mul(s2, rk4_sc32(sc[2][j >> 2], j & 3, ff)));
        sq[3] = wasm_i32x4_add(sq[3], wasm_i32x4_mul(s3, rk4_sc32(sc[3][j >> 2], j & 3, ff)));
        continue;
      }
#pragma clang loop unroll(full)
      for (int h = 0; h < 2; h++) {
        v128 s0 = wasm_i32x4_splat(0), s1 = s0, s2 = s0, s3 = s0;
#pragma clang loop unroll(full)
        for (int i = 2 * h; i < 2 * h + 2; i++) {
          const v128 xl = RK5_XL(q, j, i), xh = RK5_XH(q, j, i);
          s0 = rk5_pair(s0, p0, j, i, xl, xh, m1f, m18); s1 = rk5_pair(s1, p1, j, i, xl, xh, m1f, m18);
          s2 = rk5_pair(s2, p2, j, i, xl, xh, m1f, m18); s3 = rk5_pair(s3, p3, j, i, xl, xh, m1f, m18);
          sink[0] = s0; sink[1] = s1; sink[2] = s2; sink[3] = s3;
        }
        sq[0] = wasm_i32x4_add(sq[0], wasm_i32x4_dot_i16x8(s0, ae_rswizzle(sc[0][j >> 2], M[j & 3])));
        sq[1] = wasm_i32x4_add(sq[1], wasm_i32x4_dot_i16x8(s1, ae_rswizzle(sc[1][j >> 2], M[j & 3])));
        sq[2] = wasm_i32x4_add(sq[2], wasm_i32x4_dot_i16x8(s2, ae_rswizzle(sc[2][j >> 2], M[j & 3])));
        sq[3] = wasm_i32x4_add(sq[3], wasm_i32x4_dot_i16x8(s3, ae_rswizzle(sc[3][j >> 2], M[j & 3])));
      }
    }
    acc[0] = rk4_fma(acc[0], sq[0], p0, xa + b, 1); acc[1] = rk4_fma(acc[1], sq[1], p1, xa + b, 1);
    acc[2] = rk4_fma(acc[2], sq[2], p2, xa + b, 1); acc[3] = rk4_fma(acc[3], sq[3], p3, xa + b, 1);
  }
}

#define RK4_CHUNK 64   /* super-blocks per column chunk of the matvec (16384 columns; 3 KiB of prepared sums) */

/* The matvec of either layout (five: AE_Q5_K_R4) */
AE_INLINE void matvec_k(const void *W, int ncols, const void *xq, float *y, int r0, int r1, const int five) {
  const int nb = ncols / AE_QK_K;
  const size_t rs = (size_t)nb * (five ? sizeof(ae_block_q5_K) : sizeof(ae_block_q4_K)), rec = five ? AE_RK5_REC : AE_RK4_REC;
  const ae_block_q8_K *x = (const ae_block_q8_K *)xq;
  const int g0 = r0 >> 2, g1 = (r1 + 3) >> 2;   /* groups [g0, g1); the first / last may be partial */
  const int gq = (g1 - g0 + 3) / 4;               /* group g0 + i is read together with g0 + i + k gq, k < 4 */
  _Alignas(16) float part[2][4];
  rk4x xs[RK4_CHUNK];
#define RK4_DST(g) ((4 * (g) >= r0 && 4 * (g) + 4 <= r1) ? y + 4 * (g) : part[(g) == g0 ? 0 : 1])
  for (int c0 = 0; c0 < nb; c0 += RK4_CHUNK) {
    const int n = nb - c0 < RK4_CHUNK ? nb - c0 : RK4_CHUNK;
    for (int b = 0; b < n; b++) prepk(x + c0 + b, xs + b);
    for (int i = 0; i < gq; i++) {
      if (g0 + i + 3 * gq < g1) {
        const uint8_t *r[4]; v128 acc[4];
        for (int k = 0; k < 4; k++) { const int g = g0 + i + k * gq; r[k] = (const uint8_t *)W + (size_t)g * 4 * rs + (size_t)c0 * rec; acc[k] = c0 ? ae_load(RK4_DST(g)) : wasm_f32x4_splat(0.0f); }
        if (five) { if (ae_fused_dot & AE_FUSED_TILES) group4_k5(r, n, x + c0, xs, acc, 1); else group4_k5(r, n, x + c0, xs, acc, 0); }
        else if (ae_fused_dot & AE_FUSED_TILES) group4_k4(r, n, x + c0, xs, acc, 1);
        else group4_k4(r, n, x + c0, xs, acc, 0);
        for (int k = 0; k < 4; k++) ae_store(RK4_DST(g0 + i + k * gq), acc[k]);
      } else for (int k = 0; k < 4; k++) {
        const int g = g0 + i + k * gq;
        if (g >= g1) break;
        float *d = RK4_DST(g);
        const uint8_t *w = (const uint8_t *)W + (size_t)g * 4 * rs + (size_t)c0 * rec;
        const v128 a = c0 ? ae_load(d) : wasm_f32x4_splat(0.0f);
        ae_store(d, five ? group_k5(w, n, x + c0, xs, a) : group_k4(w, n, x + c0, xs, a));
      }
    }
  }
#undef RK4_DST
  for (int r = r0; r < r1; r++) {
    const int g = r >> 2;
    if (!(4 * g >= r0 && 4 * g + 4 <= r1)) y[r] = part[g == g0 ? 0 : 1][r & 3];
  }
}
void ae_matvec_rows_q4_K_r4_simd128(const void *W, int ncols, const void *xq, float *y, int r0, int r1) {
  if (r0 < r1) matvec_k(W, ncols, xq, y, r0, r1, 0);
}
void ae_matvec_rows_q5_K_r4_simd128(const void *W, int ncols, const void *xq, float *y, int r0, int r1) {
  if (r0 < r1) matvec_k(W, ncols, xq, y, r0, r1, 1);
}

/* ---- prefill GEMM: tiles of 2 groups (8 rows) x 3 tokens (RK4_G x RK4_T; one group x 3 tokens for a last odd group)
 * on unpacked records (uk4): per (row chunk, column chunk) every record is unpacked once on the stack: its 32 chunks'
 * low and high values (q4_K: the nibbles; q5_K: rk5_vals' 5-bit values per chunk pair), its 8 sub-blocks' scales
 * swizzled for the i16 dot, its mins widened to i16 for rk4_mins' dots, d and dmin converted; then every token group's
 * tiles load them (that decode ran once per tile and token before: 1.2x+, docs/PERFORMANCE.md "Session 24"). Per column
 * chunk the tokens' quants are copied to one stack array (so every splat is a load at a constant offset from one
 * pointer) next to their prepared sums; per record chunk, per token two splats shared by the 2 groups, per group and
 * token two relaxed dots; the i16 sums go to a volatile slot after each chunk (as the matvec), the i32 sums wait in
 * volatile slots. Session 16's tile shapes (docs/PERFORMANCE.md "Session 16"): 2 x 3 against 1 x 4 1.10-1.18x in Node,
 * 1.03x in Chromium at 64 tokens, 1.33x at 17; 2 x 4 spills, 3 x 2 and 2 x 2 1.01-1.02x. Per (row, token) the matvec's
 * integer sums and float sequence: bit-identical. ---- */
#define RK4_GEMM_ROWS 64   /* rows per chunk (16 groups) */
#define RK4_GEMM_CB 8      /* super-blocks per column chunk: 16 x 8 x 1248 B = 156 KiB unpacked, 8 x 3 x 304 B of tokens */
#define RK4_T 3            /* tokens per tile */
#define RK4_G 2            /* groups per tile */
typedef struct { int8_t q[RK4_T][256]; rk4x a[RK4_T]; } rk4t;
/* an unpacked record: q[4j + c] = chunk (pair) c of sub-block j, low / high values; P[j]: sub-block j's scales in i16
 * lanes 2k, 2k + 1 (ae_rswizzle of SCa / SCb); mn: the mins (MNa, MNb) widened, low then high halves; d, dmin: rk4_d */
typedef struct { v128 q[32][2]; v128 P[8]; v128 mn[4]; v128 d, dmin; } uk4;
_Static_assert(sizeof(uk4) == 1248, "uk4 layout");

/* Groups [0, ng) of a row chunk (records at rec0, groups gs bytes apart), super-blocks [0, n) into U[g * RK4_GEMM_CB + b] */
AE_INLINE void unpack_k(const uint8_t *rec0, size_t gs, int ng, int n, uk4 *U, const int five) {
  v128 M[4];
  rk4_masks(M);
  const v128 m1f = wasm_i8x16_splat(0x1f), m18 = wasm_i8x16_splat(0x18);
  for (int g = 0; g < ng; g++) {
    const uint8_t *rec = rec0 + (size_t)g * gs;
    uk4 *o = U + (size_t)g * RK4_GEMM_CB;
    for (int b = 0; b < n; b++, rec += five ? AE_RK5_REC : AE_RK4_REC, o++) {
      for (int j = 0; j < 8; j++)
        for (int c = 0; c < 4; c++) {
          if (five) { rk5_vals(rec, j, c, m1f, m18, &o->q[4 * j + c][0], &o->q[4 * j + c][1]); continue; }
          rk4_nib(rec, j, c, &o->q[4 * j + c][0], &o->q[4 * j + c][1]);
        }
      const v128 sa = rk4_sca(rec), sb = rk4_scb(rec);
      for (int j = 0; j < 8; j++) o->P[j] = ae_rswizzle(j < 4 ? sa : sb, M[j & 3]);
      rk4_mins_i16(rec, o->mn);
      o->d = ae_h4_f32(rec); o->dmin = ae_h4_f32(rec + 8);   /* rk4_d's values; once per record here */
    }
  }
}
/* rk4_fma on an unpacked record: the same operations in the same order */
AE_INLINE v128 uk4_fma(v128 acc, v128 sq, const uk4 *u, const rk4x *x) {
  return rk4_step(acc, sq, rk4_mins_w(u->mn, x), u->d, u->dmin, x);
}

/* G groups (RK4_GEMM_CB unpacked records apart) x T tokens: each token's splats serve the G groups */
#define RK4_TILE(NAME, G, FIVE, T, FUSED)                                                                             \
AE_INLINE void NAME(const uk4 *u, int n, const rk4t *x, volatile v128 *acc) {                                         \
  volatile v128 sink[G * T], sq[G * T];                                                                               \
  for (int b = 0; b < n; b++, u++, x++) {                                                                             \
    for (int i = 0; i < G * T; i++) sq[i] = wasm_i32x4_splat(0);                                                      \
    _Pragma("clang loop unroll(full)")                                                                                \
    for (int j = 0; j < 8; j++) {                                                                                     \
      v128 s[G * T];                                                                                                  \
      for (int i = 0; i < G * T; i++) s[i] = wasm_i32x4_splat(0);                                                     \
      _Pragma("clang loop unroll(full)")                                                                              \
      for (int c = 0; c < 4; c++) {   /* q4_K: chunk c; q5_K: chunk pair c */                                         \
        v128 lo[G], hi[G];                                                                                            \
        for (int g = 0; g < G; g++) { lo[g] = u[g * RK4_GEMM_CB].q[4 * j + c][0]; hi[g] = u[g * RK4_GEMM_CB].q[4 * j + c][1]; } \
        _Pragma("clang loop unroll(full)")                                                                            \
        for (int t = 0; t < T; t++) {                                                                                 \
          const int8_t *q = x->q[t] + 32 * j;                                                                         \
          const v128 xl = wasm_v128_load32_splat(q + (FIVE ? 4 * c : 8 * c)), xh = wasm_v128_load32_splat(q + (FIVE ? 16 + 4 * c : 8 * c + 4)); \
          for (int g = 0; g < G; g++) {                                                                               \
            s[T * g + t] = FUSED ? ae_rdot(xh, hi[g], ae_rdot(xl, lo[g], s[T * g + t]))                               \
                                 : wasm_i16x8_add(s[T * g + t], wasm_i16x8_add(ae_rdot16(xl, lo[g]), ae_rdot16(xh, hi[g]))); \
            sink[T * g + t] = s[T * g + t];                                                                           \
          }                                                                                                           \
        }                                                                                                             \
        if (!FUSED && FIVE && c == 1)   /* q5_K: the first two pairs' i16 sums widen here (values < 32) */            \
          for (int g = 0; g < G; g++) {                                                                               \
            const v128 P = u[g * RK4_GEMM_CB].P[j];                                                                   \
            for (int t = 0; t < T; t++) {                                                                             \
              sq[T * g + t] = wasm_i32x4_add(sq[T * g + t], wasm_i32x4_dot_i16x8(s[T * g + t], P));                   \
              s[T * g + t] = wasm_i32x4_splat(0);                                                                     \
            }                                                                                                         \
          }                                                                                                           \
      }                                                                                                               \
      for (int g = 0; g < G; g++) {   /* fused: the i32 sums times sc_k[j] (P's low i16 halves as i32 lanes) */         \
        const v128 P = u[g * RK4_GEMM_CB].P[j], S = FUSED ? wasm_v128_and(P, wasm_i32x4_splat(0xffff)) : P;            \
        for (int t = 0; t < T; t++)                                                                                   \
          sq[T * g + t] = wasm_i32x4_add(sq[T * g + t], FUSED ? wasm_i32x4_mul(s[T * g + t], S) : wasm_i32x4_dot_i16x8(s[T * g + t], P)); \
      }                                                                                                               \
    }                                                                                                                 \
    for (int g = 0; g < G; g++)                                                                                       \
      for (int t = 0; t < T; t++) acc[T * g + t] = uk4_fma(acc[T * g + t], sq[T * g + t], u + g * RK4_GEMM_CB, &x->a[t]); \
  }                                                                                                                   \
}
/* the tiles of one form (FUSED 0: the i16 dots; 1, names ending in f: the fused dot, kernels.h ae_fused_dot) */
#define RK4_TILES(S, FUSED)                       \
  RK4_TILE(tile_k4##S, 1, 0, 3, FUSED)            \
  RK4_TILE(tile_k4g##S, RK4_G, 0, 3, FUSED)       \
  RK4_TILE(tile_k5##S, 1, 1, 3, FUSED)            \
  RK4_TILE(tile_k5g##S, RK4_G, 1, 3, FUSED)       \
  RK4_TILE(tile_k4_2##S, 1, 0, 2, FUSED)          \
  RK4_TILE(tile_k4g_2##S, RK4_G, 0, 2, FUSED)
RK4_TILES(, 0)
RK4_TILES(f, 1)
#undef RK4_TILES

/* Rows [rc, re) of one column chunk (n super-blocks from c0, unpacked in U) for the kk tokens t0.. (nt real) in xs:
 * tiles of RK4_G groups x kk tokens (kk 3, or 2 for q4_K only: a constant in each copy), then a last odd group. */
AE_INLINE void k_rows(const uk4 *U, int c0, int n, const rk4t *xs, float *y, int y_stride, int t0, int nt, int rc, int re,
                      volatile v128 *acc, const int five, const int kk, const int fused) {
  int r = rc;
  for (; r + 4 * RK4_G <= re; r += 4 * RK4_G) {
    for (int g = 0; g < RK4_G; g++)
      for (int t = 0; t < kk; t++) acc[kk * g + t] = c0 && t < nt ? ae_load(y + (size_t)(t0 + t) * y_stride + r + 4 * g) : wasm_f32x4_splat(0.0f);
    const uk4 *u = U + (size_t)((r - rc) / 4) * RK4_GEMM_CB;
    if (fused) { if (kk == 3) { if (five) tile_k5gf(u, n, xs, acc); else tile_k4gf(u, n, xs, acc); } else tile_k4g_2f(u, n, xs, acc); }
    else if (kk == 3) { if (five) tile_k5g(u, n, xs, acc); else tile_k4g(u, n, xs, acc); }
    else tile_k4g_2(u, n, xs, acc);
    for (int g = 0; g < RK4_G; g++)
      for (int t = 0; t < nt; t++) ae_store(y + (size_t)(t0 + t) * y_stride + r + 4 * g, acc[kk * g + t]);
  }
  for (; r < re; r += 4) {
    for (int t = 0; t < kk; t++) acc[t] = c0 && t < nt ? ae_load(y + (size_t)(t0 + t) * y_stride + r) : wasm_f32x4_splat(0.0f);
    const uk4 *u = U + (size_t)((r - rc) / 4) * RK4_GEMM_CB;
    if (fused) { if (kk == 3) { if (five) tile_k5f(u, n, xs, acc); else tile_k4f(u, n, xs, acc); } else tile_k4_2f(u, n, xs, acc); }
    else if (kk == 3) { if (five) tile_k5(u, n, xs, acc); else tile_k4(u, n, xs, acc); }
    else tile_k4_2(u, n, xs, acc);
    for (int t = 0; t < nt; t++) ae_store(y + (size_t)(t0 + t) * y_stride + r, acc[t]);
  }
}

AE_INLINE void gemm_k(const void *W, int ncols, const void *xq, size_t xq_stride, int nvec, float *y, int y_stride,
                      int a0, int a1, const int five) {
  const int nb = ncols / AE_QK_K;
  const size_t rs = (size_t)nb * (five ? sizeof(ae_block_q5_K) : sizeof(ae_block_q4_K)), rec = five ? AE_RK5_REC : AE_RK4_REC;
  uk4 U[(RK4_GEMM_ROWS / 4) * RK4_GEMM_CB];
  rk4t xs[RK4_GEMM_CB];
  volatile v128 acc[RK4_G * RK4_T];
  for (int rc = a0; rc < a1; rc += RK4_GEMM_ROWS) {
    const int re = rc + RK4_GEMM_ROWS < a1 ? rc + RK4_GEMM_ROWS : a1;
    for (int c0 = 0; c0 < nb; c0 += RK4_GEMM_CB) {
      const int n = nb - c0 < RK4_GEMM_CB ? nb - c0 : RK4_GEMM_CB;
      unpack_k((const uint8_t *)W + (size_t)rc * rs + (size_t)c0 * rec, 4 * rs, (re - rc) / 4, n, U, five);
      for (int t0 = 0, kk; t0 < nvec; t0 += kk) {
        /* q4_K: tiles of 2 tokens until the rest is a multiple of 3, so no tile is partial but for 1 token (2-token
         * tiles for q5_K too made its 3-token tile 0.74x at 64 tokens: not for q5_K) */
        kk = !five && (nvec - t0) % 3 ? 2 : 3;
        const int nt = nvec - t0 < kk ? nvec - t0 : kk;
        for (int t = 0; t < kk; t++) {   /* a last group of fewer tokens repeats its last token (only real ones stored) */
          const ae_block_q8_K *xb = (const ae_block_q8_K *)((const uint8_t *)xq + (size_t)(t0 + (t < nt ? t : nt - 1)) * xq_stride) + c0;
          for (int b = 0; b < n; b++) { __builtin_memcpy(xs[b].q[t], xb[b].qs, 256); prepk(xb + b, &xs[b].a[t]); }
        }
        const int fused = (ae_fused_dot & AE_FUSED_TILES) != 0;
        if (kk == 3) k_rows(U, c0, n, xs, y, y_stride, t0, nt, rc, re, acc, five, 3, fused);
        else k_rows(U, c0, n, xs, y, y_stride, t0, nt, rc, re, acc, five, 2, fused);
      }
    }
  }
}
void ae_matmul_rows_q4_K_r4_simd128(const void *W, int ncols, const void *xq, size_t xq_stride, int nvec, float *y,
                                    int y_stride, int r0, int r1) {
  int a0, a1;   /* whole groups; the rows outside them: the matvec per token */
  if (r0 >= r1 || nvec <= 0 || !ae_group_gemm_edges(ae_matvec_rows_q4_K_r4_simd128, W, ncols, xq, xq_stride, nvec, y, y_stride, r0, r1, &a0, &a1)) return;
  gemm_k(W, ncols, xq, xq_stride, nvec, y, y_stride, a0, a1, 0);
}
void ae_matmul_rows_q5_K_r4_simd128(const void *W, int ncols, const void *xq, size_t xq_stride, int nvec, float *y,
                                    int y_stride, int r0, int r1) {
  int a0, a1;
  if (r0 >= r1 || nvec <= 0 || !ae_group_gemm_edges(ae_matvec_rows_q5_K_r4_simd128, W, ncols, xq, xq_stride, nvec, y, y_stride, r0, r1, &a0, &a1)) return;
  gemm_k(W, ncols, xq, xq_stride, nvec, y, y_stride, a0, a1, 1);
}
#else
/* The plain build keeps q4_K in the file layout (model.c): this layout's kernels are the reference there. */
AE_REF_ENTRY_POINTS(q4_K_r4, ae_matvec_q4_K_r4_ref)
AE_REF_ENTRY_POINTS(q5_K_r4, ae_matvec_q5_K_r4_ref)
#endif
