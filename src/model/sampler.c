#include "model/sampler.h"
#include "kernels/kernels.h"


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

static void sift_down_min(int32_t *h, int n, int i, const float *l) {
  /* min-heap by `better` reversed: root is the worst of the kept candidates */
  for (;;) {
    int w = i, a = 2 * i + 1, b = a + 1;
    if (a < n && better(l, h[w], h[a])) w = a;
    if (b < n && better(l, h[w], h[b])) w = b;
    if (w == i) return;
    int32_t t = h[i]; h[i] = h[w]; h[w] = t; i = w;
  }
}

static int select_top(const float *l, int n_vocab, int k, int32_t *idx) {
  if (k <= 0 || k > n_vocab) k = n_vocab;
  for (int i = 0; i < k; i++) idx[i] = i;
  for (int i = k / 2 - 1; i >= 0; i--) sift_down_min(idx, k, i, l);
  for (int i = k; i < n_vocab; i++)
    if (better(l, i, idx[0])) { idx[0] = i; sift_down_min(idx, k, 0, l); }
  /* heap sort: repeatedly move the worst to the end -> descending order */
  for (int e = k - 1; e > 0; e--) {
    int32_t t = idx[0]; idx[0] = idx[e]; idx[e] = t;
    sift_down_min(idx, e, 0, l);
  }
  return k;
}

static int draw(ae_sampler *s, const float *logits, int n_vocab);

/* log(sum(exp(l))) over the vocabulary, shifted by the max (-inf when every logit is -inf) */
static float log_sum_exp(const float *l, int n) {
  float mx = -__builtin_inff();
  for (int i = 0; i < n; i++) if (l[i] > mx) mx = l[i];
  if (mx == -__builtin_inff()) return mx;
  double sum = 0.0;
  for (int i = 0; i < n; i++) sum += (double)ae_expf(l[i] - mx);
  return mx + ae_logf((float)sum);
}

/* Sample one token id. logits are modified (penalty, bias; not temperature). @return token id, -1 on bad args */
AE_EXPORT int ae_sample(ae_sampler *s, float *logits, int n_vocab) {
  if (n_vocab <= 0) return -1;
  int banned = 0;
  if (s->repeat_penalty != 1.0f && s->repeat_penalty > 0.0f) {
    for (int i = 0; i < s->n_recent; i++) {
      int32_t t = s->recent[i];
      if (t < 0 || t >= n_vocab) continue;
      /* apply once per distinct token: mark by checking earlier occurrences */
      int seen = 0;
      for (int j = 0; j < i; j++) if (s->recent[j] == t) { seen = 1; break; }
      if (seen) continue;
      logits[t] = logits[t] > 0 ? logits[t] / s->repeat_penalty : logits[t] * s->repeat_penalty;
    }
  }
  for (int i = 0; i < s->n_bias; i++) {
    const int32_t t = s->bias_ids[i];
    if (t < 0 || t >= n_vocab) continue;
    if (s->bias_vals[i] <= -100.0f) { logits[t] = -__builtin_inff(); banned = 1; }
    else logits[t] += s->bias_vals[i];
  }
  float lse = 0.0f;
  if (s->n_top >= 0 || banned) {
    lse = log_sum_exp(logits, n_vocab);
    if (lse == -__builtin_inff()) return -1;  /* every token banned */
  }
  if (s->n_top > 0) {
    const int k = select_top(logits, n_vocab, s->n_top < n_vocab ? s->n_top : n_vocab, s->idx);
    for (int i = 0; i < k; i++) { s->top_ids[i] = s->idx[i]; s->top_logprobs[i] = logits[s->idx[i]] - lse; }
  }
  const int tok = draw(s, logits, n_vocab);
  if (s->n_top >= 0) s->logprob = logits[tok] - lse;
  return tok;
}

/* The draw itself: temperature, truncations, RNG (logits already penalised and biased). */
static int draw(ae_sampler *s, const float *logits, int n_vocab) {
  if (!(s->temperature > 0.0f)) return ae_argmax(logits, n_vocab);

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
