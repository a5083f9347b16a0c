/* Per-layer data of the FFN modules (ffn-fused, ffn-saturated), written by the host
 * (js/src/runtime/ffn.ts, through the offsets mirrored in js/src/generated/abi.ts: npm run gen:abi).
 *
 * Gate/up rows are read through a "tile layout": row r of gate is at
 *   gate + (r / tile) * tile_stride + (r % tile) * row_size(gu_type, dim)
 * and row r of up at the same place relative to `up`. Two layouts use it:
 *   - the model's own matrices: gate = w_gate, up = w_up, tile = gu_rows (one tile, no copy);
 *   - interleaved tiles made by the host: tile k holds R gate rows then the R matching up rows
 *     (up = gate + R * row_size, tile_stride = 2 R row_size), so one row kernel call over 2R
 *     consecutive rows gives g and u of a tile (x is prepared once per tile, one weight stream).
 * ffn-saturated in static mode reads a compacted copy of the active rows in the same layout
 * (`active[j]` is the neuron of compacted row j). */
#ifndef AE_FFN_AUX_H
#define AE_FFN_AUX_H
#include "core/common.h"

#define AE_FFN_AUX_MAGIC 0x31464641u /* "AFF1" */

/* down_mode */
enum ae_ffn_down_mode {
  AE_FFN_DOWN_ROWS = 0,    /* "rows": model's row-major w_down over the full h (frozen/skipped h = hfill or 0) */
  AE_FFN_DOWN_NEURON = 1,  /* "neuron": neuron-major copy: y = sum over computed neurons of h_i * down_nm[i] (+ comp) */
};

typedef struct {
  uint32_t magic;          /*  0 AE_FFN_AUX_MAGIC */
  int32_t gu_type;         /*  4 dtype of the gate/up rows read through the tile layout */
  int32_t gu_rows;         /*  8 rows in the tile layout (H, or the active count in static mode) */
  int32_t gu_tile;         /* 12 rows per tile (> 0) */
  uint32_t gu_tile_stride; /* 16 bytes from one tile to the next */
  uint32_t gate;           /* 20 first gate row of tile 0 */
  uint32_t up;             /* 24 first up row of tile 0 */
  uint32_t active;         /* 28 int32[gu_rows], ascending neuron ids (static), else 0 */
  uint32_t hfill;          /* 32 float[H]: h of frozen neurons for AE_FFN_DOWN_ROWS (the calibration mean), 0 = zeros */
  uint32_t comp;           /* 36 float[dim] added to the output with AE_FFN_DOWN_NEURON, 0 = none */
  int32_t down_mode;       /* 40 */
  int32_t down_type;       /* 44 dtype of down_nm rows (f32, f16, q8_0, q4_0) */
  uint32_t down_nm;        /* 48 H rows of dim elements: row i = neuron i's column of w_down */
  float threshold;         /* 52 dynamic: a neuron is computed when |silu(g)| > threshold */
  uint32_t counts;         /* 56 int32[max_threads] scratch for per-thread active counts */
  uint32_t stats;          /* 60 profile: double[H * AE_FFN_ST_N] accumulators */
  uint32_t hist;           /* 64 profile: uint32[max_threads * AE_FFN_HIST_BINS] histogram of |silu(g)| */
  float small_eps;         /* 68 profile: |h| below this counts as small */
  float neuron_max;        /* 72 dynamic with AE_FFN_DOWN_NEURON: use the neuron-major down only when the
                            *    computed fraction of neurons (all tokens of the call) is <= this, else the
                            *    model's row-major down (faster when many neurons are active); >= 1: always */
  int32_t pad_;            /* 76 */
} ae_ffn_aux;              /* 80 bytes */
static_assert(sizeof(ae_ffn_aux) == 80, "ae_ffn_aux layout");

/* Profile accumulators per neuron (doubles): */
enum ae_ffn_stat {
  AE_FFN_ST_SUM = 0,     /* sum h */
  AE_FFN_ST_SUM2 = 1,    /* sum h^2 */
  AE_FFN_ST_SUMABS = 2,  /* sum |h| */
  AE_FFN_ST_MAXABS = 3,  /* max |h| */
  AE_FFN_ST_SMALL = 4,   /* count |h| < small_eps */
  AE_FFN_ST_ZERO = 5,    /* count h == 0 */
  AE_FFN_ST_SUMS = 6,    /* sum |silu(g)| */
  AE_FFN_ST_N = 8,       /* accumulators per neuron (7 used) */
};
/* |silu(g)| histogram, from the float's bits: bin 0 holds values < 2^AE_FFN_HIST_LO (zeros, subnormals
 * included); value v = 2^E (1 + f), 0 <= f < 1, goes to bin (E - LO) * PER + floor(f * PER) + 1, so bin
 * k >= 1 starts at 2^(LO + (k-1) / PER) (1 + ((k-1) % PER) / PER) (integer division); the last bin is
 * open above; NaN goes to the last bin. */
#define AE_FFN_HIST_LO (-40)
#define AE_FFN_HIST_PER 16
#define AE_FFN_HIST_BINS 1024

#endif
