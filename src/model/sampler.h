/* Token sampler: repetition penalty, temperature, top-k, top-p, min-p, seeded RNG.
 * Greedy (temperature <= 0) is argmax of the penalised logits. Deterministic for a given seed. */
#ifndef AE_SAMPLER_H
#define AE_SAMPLER_H
#include "core/common.h"

typedef struct {
  float temperature;     /* <= 0: greedy */
  int32_t top_k;         /* <= 0: off */
  float top_p;           /* >= 1: off */
  float min_p;           /* <= 0: off */
  float repeat_penalty;  /* 1: off; llama.cpp semantics: logit > 0 ? logit / p : logit * p */
  int32_t n_recent;      /* tokens in `recent` the penalty applies to */
  const int32_t *recent; /* last tokens (host-maintained window) */
  uint64_t rng;          /* RNG state (splitmix64/xorshift); updated on every draw */
  /* scratch of vocab entries each, host-allocated */
  int32_t *idx;
  float *prob;
} ae_sampler;

int ae_sample(ae_sampler *s, float *logits, int n_vocab);

#endif
