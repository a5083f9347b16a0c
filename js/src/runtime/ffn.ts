/**
 * Host side of the FFN modules (src/kernels/ffn_aux.h): builds each layer's aux data in wasm memory
 * after load (interleaved gate/up tiles, compacted rows of active neurons, neuron-major down, masks,
 * thresholds, profile accumulators) and switches layers between modes. Every buffer is allocated once
 * (never freed) and cached, so switching back and forth costs nothing; `auxBytes` counts them. Every buffer is
 * reserved through Engine.allocAfterLoad: it is part of the memory plan (plan.ffn) and refused with out_of_memory,
 * before the memory grows, when it would pass the plan's limit (4 GiB or maxMemory).
 *
 * Modes: dense (core), fused (ffn-fused), static / dynamic / profile (ffn-saturated).
 */
import { AetherError } from '../errors.js';
import { FfnMode, DTYPE_IDS } from './abi.js';
import { AUX, AUX_MAGIC, DOWN_MODE, HIST, ST } from '../generated/abi.js';
import type { Engine, TensorInfo } from './engine.js';
import { DTYPES, rowBytes, type DTypeName } from '../formats/dtypes.js';
import { decodeToF32, encodeFromF32 } from '../formats/quantize.js';
import { b64decode, b64encode, b64ToF32, checkSaturation, maskBit, type SaturationLevel, type SaturationMeta } from '../formats/saturation.js';

/** ae_ffn_aux field offsets, down modes, profile accumulators and histogram bins: src/kernels/ffn_aux.h,
 * mirrored in ../generated/abi.ts. */
export { AUX, AUX_MAGIC, DOWN_MODE, HIST, ST };

/** Lower edge of histogram bin k (bin 0: [0, 2^LO)). */
export function histEdge(k: number): number {
  if (k <= 0) return 0;
  const e = HIST.LO + Math.floor((k - 1) / HIST.PER), f = ((k - 1) % HIST.PER) / HIST.PER;
  return 2 ** e * (1 + f);
}

export type FfnModeName = 'dense' | 'fused' | 'static' | 'dynamic';
export type DownLayout = 'auto' | 'rows' | 'neuron';
export type NeuronDownDtype = 'f32' | 'f16' | 'q8_0' | 'q4_0';

export interface FfnOptions {
  /** fused / dynamic: rows per interleaved gate/up tile made at load (0: read the model's gate and up in place, no copy). Default 0. */
  tile?: number;
  /** static/dynamic: saturation level of the metadata to use (the one with the nearest sparsity). */
  sparsity?: number;
  /** static/dynamic: down projection: 'neuron' (neuron-major copy: skipped neurons cost nothing, but each
   *  computed one costs 2-3x a row-major weight), 'rows' (the model's down over the full h, skipped h =
   *  calibration mean (static) or 0; bit-exact dense when nothing is skipped), or 'auto' (default): neuron
   *  when the computed fraction is at most `neuronMax` (dynamic: decided per call in C), else rows. */
  down?: DownLayout;
  /** 'auto' down: largest computed fraction for which the neuron-major down is used (default per copy dtype, NEURON_MAX). */
  neuronMax?: number;
  /** dtype of the neuron-major down copy (default: f32 for f32 models, f16 otherwise). */
  downDtype?: NeuronDownDtype;
  /** static: add the calibration mean of frozen neurons (compensation bias / hfill). Default true. */
  compensation?: boolean;
  /** static: frozen masks per layer (bit i of byte i>>3, LSB first = neuron i frozen), overriding the metadata. */
  masks?: (Uint8Array | null | undefined)[];
  /** dynamic: thresholds on |silu(g)| per layer (or one for all), overriding the metadata. */
  threshold?: number | number[];
}


/** Break-even computed fractions of the neuron-major down against the row-major q8_0 down, measured on
 *  tiny-llama-a (bench/ffn.mjs, docs/PERFORMANCE.md): above them the model's own down is faster. */
export const NEURON_MAX: Record<NeuronDownDtype, number> = { f32: 0.4, f16: 0.37, q8_0: 0.35, q4_0: 0.35 };

const MODULE_OF: Record<string, string> = { fused: 'ffn-fused', static: 'ffn-saturated', dynamic: 'ffn-saturated', profile: 'ffn-saturated' };

export class FfnRuntime {
  readonly engine: Engine;
  /** The file's saturation section as stored (checked by checkSaturation when a mode first needs it). */
  private readonly rawSaturation: unknown;
  private checkedSaturation?: SaturationMeta;
  /** Bytes of aux data allocated in wasm memory so far (copies of weights included). */
  auxBytes = 0;
  readonly modes: string[];
  private cache = new Map<string, number>();
  private guCopies = new Map<string, { ptr: number; rs: number; stride: number }>();
  private ilCache = new Map<string, { ptr: number; type: number; n: number; stride: number; rs: number }>();
  private downF32 = new Map<number, Float32Array>();
  private defaults: Record<string, FfnOptions> = {};
  private profileAux: { aux: number; stats: number; hist: number }[] = [];

  constructor(engine: Engine, saturation?: unknown) {
    this.engine = engine;
    this.rawSaturation = saturation;
    this.modes = Array(engine.config.n_layers).fill('dense');
  }

  private get D(): number { return this.engine.config.dim; }
  private get H(): number { return this.engine.config.hidden_dim; }
  private get L(): number { return this.engine.config.n_layers; }

  private tensor(layer: number, what: 'ffn_gate' | 'ffn_up' | 'ffn_down'): TensorInfo {
    const t = this.engine.tensorInfo(`blk.${layer}.${what}.weight`);
    if (!t) throw new AetherError('format_error', `tensor blk.${layer}.${what}.weight is missing`);
    return t;
  }

  private alloc(bytes: number, align = 64): number {
    const p = this.engine.allocAfterLoad(Math.max(bytes, 4), align, 'ffn', 'FFN module data');
    this.auxBytes += bytes;
    return p;
  }

  private cached(key: string, make: () => number): number {
    let p = this.cache.get(key);
    if (p === undefined) { p = make(); this.cache.set(key, p); }
    return p;
  }

  private setU32(p: number, v: number): void { this.engine.heap.view().setUint32(p, v, true); }
  private setI32(p: number, v: number): void { this.engine.heap.view().setInt32(p, v, true); }
  private setF32(p: number, v: number): void { this.engine.heap.view().setFloat32(p, v, true); }

  private newAux(): number {
    const p = this.alloc(AUX.SIZE, 16);
    this.engine.heap.u8(p, AUX.SIZE).fill(0);
    this.setU32(p + AUX.MAGIC, AUX_MAGIC);
    return p;
  }

  private requireModule(mode: string): void {
    const mod = MODULE_OF[mode];
    if (mod && !this.engine.hasModule(mod)) {
      throw new AetherError('invalid_argument', `FFN mode '${mode}' needs the '${mod}' module: load the model with { modules: ['${mod}'] }`);
    }
  }

  /** Gate/up rows of `rows` (neuron ids, ascending) copied as interleaved tiles of `tile` rows. */
  private interleave(layer: number, rows: Int32Array | null, tile: number): { ptr: number; type: number; n: number; stride: number; rs: number } {
    if (!rows) {
      const k = `il:${layer}:${tile}`;
      let r = this.ilCache.get(k);
      if (!r) { r = this.interleaveRows(layer, null, tile); this.ilCache.set(k, r); }
      return r;
    }
    return this.interleaveRows(layer, rows, tile);
  }

  private interleaveRows(layer: number, rows: Int32Array | null, tile: number): { ptr: number; type: number; n: number; stride: number; rs: number } {
    const g = this.tensor(layer, 'ffn_gate'), u = this.tensor(layer, 'ffn_up');
    if (g.dtype !== u.dtype) throw new AetherError('unsupported', `layer ${layer}: ffn_gate (${g.dtype}) and ffn_up (${u.dtype}) differ in dtype`);
    const rs = rowBytes(g.dtype as DTypeName, this.D);
    const n = rows ? rows.length : this.H;
    const tiles = Math.ceil(n / tile), stride = 2 * tile * rs;
    const ptr = this.alloc(Math.max(1, tiles) * stride);
    const gs = this.engine.tensorBytes(g.name), us = this.engine.tensorBytes(u.name);
    const dst = this.engine.heap.u8(ptr, tiles * stride);
    for (let j = 0; j < n; j++) {
      const r = rows ? rows[j] : j, t = Math.floor(j / tile), k = j % tile;
      dst.set(gs.subarray(r * rs, (r + 1) * rs), t * stride + k * rs);
      dst.set(us.subarray(r * rs, (r + 1) * rs), t * stride + (tile + k) * rs);
    }
    return { ptr, type: DTYPE_IDS[g.dtype], n, stride, rs };
  }

  /** w_down as f32 (rows = dim, each of hidden values). Only the last layer's is kept (JS memory: 4 bytes
   *  per weight), since copies and compensations are built layer by layer. */
  private downDense(layer: number): Float32Array {
    let w = this.downF32.get(layer);
    if (!w) {
      const t = this.tensor(layer, 'ffn_down');
      w = decodeToF32(t.dtype as DTypeName, this.engine.tensorBytes(t.name), this.D * this.H);
      this.downF32.clear();
      this.downF32.set(layer, w);
    }
    return w;
  }

  /** Neuron-major copy of w_down in `dtype`: row i = neuron i's column (dim values). */
  private downNeuron(layer: number, dtype: NeuronDownDtype): number {
    return this.cached(`down:${layer}:${dtype}`, () => {
      const D = this.D, H = this.H;
      if (D % 32) throw new AetherError('unsupported', `neuron-major down needs dim % 32 == 0 (dim ${D})`);
      const w = this.downDense(layer);
      if (dtype === 'f16') {
        // the kernel's fast f16 conversion is exact for finite halves only
        for (let i = 0; i < w.length; i++) if (!(Math.abs(w[i]) <= 65504)) throw new AetherError('unsupported', `layer ${layer}: ffn_down has values outside the f16 range: use downDtype f32`);
      }
      const rs = rowBytes(dtype, D);
      const ptr = this.alloc(rs * H);
      const col = new Float32Array(D);
      const dst = this.engine.heap.u8(ptr, rs * H);
      for (let i = 0; i < H; i++) {
        for (let d = 0; d < D; d++) col[d] = w[d * H + i];
        dst.set(encodeFromF32(dtype, col), i * rs);
      }
      return ptr;
    });
  }

  private defaultDownDtype(layer: number): NeuronDownDtype {
    const t = this.tensor(layer, 'ffn_down').dtype;
    return t === 'f32' ? 'f32' : 'f16';
  }

  /** The saturation metadata, validated against the model (format_error naming the field), or undefined. */
  get saturation(): SaturationMeta | undefined {
    if (this.rawSaturation !== undefined && !this.checkedSaturation) this.checkedSaturation = checkSaturation(this.rawSaturation, this.engine.config);
    return this.checkedSaturation;
  }

  private level(sparsity?: number): SaturationLevel {
    const s = this.saturation;
    if (!s || !Array.isArray(s.levels) || s.levels.length === 0) {
      throw new AetherError('invalid_argument', 'this model has no saturation metadata: run `aether profile` first (or pass masks / thresholds)');
    }
    if (sparsity === undefined) return s.levels[0];
    let best = s.levels[0];
    for (const l of s.levels) if (Math.abs(l.sparsity - sparsity) < Math.abs(best.sparsity - sparsity)) best = l;
    return best;
  }

  /** Frozen mask of a layer (bit set = frozen), from options or metadata. */
  private mask(layer: number, o: FfnOptions): Uint8Array {
    const m = o.masks?.[layer];
    if (m) return m;
    if (o.masks) return new Uint8Array(Math.ceil(this.H / 8));
    const ll = this.level(o.sparsity).layers[layer];
    if (!ll) throw new AetherError('format_error', `saturation metadata has no entry for layer ${layer}`);
    return b64decode(ll.frozen);
  }

  /** Calibration mean of h per neuron (metadata), or null. */
  private means(layer: number): Float32Array | null {
    const s = this.saturation?.layers?.[layer]?.mean;
    return typeof s === 'string' ? b64ToF32(s) : null;
  }

  private auxFused(layer: number, o: FfnOptions): number {
    const tile = Math.max(0, Math.floor(o.tile ?? 0));
    if (tile === 0) return 0;
    if (tile > 256) throw new AetherError('invalid_argument', `fused tile ${tile} exceeds 256 rows`);
    return this.cached(`fused:${layer}:${tile}`, () => {
      const il = this.interleave(layer, null, tile);
      const aux = this.newAux();
      this.setI32(aux + AUX.GU_TYPE, il.type);
      this.setI32(aux + AUX.GU_ROWS, il.n);
      this.setI32(aux + AUX.GU_TILE, tile);
      this.setU32(aux + AUX.GU_TILE_STRIDE, il.stride);
      this.setU32(aux + AUX.GATE, il.ptr);
      this.setU32(aux + AUX.UP, il.ptr + tile * il.rs);
      return aux;
    });
  }

  /** Down layout of an aux: `down` is 'rows' or 'neuron' (static 'auto' is resolved by the caller). */
  private setDown(aux: number, layer: number, o: FfnOptions, down: DownLayout): void {
    this.setI32(aux + AUX.DOWN_MODE, down === 'rows' ? DOWN_MODE.rows : DOWN_MODE.neuron);
    if (down !== 'rows') {
      const dt = o.downDtype ?? this.defaultDownDtype(layer);
      const p = this.downNeuron(layer, dt);
      this.setI32(aux + AUX.DOWN_TYPE, DTYPE_IDS[dt]);
      this.setU32(aux + AUX.DOWN_NM, p);
      this.setF32(aux + AUX.NEURON_MAX, down === 'neuron' ? 2 : (o.neuronMax ?? NEURON_MAX[dt]));
    }
  }

  private auxStatic(layer: number, o: FfnOptions): number {
    const mask = this.mask(layer, o);
    const comp = o.compensation ?? true;
    const H = this.H, D = this.D;
    const act: number[] = [];
    for (let i = 0; i < H; i++) if (!maskBit(mask, i)) act.push(i);
    const active = Int32Array.from(act);
    let down = o.down ?? 'auto';
    const dt0 = o.downDtype ?? this.defaultDownDtype(layer);
    if (down === 'auto') down = active.length <= (o.neuronMax ?? NEURON_MAX[dt0]) * H ? 'neuron' : 'rows';
    const dt = down === 'neuron' ? dt0 : '-';
    const key = `static:${layer}:${b64encode(mask)}:${comp}:${down}:${dt}`;
    return this.cached(key, () => {
      const aux = this.newAux();
      const tile = 32;
      const gtype = DTYPE_IDS[this.tensor(layer, 'ffn_gate').dtype];
      this.setI32(aux + AUX.GU_TYPE, gtype);
      this.setI32(aux + AUX.GU_ROWS, active.length);
      this.setI32(aux + AUX.GU_TILE, tile);
      if (active.length > 0) {
        const mk = `staticgu:${layer}:${b64encode(mask)}`;
        let il = this.guCopies.get(mk);
        if (!il) { il = this.interleave(layer, active, tile); this.guCopies.set(mk, il); }
        const ap = this.alloc(active.length * 4, 4);
        this.engine.heap.i32(ap, active.length).set(active);
        this.setU32(aux + AUX.GU_TILE_STRIDE, il.stride);
        this.setU32(aux + AUX.GATE, il.ptr);
        this.setU32(aux + AUX.UP, il.ptr + tile * il.rs);
        this.setU32(aux + AUX.ACTIVE, ap);
      }
      const means = comp ? this.means(layer) : null;
      if (means && active.length < H) {
        if (down === 'rows') {
          const fill = new Float32Array(H);
          for (let i = 0; i < H; i++) if (maskBit(mask, i)) fill[i] = means[i];
          const p = this.alloc(H * 4, 16);
          this.engine.heap.f32(p, H).set(fill);
          this.setU32(aux + AUX.HFILL, p);
        } else {
          const w = this.downDense(layer);
          const c = new Float64Array(D);
          for (let i = 0; i < H; i++) {
            if (!maskBit(mask, i) || means[i] === 0) continue;
            const mu = means[i];
            for (let d = 0; d < D; d++) c[d] += mu * w[d * H + i];
          }
          const p = this.alloc(D * 4, 16);
          this.engine.heap.f32(p, D).set(Float32Array.from(c));
          this.setU32(aux + AUX.COMP, p);
        }
      }
      this.setDown(aux, layer, o, down);
      return aux;
    });
  }

  private thresholdOf(layer: number, o: FfnOptions): number {
    if (typeof o.threshold === 'number') return o.threshold;
    if (Array.isArray(o.threshold)) {
      const t = o.threshold[layer];
      if (typeof t !== 'number') throw new AetherError('invalid_argument', `no threshold for layer ${layer}`);
      return t;
    }
    return this.level(o.sparsity).layers[layer].threshold;
  }

  private auxDynamic(layer: number, o: FfnOptions): number {
    const thr = this.thresholdOf(layer, o);
    const down = o.down ?? 'auto';
    const dt = down !== 'rows' ? (o.downDtype ?? this.defaultDownDtype(layer)) : '-';
    const tile = Math.max(0, Math.floor(o.tile ?? 0));
    if (tile > 256) throw new AetherError('invalid_argument', `tile ${tile} exceeds 256 rows`);
    return this.cached(`dynamic:${layer}:${thr}:${down}:${dt}:${o.neuronMax ?? ''}:${tile}`, () => {
      const aux = this.newAux();
      const counts = this.alloc(4 * this.engine.threads, 4);
      this.setI32(aux + AUX.GU_ROWS, this.H);
      if (tile) {
        const il = this.interleave(layer, null, tile);   // shared with fused mode's copy of the same tile
        this.setI32(aux + AUX.GU_TYPE, il.type);
        this.setI32(aux + AUX.GU_TILE, tile);
        this.setU32(aux + AUX.GU_TILE_STRIDE, il.stride);
        this.setU32(aux + AUX.GATE, il.ptr);
        this.setU32(aux + AUX.UP, il.ptr + tile * il.rs);
      }
      this.setF32(aux + AUX.THRESHOLD, thr);
      this.setU32(aux + AUX.COUNTS, counts);
      this.setDown(aux, layer, o, down);
      return aux;
    });
  }

  /** Switch `layers` (default all) to `mode`. Options are remembered per mode: a later call without
   *  options reuses them (so `dense` -> `static` -> `dense` -> `static` needs no new data). */
  setMode(mode: FfnModeName, layers?: number[], opts?: FfnOptions): void {
    if (!(mode in FfnMode) || mode === ('profile' as string)) throw new AetherError('invalid_argument', `unknown FFN mode '${mode}' (dense, fused, static, dynamic)`);
    this.requireModule(mode);
    const o = opts ?? this.defaults[mode] ?? {};
    if (opts) this.defaults[mode] = opts;
    const ls = layers ?? [...Array(this.L).keys()];
    // build everything first: an error leaves the previous modes in place
    const aux = ls.map((l) => {
      if (!Number.isInteger(l) || l < 0 || l >= this.L) throw new AetherError('invalid_argument', `layer ${l} is out of range (0..${this.L - 1})`);
      switch (mode) {
        case 'dense': return 0;
        case 'fused': return this.auxFused(l, o);
        case 'static': return this.auxStatic(l, o);
        case 'dynamic': return this.auxDynamic(l, o);
      }
      return 0;
    });
    ls.forEach((l, i) => { this.engine.setFfnMode(l, mode, aux[i]); this.modes[l] = mode; });
  }

  /** Profile mode on every layer with zeroed accumulators; `smallEps[l]` is the |h| under which an activation counts as small. */
  startProfile(smallEps: number[]): void {
    this.requireModule('profile');
    const H = this.H, nt = this.engine.threads;
    for (let l = 0; l < this.L; l++) {
      let p = this.profileAux[l];
      if (!p) {
        const aux = this.newAux();
        p = { aux, stats: this.alloc(H * ST.N * 8, 8), hist: this.alloc(nt * HIST.BINS * 4, 4) };
        const counts = this.alloc(4 * nt, 4);
        this.setI32(aux + AUX.GU_ROWS, H);
        this.setU32(aux + AUX.STATS, p.stats);
        this.setU32(aux + AUX.HIST, p.hist);
        this.setU32(aux + AUX.COUNTS, counts);
        this.profileAux[l] = p;
      }
      this.engine.heap.u8(p.stats, H * ST.N * 8).fill(0);
      this.engine.heap.u8(p.hist, nt * HIST.BINS * 4).fill(0);
      this.setF32(p.aux + AUX.SMALL_EPS, smallEps[l] ?? 0);
      this.engine.setFfnMode(l, 'profile', p.aux);
      this.modes[l] = 'profile';
    }
  }

  /** Accumulators of layer `l` (copies): stats [H * ST.N] and the |silu(g)| histogram summed over threads. */
  readProfile(l: number): { stats: Float64Array; hist: Float64Array } {
    const p = this.profileAux[l];
    if (!p) throw new AetherError('invalid_argument', 'no profile has been started');
    const H = this.H, nt = this.engine.threads;
    const stats = new Float64Array(this.engine.heap.memory.buffer, p.stats, H * ST.N).slice();
    const raw = new Uint32Array(this.engine.heap.memory.buffer, p.hist, nt * HIST.BINS);
    const hist = new Float64Array(HIST.BINS);
    for (let t = 0; t < nt; t++) for (let k = 0; k < HIST.BINS; k++) hist[k] += raw[t * HIST.BINS + k];
    return { stats, hist };
  }

  /** f32 copy of w_down of a layer (dim rows of hidden values). */
  downWeights(layer: number): Float32Array { return this.downDense(layer); }
}

export { DTYPES };
