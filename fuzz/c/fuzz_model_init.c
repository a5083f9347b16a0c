/* libFuzzer target: the C validation of a model (config ranges, tensor table against the config and the memory window,
 * arena layout) on an arbitrary config and tensor table, then, when it is accepted and small, one forward pass over
 * tensors in the window (ASan/UBSan watch every access). Input: 26 config words (int keys 0..12, 15..17 as int32;
 * float keys 13, 14, 18..25 as float32), then records { i8 layer, u8 role, u8 type, u8 pad, u32 offset, i32 ne0, i32 ne1 }. */
#include <stdlib.h>
#include <string.h>
#include "core/status.h"
#include "native_api.h"

#define WIN (1u << 20)
static uint8_t *g_win;
static ae_model *g_m;
static ae_pool g_pool;

static int is_float_key(int k) { return k == AE_CFG_NORM_EPS || k == AE_CFG_ROPE_THETA || (k >= AE_CFG_EMBD_SCALE && k <= AE_CFG_ROPE_FREQ_SCALE_SWA); }

int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n) {
  if (!g_win) {
    g_win = aligned_alloc(64, WIN);
    for (uint32_t i = 0; i < WIN; i++) g_win[i] = (uint8_t)(i * 2654435761u >> 24) & 0x3b; /* small finite-ish values */
    g_m = aligned_alloc(64, (ae_model_sizeof() + 63) & ~(size_t)63);
    ae_native_mem_lo = (uint64_t)(uintptr_t)g_win;
    ae_native_mem_hi = ae_native_mem_lo + WIN;
  }
  if (n < 26 * 4) return 0;
  ae_model *m = g_m;
  ae_model_reset(m);
  for (int k = 0; k < 26; k++) {
    if (is_float_key(k)) { float f; memcpy(&f, d + 4 * k, 4); ae_model_set_config_f(m, k, f); }
    else { int32_t v; memcpy(&v, d + 4 * k, 4); ae_model_set_config_i(m, k, v); }
  }
  size_t p = 26 * 4;
  for (; p + 16 <= n; p += 16) {
    int8_t layer = (int8_t)d[p];
    uint32_t off; int32_t ne0, ne1;
    memcpy(&off, d + p + 4, 4); memcpy(&ne0, d + p + 8, 4); memcpy(&ne1, d + p + 12, 4);
    ae_model_set_tensor(m, layer, d[p + 1] % 24, g_win + (off % WIN & ~3u), d[p + 2] % 20, ne0, ne1);
    if (d[p + 3] & 1) ae_model_set_layer_swa(m, layer, 1);
  }
  const size_t size = ae_model_arena_size(m);
  if (size == 0 || size > (16u << 20)) { ae_model_validate(m); return 0; }
  void *arena = aligned_alloc(64, (size + 63) & ~(size_t)63);
  if (ae_model_init(m, arena, size) == AE_OK) {
    ae_pool_init(&g_pool, 1, 0);
    int32_t tok[2] = {0, 1};
    ae_forward_args *a = ae_native_args();
    *a = (ae_forward_args){m, tok, 1, 0, 0, 0};
    ae_forward(&g_pool, a);
    if (m->cfg.max_batch >= 2 && m->cfg.n_ctx >= 3 && m->cfg.vocab >= 2) {
      *a = (ae_forward_args){m, tok, 2, 1, 1, 0};
      ae_forward(&g_pool, a);
    }
  }
  free(arena);
  return 0;
}
