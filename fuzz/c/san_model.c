/* Sanitizer run of a whole model (tests/sanitizers.test.mjs): the portable C (scalar kernels) built natively with
 * -fsanitize=address,undefined runs a model the test wrote as a dump, prefill then decode, and writes the logits of
 * every step. Dump (little-endian): "AESM", 26 config words (int or float32 by key), u32 n_tensors, per tensor
 * { i32 layer, i32 role, i32 type, i32 ne0, i32 ne1, u32 swa_mask_unused, u64 bytes, data }, u32 n_tokens, i32 tokens.
 * Usage: san-model DUMP OUT.f32 (OUT: prefill logits of the whole prompt, then one row per decode step). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "core/status.h"
#include "native_api.h"

static uint8_t *slurp(const char *f, size_t *n) {
  FILE *fp = fopen(f, "rb");
  if (!fp) { perror(f); exit(2); }
  fseek(fp, 0, SEEK_END); *n = (size_t)ftell(fp); fseek(fp, 0, SEEK_SET);
  uint8_t *b = malloc(*n);
  if (fread(b, 1, *n, fp) != *n) { perror(f); exit(2); }
  fclose(fp);
  return b;
}
static int is_float_key(int k) { return k == AE_CFG_NORM_EPS || k == AE_CFG_ROPE_THETA || (k >= AE_CFG_EMBD_SCALE && k <= AE_CFG_ROPE_FREQ_SCALE_SWA); }

int main(int argc, char **argv) {
  if (argc < 3) { fprintf(stderr, "usage: san-model DUMP OUT\n"); return 2; }
  size_t n; uint8_t *b = slurp(argv[1], &n);
  if (n < 4 + 26 * 4 + 4 || memcmp(b, "AESM", 4)) { fprintf(stderr, "bad dump\n"); return 2; }
  ae_model *m = aligned_alloc(64, (ae_model_sizeof() + 63) & ~(size_t)63);
  ae_model_reset(m);
  size_t p = 4;
  for (int k = 0; k < 26; k++, p += 4) {
    int st;
    if (is_float_key(k)) { float f; memcpy(&f, b + p, 4); st = ae_model_set_config_f(m, k, f); }
    else { int32_t v; memcpy(&v, b + p, 4); st = ae_model_set_config_i(m, k, v); }
    if (st) { fprintf(stderr, "config key %d: status %d\n", k, st); return 1; }
  }
  uint32_t nt; memcpy(&nt, b + p, 4); p += 4;
  /* tensors in one 64-byte aligned window (the "linear memory") */
  size_t total = 0, q = p;
  for (uint32_t i = 0; i < nt; i++) { uint64_t by; memcpy(&by, b + q + 24, 8); q += 32 + by; total += (by + 63) & ~(uint64_t)63; }
  uint8_t *win = aligned_alloc(64, total + 64);
  ae_native_mem_lo = (uint64_t)(uintptr_t)win; ae_native_mem_hi = ae_native_mem_lo + total;
  size_t w = 0;
  for (uint32_t i = 0; i < nt; i++) {
    int32_t h[6]; uint64_t by;
    memcpy(h, b + p, 24); memcpy(&by, b + p + 24, 8); p += 32;
    memcpy(win + w, b + p, by); p += by;
    if (h[5]) ae_model_set_layer_swa(m, h[0], 1);
    int st = ae_model_set_tensor(m, h[0], h[1], win + w, h[2], h[3], h[4]);
    if (st) { fprintf(stderr, "tensor %u: status %d\n", i, st); return 1; }
    w += (by + 63) & ~(uint64_t)63;
  }
  uint32_t ntok; memcpy(&ntok, b + p, 4); p += 4;
  int32_t *tok = malloc(4 * (ntok ? ntok : 1)); memcpy(tok, b + p, 4 * ntok);
  size_t as = ae_model_arena_size(m);
  if (!as) { fprintf(stderr, "arena size 0\n"); return 1; }
  void *arena = aligned_alloc(64, (as + 63) & ~(size_t)63);
  int st = ae_model_init(m, arena, as);
  if (st) { fprintf(stderr, "model init: status %d\n", st); return 1; }
  ae_pool pool; ae_pool_init(&pool, 1, 0);
  FILE *out = fopen(argv[2], "wb");
  const int vocab = m->cfg.vocab, half = (int)ntok / 2 > 0 ? (int)ntok / 2 : 1;
  /* prefill the first half in one batch (capped by max_batch), then decode the rest one token at a time */
  int pos = 0;
  while (pos < half) {
    int c = half - pos < m->cfg.max_batch ? half - pos : m->cfg.max_batch;
    ae_forward_args *a = ae_native_args();
    *a = (ae_forward_args){m, tok + pos, c, pos, 0, 0};
    if ((st = ae_forward(&pool, a))) { fprintf(stderr, "forward at %d: status %d\n", pos, st); return 1; }
    pos += c;
  }
  fwrite(ae_model_logits(m), 4, (size_t)vocab, out);
  for (; pos < (int)ntok; pos++) {
    ae_forward_args *a = ae_native_args();
    *a = (ae_forward_args){m, tok + pos, 1, pos, 0, 0};
    if ((st = ae_forward(&pool, a))) { fprintf(stderr, "forward at %d: status %d\n", pos, st); return 1; }
    fwrite(ae_model_logits(m), 4, (size_t)vocab, out);
  }
  fclose(out);
  free(arena); free(win); free(tok); free(b); free(m);
  printf("ok %u tokens\n", ntok);
  return 0;
}
