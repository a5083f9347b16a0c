#include "model/sampler.h"
#include "kernels/kernels.h"
#ifdef __wasm_simd128__
#include "kernels/simd128/simd128_util.h"
#endif


AE_EXPORT size_t ae_sampler_sizeof(void) { return sizeof(ae_sampler); }

/* xorshift64* on a state seeded by splitmix64 (the host seeds rng with splitmix64(seed)). */
static uint32_t rng_u32(uint64_t *s) {
  uint64_t x = *s;
  x ^= x >> 12; x ^= x << 25; x ^= x >> 27;
  *s = x;
  return (uint32_t)((x * 0x2545F4914F6CDD1DULL) >> 32);
}
static float rng_f32(uint64_t *s) { return (float)(rng_u32(s) >> 8) * (1.0f / 16777216.0f); }

AE_EXPORT uint64_t ae_seed_rng(uint32_t lo, uint32_t hi) {
  uint64_t z = ((uint64_t)hi << 32 | lo) + 0x9E3779B97F4A7C15ULL;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  z ^= z >> 31;
  return z ? z : 0x9E3779B97F4A7C15ULL;
}

/* candidates idx[0..n) sorted by logit descending (ties: lower id first); heap-select the top k */
static int better(const float *l, int32_t a, int32_t b) { return l[a] > l[b] || (l[a] == l[b] && a < b); }

/* Sift h[i] down a heap of n candidates ordered by `better`: max 1, the best at the root (the full-vocabulary draw
 * pops candidates best first, only as far as it needs them); max 0, the worst at the root (top-k's kept set). */
static void sift_down(int32_t *h, int n, int i, const float *l, int max) {
  for (;;) {
    int w = i, a = 2 * i + 1, b = a + 1;
    if (a < n && (max ? better(l, h[a], h[w]) : better(l, h[w], h[a]))) w = a;
    if (b < n && (max ? better(l, h[b], h[w]) : better(l, h[w], h[b]))) w = b;
    if (w == i) return;
    int32_t t = h[i]; h[i] = h[w]; h[w] = t; i = w;
  }
}
#define sift_down_min(h, n, i, l) sift_down(h, n, i, l, 0)
#define sift_down_max(h, n, i, l) sift_down(h, n, i, l, 1)

static int select_top(const float *l, int n_vocab, int k, int32_t *idx) {
  if (k <= 0 || k > n_vocab) k = n_vocab;
  for (int i = 0; i < k; i++) idx[i] = i;
  for (int i = k / 2 - 1; i >= 0; i--) sift_down_min(idx, k, i, l);
  /* the rest against the worst kept logit, 4 at a time: only a lane above it can enter (a later id that ties
   * the worst is not better), and the threshold only rises */
  int i = k;
#ifdef __wasm_simd128__
  for (; i + 4 <= n_vocab; i += 4) {
    if (!wasm_v128_any_true(wasm_f32x4_gt(wasm_v128_load(l + i), wasm_f32x4_splat(l[idx[0]])))) continue;
    for (int j = i; j < i + 4; j++)
      if (better(l, j, idx[0])) { idx[0] = j; sift_down_min(idx, k, 0, l); }
  }
#endif
  for (; i < n_vocab; i++)
    if (better(l, i, idx[0])) { idx[0] = i; sift_down_min(idx, k, 0, l); }
  /* heap sort: repeatedly move the worst to the end -> descending order */
  for (int e = k - 1; e > 0; e--) {
    int32_t t = idx[0]; idx[0] = idx[e]; idx[e] = t;
    sift_down_min(idx, e, 0, l);
  }
  return k;
}

/* the best of heap h[0..*n) moved to h[*n - 1]; returns it */
static int32_t pop_max(int32_t *h, int *n, const float *l) {
  const int32_t t = h[0];
  h[0] = h[--*n]; h[*n] = t;
  sift_down_max(h, *n, 0, l);
  return t;
}

static int draw(ae_sampler *s, const float *logits, int n_vocab, int sorted);

static double exp_pass(const float *l, int n, float mx, float inv_t, float *prob);

/* log(sum(exp(l))) over the vocabulary, shifted by the max (-inf when every logit is -inf); scratch: n floats */
static float log_sum_exp(const float *l, int n, float *scratch) {
  const float mx = l[ae_argmax(l, n)];
  if (mx == -__builtin_inff()) return mx;
  return mx + ae_logf((float)exp_pass(l, n, mx, 1.0f, scratch));
}

/* The penalties over the recent window, once per distinct token (at its first occurrence), with its count c there:
 * repetition (logit > 0 ? logit / p : logit * p), then logit -= c * frequency_penalty + presence_penalty. The counts
 * live in s->idx (scratch of vocab entries; only the window's tokens are touched): O(window). */
static void apply_penalties(ae_sampler *s, float *logits, int n_vocab) {
  const int rep = s->repeat_penalty != 1.0f && s->repeat_penalty > 0.0f;
  const float fp = s->frequency_penalty, pp = s->presence_penalty;
  if (!rep && fp == 0.0f && pp == 0.0f) return;
  int32_t *cnt = s->idx;
  const int32_t *r = s->recent;
  const int n = s->n_recent;
  for (int i = 0; i < n; i++) if (r[i] >= 0 && r[i] < n_vocab) cnt[r[i]] = 0;
  for (int i = 0; i < n; i++) if (r[i] >= 0 && r[i] < n_vocab) cnt[r[i]]++;
  for (int i = 0; i < n; i++) {
    const int32_t t = r[i];
    if (t < 0 || t >= n_vocab || cnt[t] == 0) continue;
    const int c = cnt[t];
    cnt[t] = 0;   /* done: later occurrences are skipped */
    float l = logits[t];
    if (rep) l = l > 0 ? l / s->repeat_penalty : l * s->repeat_penalty;
    if (fp != 0.0f || pp != 0.0f) l -= (float)c * fp + pp;
    logits[t] = l;
  }
}

/* Sample one token id. logits are modified (penalty, bias; not temperature). @return token id, -1 on bad args */
static int sample(ae_sampler *s, float *logits, int n_vocab, int sorted) {
  if (n_vocab <= 0) return -1;
  int banned = 0;
  apply_penalties(s, logits, n_vocab);
  for (int i = 0; i < s->n_bias; i++) {
    const int32_t t = s->bias_ids[i];
    if (t < 0 || t >= n_vocab) continue;
    if (s->bias_vals[i] <= -100.0f) { logits[t] = -__builtin_inff(); banned = 1; }
    else logits[t] += s->bias_vals[i];
  }
  float lse = 0.0f;
  if (s->n_top >= 0 || banned) {
    lse = log_sum_exp(logits, n_vocab, s->prob);
    if (lse == -__builtin_inff()) return -1;  /* every token banned */
  }
  if (s->n_top > 0) {
    const int k = select_top(logits, n_vocab, s->n_top < n_vocab ? s->n_top : n_vocab, s->idx);
    for (int i = 0; i < k; i++) { s->top_ids[i] = s->idx[i]; s->top_logprobs[i] = logits[s->idx[i]] - lse; }
  }
  const int tok = draw(s, logits, n_vocab, sorted);
  if (s->n_top >= 0) s->logprob = logits[tok] - lse;
  return tok;
}

AE_EXPORT int ae_sample(ae_sampler *s, float *logits, int n_vocab) { return sample(s, logits, n_vocab, 0); }
/* The same draw with every candidate of the full-vocabulary draw sorted first (the specification of draw_full's
 * lazy walk; the tests compare the two) */
AE_EXPORT int ae_sample_sorted(ae_sampler *s, float *logits, int n_vocab) { return sample(s, logits, n_vocab, 1); }

/* The draw with top-k on (k < n_vocab): the k best sorted, softmax over them in that order, then min-p, top-p. */
static int draw_top_k(ae_sampler *s, const float *logits, int n_vocab) {
  int n = select_top(logits, n_vocab, s->top_k, s->idx);
  /* softmax over the candidates at temperature T (max first, in sorted order) */
  const float inv_t = 1.0f / s->temperature;
  const float mx = logits[s->idx[0]];
  double sum = 0.0;
  for (int i = 0; i < n; i++) {
    float p = ae_expf((logits[s->idx[i]] - mx) * inv_t);
    s->prob[i] = p;
    sum += p;
  }
  for (int i = 0; i < n; i++) s->prob[i] = (float)(s->prob[i] / sum);
  while (n > 1 && s->prob[n - 1] == 0.0f) n--;  /* banned tokens (-inf) are never drawn */
  /* min-p: keep p >= min_p * p_max */
  if (s->min_p > 0.0f) {
    const float cut = s->min_p * s->prob[0];
    int k = 1;
    while (k < n && s->prob[k] >= cut) k++;
    n = k;
  }
  /* top-p: smallest prefix with cumulative probability >= top_p */
  if (s->top_p < 1.0f && s->top_p > 0.0f) {
    double cum = 0.0;
    int k = 0;
    while (k < n) { cum += s->prob[k]; k++; if (cum >= s->top_p) break; }
    n = k;
  }
  double total = 0.0;
  for (int i = 0; i < n; i++) total += s->prob[i];
  double r = (double)rng_f32(&s->rng) * total, acc = 0.0;
  for (int i = 0; i < n; i++) {
    acc += s->prob[i];
    if (r < acc) return s->idx[i];
  }
  return s->idx[n - 1];
}

/* prob[i] = exp((l[i] - mx) * inv_t) for i < n (SIMD: simd128_util.h ae_v_exp, the softmax kernel's; portable C:
 * ae_expf); returns their sum in double: 4 partial sums of the ids = 0, 1, 2, 3 mod 4, then added in that order. */
static double exp_pass(const float *l, int n, float mx, float inv_t, float *prob) {
  int i = 0;
  double s4[4] = {0.0, 0.0, 0.0, 0.0};
#ifdef __wasm_simd128__
  const v128 vm = wasm_f32x4_splat(mx), vt = wasm_f32x4_splat(inv_t);
  v128 a = wasm_f64x2_splat(0.0), b = a;
  for (; i + 4 <= n; i += 4) {
    const v128 e = ae_v_exp(wasm_f32x4_mul(wasm_f32x4_sub(wasm_v128_load(l + i), vm), vt));
    wasm_v128_store(prob + i, e);
    a = wasm_f64x2_add(a, wasm_f64x2_promote_low_f32x4(e));
    b = wasm_f64x2_add(b, wasm_f64x2_promote_low_f32x4(wasm_i32x4_shuffle(e, e, 2, 3, 0, 1)));
  }
  s4[0] = wasm_f64x2_extract_lane(a, 0); s4[1] = wasm_f64x2_extract_lane(a, 1);
  s4[2] = wasm_f64x2_extract_lane(b, 0); s4[3] = wasm_f64x2_extract_lane(b, 1);
  if (i < n) {   /* the tail through a buffer padded with -inf (exp -> 0), as the softmax kernel */
    float t[4] = {-__builtin_inff(), -__builtin_inff(), -__builtin_inff(), -__builtin_inff()};
    for (int j = 0; j < n - i; j++) t[j] = l[i + j];
    float e[4];
    wasm_v128_store(e, ae_v_exp(wasm_f32x4_mul(wasm_f32x4_sub(wasm_v128_load(t), vm), vt)));
    for (int j = 0; j < n - i; j++) { prob[i + j] = e[j]; s4[j] += e[j]; }
    i = n;
  }
#endif
  for (; i < n; i++) { prob[i] = ae_expf((l[i] - mx) * inv_t); s4[i & 3] += prob[i]; }
  return ((s4[0] + s4[1]) + s4[2]) + s4[3];
}

/* p[i] = (float)(p[i] / sum) */
static void norm_pass(float *p, int n, double sum) {
  int i = 0;
#ifdef __wasm_simd128__
  const v128 vs = wasm_f64x2_splat(sum);
  for (; i + 4 <= n; i += 4) {
    const v128 e = wasm_v128_load(p + i);
    const v128 lo = wasm_f32x4_demote_f64x2_zero(wasm_f64x2_div(wasm_f64x2_promote_low_f32x4(e), vs));
    const v128 hi = wasm_f32x4_demote_f64x2_zero(wasm_f64x2_div(wasm_f64x2_promote_low_f32x4(wasm_i32x4_shuffle(e, e, 2, 3, 0, 1)), vs));
    wasm_v128_store(p + i, wasm_i32x4_shuffle(lo, hi, 0, 1, 4, 5));
  }
#endif
  for (; i < n; i++) p[i] = (float)(p[i] / sum);
}

/* The draw from candidates list[0], list[step], ... (n of them; step 1 or -1) with weights prob[id] summing to total:
 * the first whose running sum exceeds rng x total (the last one when rounding leaves the sum short). */
static int32_t walk_draw(ae_sampler *s, const int32_t *list, int n, int step, const float *prob, double total) {
  const double r = (double)rng_f32(&s->rng) * total;
  double acc = 0.0;
  for (int i = 0; i < n; i++) {
    const int32_t t = list[i * step];
    acc += prob[t];
    if (r < acc) return t;
  }
  return list[(n - 1) * step];
}

/* Pops of the top-p walk before the rest of the candidates is sorted at once (a pop costs ~log2(vocabulary) sifts) */
#define AE_TOPP_POPS 512

/* Radix key of a logit: ascending key = descending logit (finite or -inf; -0 as +0, which compare equal) */
static uint32_t desc_key(float l) {
  uint32_t u;
  if (l == 0.0f) l = 0.0f;
  __builtin_memcpy(&u, &l, 4);
  u = (u & 0x80000000u) ? ~u : (u | 0x80000000u);
  return ~u;
}

/* The top-p walk after n pops (s->idx[m - n .. m) hold them, best last; cum their sum) when top_p was not reached:
 * the popped ones are copied best first to ord = s->idx + n_vocab, the candidates not popped (worse than the last
 * popped by `better`) appended in id order and sorted by an LSD radix sort on the logit (stable: ties stay in id
 * order), s->idx as its buffer; then the walk and the draw go on through ord. s->idx holds 2 x vocab entries. */
static int draw_sorted_rest(ae_sampler *s, const float *logits, int n_vocab, float cut, int n, int m, double cum) {
  int32_t *h = s->idx, *ord = s->idx + n_vocab;
  const float *prob = s->prob;
  for (int j = 0; j < n; j++) ord[j] = h[m - 1 - j];
  const int32_t last = ord[n - 1];
  int r = n;
  for (int i = 0; i < n_vocab; i++) {
    const float p = prob[i];
    if (p > 0.0f && p >= cut && logits[i] > -__builtin_inff() && better(logits, last, i)) ord[r++] = i;
  }
  int32_t *a = ord + n, *b = h;
  const int cnt = r - n;
  for (int shift = 0; shift < 32; shift += 8) {
    int c[257] = {0};
    for (int i = 0; i < cnt; i++) c[((desc_key(logits[a[i]]) >> shift) & 255) + 1]++;
    for (int i = 0; i < 256; i++) c[i + 1] += c[i];
    for (int i = 0; i < cnt; i++) b[c[(desc_key(logits[a[i]]) >> shift) & 255]++] = a[i];
    int32_t *t = a; a = b; b = t;
  }
  /* 4 passes: the sorted rest is back in ord[n..r) */
  int k = n;
  while (k < r) {
    cum += prob[ord[k]];
    k++;
    if (cum >= s->top_p) break;
  }
  return walk_draw(s, ord, k, 1, prob, cum);
}

/* The draw over the whole vocabulary (top-k off) without sorting it: prob[t] = softmax(logits / T) by token id
 * (the sum in id order); the candidates are the tokens with p > 0, a logit above -inf (a ban) and (min-p)
 * p >= min_p * p_max. Without top-p the draw walks them in id order (O(vocabulary)); with it, top-p and the draw
 * walk them best first (logit descending, ties: lower id), popped from a max-heap only as far as the top_p mass
 * reaches, which for a trained model is a few candidates (a full sort of Qwen2.5's 152K vocabulary took 40 ms a
 * token). `sorted` 1: the vocabulary sorted first by select_top (ae_sample_sorted, the specification the tests
 * compare against): the same candidates in the same order and the same sums, so the same token. */
static int draw_full(ae_sampler *s, const float *logits, int n_vocab, int sorted) {
  const int am = ae_argmax(logits, n_vocab);   /* the first index of the maximum: the best candidate */
  const float mx = logits[am];
  if (!(mx > -__builtin_inff() && mx < __builtin_inff())) return am;
  const float inv_t = 1.0f / s->temperature;
  float *prob = s->prob;
  const double sum = exp_pass(logits, n_vocab, mx, inv_t, prob);
  const float cut = s->min_p > 0.0f ? s->min_p * (float)(prob[am] / sum) : 0.0f;
  int32_t *h = s->idx;
  int m = 0;
  double total = 0.0;   /* of the candidates, in id order */
  norm_pass(prob, n_vocab, sum);
  for (int i = 0; i < n_vocab; i++) {
    const float p = prob[i];
    if (p > 0.0f && p >= cut && logits[i] > -__builtin_inff()) { h[m++] = i; total += p; }   /* banned: never */
  }
  if (m == 0) return am;
  if (!(s->top_p < 1.0f && s->top_p > 0.0f)) return walk_draw(s, h, m, 1, prob, total);   /* no top-p: in id order */
  int hn = m;
  if (sorted) {   /* the specification: the whole vocabulary sorted (select_top), its candidates best first at h[m - 1],
                   * h[m - 2], ... as the pops would leave them */
    select_top(logits, n_vocab, n_vocab, h);
    int j = 0;
    for (int i = 0; i < n_vocab; i++) {
      const int32_t t = h[i];
      if (prob[t] > 0.0f && prob[t] >= cut && logits[t] > -__builtin_inff()) h[j++] = t;
    }
    for (int a = 0, b = j - 1; a < b; a++, b--) { const int32_t t = h[a]; h[a] = h[b]; h[b] = t; }
    hn = 0;
  } else {
    for (int i = m / 2 - 1; i >= 0; i--) sift_down_max(h, m, i, logits);
  }
  /* top-p: the smallest best-first prefix whose sum (in that order) reaches top_p; the draw walks it best first.
   * hn: candidates still in the heap h[0..hn); the popped ones are h[m - 1], h[m - 2], ..., h[hn]. After
   * AE_TOPP_POPS pops short of top_p (flat logits: random weights, high temperatures) the rest is radix-sorted
   * instead (draw_sorted_rest): the same order, so the same sums. */
  int n = 0;
  double cum = 0.0;
  while (n < m) {
    if (hn == m - n) {
      if (n >= AE_TOPP_POPS) return draw_sorted_rest(s, logits, n_vocab, cut, n, m, cum);
      pop_max(h, &hn, logits);
    }
    cum += prob[h[m - 1 - n]];
    n++;
    if (cum >= s->top_p) break;
  }
  return walk_draw(s, h + m - 1, n, -1, prob, cum);
}

/* The draw itself: temperature, truncations, RNG (logits already penalised and biased). */
static int draw(ae_sampler *s, const float *logits, int n_vocab, int sorted) {
  if (!(s->temperature > 0.0f)) return ae_argmax(logits, n_vocab);
  if (s->top_k > 0 && s->top_k < n_vocab) return draw_top_k(s, logits, n_vocab);
  return draw_full(s, logits, n_vocab, sorted);
}
