/* Token sampler: repetition penalty, logit bias, temperature, top-k, top-p, min-p, seeded RNG; optionally the
 * log-probabilities of the sampled token and of the most probable alternatives.
 * Order: penalties (repetition, then frequency and presence, per distinct token of the recent window, as llama.cpp's
 * penalties sampler) -> bias -> [log-probabilities] -> temperature -> top-k -> min-p -> top-p -> draw.
 * Greedy (temperature <= 0) is argmax of the penalised, biased logits. Deterministic for a given seed.
 * With top-k on, softmax over the k best; with it off, over the whole vocabulary (summed in token id order), and
 * min-p, top-p and the draw walk the candidates best first (logit descending, ties: lower id) only as far as
 * they need (sampler.c draw_full): no sort of the vocabulary per token.
 * Log-probabilities are the log-softmax (temperature 1) of the logits after penalty and bias, before
 * temperature and truncation: the model's distribution as the caller steered it, as OpenAI reports them. */
#ifndef AE_SAMPLER_H
#define AE_SAMPLER_H
#include "core/common.h"

typedef struct {
  float temperature;     /* <= 0: greedy */
  int32_t top_k;         /* <= 0: off */
  float top_p;           /* >= 1: off */
  float min_p;           /* <= 0: off */
  float repeat_penalty;  /* 1: off; llama.cpp semantics: logit > 0 ? logit / p : logit * p */
  float frequency_penalty; /* 0: off; OpenAI / llama.cpp: logit -= frequency_penalty * (count of the token in recent) */
  float presence_penalty;  /* 0: off; logit -= presence_penalty once for a token that occurs in recent */
  int32_t n_recent;      /* tokens in `recent` the penalties apply to */
  const int32_t *recent; /* last tokens (host-maintained window) */
  uint64_t rng;          /* RNG state (splitmix64/xorshift); updated on every draw */
  /* scratch, host-allocated: idx 2 x vocab entries, prob vocab entries */
  int32_t *idx;
  float *prob;
  /* logit bias: logits[bias_ids[i]] += bias_vals[i] (ids outside the vocabulary are skipped);
   * a bias <= -100 bans the token (its logit becomes -inf) */
  int32_t n_bias;
  const int32_t *bias_ids;
  const float *bias_vals;
  /* log-probabilities: n_top < 0 off; else the sampled token's (logprob) and the n_top most probable
   * tokens' (top_ids / top_logprobs, most probable first, host buffers of n_top entries; n_top <= vocab) */
  int32_t n_top;
  float logprob;           /* out */
  int32_t *top_ids;        /* out */
  float *top_logprobs;     /* out */
} ae_sampler;

/* @return the token id; -1 when n_vocab <= 0 or the bias bans every token */
int ae_sample(ae_sampler *s, float *logits, int n_vocab);
/* The same token as ae_sample, with top-k off every candidate sorted first (the specification of ae_sample's
 * lazy best-first walk; tests compare the two) */
int ae_sample_sorted(ae_sampler *s, float *logits, int n_vocab);

#endif
