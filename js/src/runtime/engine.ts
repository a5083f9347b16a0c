/**
 * Engine: one model in one wasm memory. Owns the heap, the module instances of the calling thread,
 * the worker pool, the C model struct (src/model/model.h) and the sampler. Knows nothing of text.
 */
import { AetherError, throwIfAborted } from '../errors.js';
import {
  Arch, Cfg, DTYPE_IDS, FWD, HEAD_STAT_NAMES, OP_CLASS_NAMES, FfnAct, FfnMode, GLOBAL_TENSOR_ROLES, LAYER_TENSOR_ROLES, POOL_SIZE, RKNOT_CHECK_NAMES,
  ROLE_NAMES, Role, SMP, Status,
} from './abi.js';
import { checkStatus, type StatusContext } from './status.js';
import { DTYPE_ROWS } from '../generated/abi.js';
import { compileModule, isNode, probeFeatures, requireSimd, resolveSimd, type SimdMode } from './env.js';
import { autoThreads, hardwareThreads } from '../validate.js';
import { instantiateSet, type Exports } from './instance.js';
import { Heap } from './memory.js';
import { WorkerPool } from './threads.js';
import type { WorkerInit } from './worker.js';
import { checkKvPolicy, formatKvPolicy, parseKvPolicy, type KvPolicy } from '../formats/kv-policy.js';

/** The subset of .rknot metadata the engine needs (js/src/formats/rknot.ts RknotConfig documents the fields). */
export interface ModelConfig {
  arch: 'llama' | 'qwen2' | 'phi3' | 'qwen3' | 'gemma' | 'gemma2' | 'gemma3';
  dim: number; n_layers: number; n_heads: number; n_kv_heads: number; head_dim: number; hidden_dim: number;
  vocab_size: number; n_ctx: number; norm_eps: number; rope_theta: number; rope_dim?: number;
  rope_type: 'norm' | 'neox';
  ffn_act?: 'silu' | 'gelu_tanh';
  embd_scale?: number; attn_scale?: number; attn_softcap?: number; final_softcap?: number;
  qk_norm?: boolean; post_norms?: boolean;
  rope_scaling?: { type: 'linear'; factor: number } | { type: 'llama3' } | { type: 'longrope'; original_context: number; attn_factor: number };
  sliding_window?: number; swa_layers?: boolean[]; rope_theta_swa?: number;
}

/**
 * Which RoPE frequency-factor tensor the forward uses (llama.cpp's rule): llama3 -> rope_freqs; LongRoPE ->
 * the long factors when the context exceeds the original one, else the short ones; none otherwise.
 */
export function ropeFactorsTensor(cfg: ModelConfig, nCtx: number): string | undefined {
  const rs = cfg.rope_scaling;
  if (rs?.type === 'llama3') return 'rope_freqs.weight';
  if (rs?.type === 'longrope') return nCtx > rs.original_context ? 'rope_factors_long.weight' : 'rope_factors_short.weight';
  return undefined;
}
export interface TensorInfo { name: string; dtype: string; shape: number[]; offset: number; bytes: number }

/** KV-cache dtypes (llama.cpp's cache_type_k / cache_type_v); f16 is the default. */
export const KV_DTYPES = ['f32', 'f16', 'q8_0', 'q4_0'] as const;
export type KvDtype = typeof KV_DTYPES[number];
export const DEFAULT_KV_DTYPE: KvDtype = 'f16';
/**
 * Context length taken when none is given: the model's, clamped to this and to what fits in memory. 4096 is the
 * default n_ctx of llama.cpp's command-line tools (common/common.h); a larger one must be asked for (nCtx).
 */
export const DEFAULT_CTX_CEILING = 4096;
/** The wasm32 address space. */
export const WASM32_MAX_BYTES = 2 ** 32;

/** What the engine puts in wasm memory, in bytes (Engine.memoryPlan). */
export interface MemoryPlan {
  /** Runtime: stacks, pool, model struct, sampler buffers (everything before the weights). */
  runtime: number;
  weights: number;
  kvCache: number;
  /** Activation buffers, attention scratch, logits (the arena minus the KV cache). */
  scratch: number;
  /**
   * The FFN modules' data made after load (Engine.allocAfterLoad 'ffn'): interleaved gate/up copies, compacted
   * active rows, neuron-major down copies, masks, thresholds, profile accumulators. 0 until an FFN mode needs them.
   */
  ffn: number;
  /**
   * Other buffers made after load: instrumentation (timing, head statistics, KV reads, capture areas), KV-policy
   * specs, and an arena superseded by a larger one (setKvPolicy; the bump allocator never frees).
   */
  other: number;
  /**
   * Every byte reserved in the wasm memory: runtime + weights + arena + ffn + other (+ alignment gaps). Equals the
   * heap's high-water mark; the memory's byteLength is this rounded up to 64 KiB pages (at least the 16 MiB start).
   */
  total: number;
  /** The limit: 4 GiB (wasm32) or the maxMemory option, whichever is smaller. */
  limit: number;
  nCtx: number;
  kvDtype: { k: KvDtype; v: KvDtype };
  /** Why nCtx is what it is. */
  ctxSource: 'option' | 'model' | 'ceiling' | 'memory';
}

export interface EngineOptions {
  /**
   * Compute threads including the calling one (default 1), or 'auto': the machine's physical cores, at most 4
   * (validate.ts autoThreads). Falls back to 1 without SharedArrayBuffer. 1 and N threads give the same bits.
   */
  threads?: number | 'auto';
  /**
   * Tokens per prefill batch (default 64), and the largest prompt chunk of generate() / complete(): an abort is seen
   * between chunks, so a smaller maxBatch answers sooner on large models, at some prefill speed.
   */
  maxBatch?: number;
  /**
   * Context length (maximum: the model's n_ctx). Default: the model's n_ctx clamped to DEFAULT_CTX_CEILING (4096)
   * and to what fits in memory. A given nCtx that does not fit is refused (out_of_memory, with the largest that fits).
   */
  nCtx?: number;
  /** KV-cache dtype of K and V ('f32', 'f16', 'q8_0', 'q4_0'), or each: { k, v }. Default: the file's kv_cache.dtype, else f16. */
  kvDtype?: KvDtype | { k: KvDtype; v: KvDtype };
  /**
   * KV policy (mixed precision by position, a recent window; docs/rknot.md kv_policy): the compact syntax
   * ('sinks=4:f16,window=64:f16,rest=q8_0', '0-20:f16,21-100:q8_0,101-:q4_0'), the structured form, or null /
   * 'full' for none. Default: the file's kv_policy section (AetherModel load), else none.
   */
  kvPolicy?: string | KvPolicy | null;
  /**
   * KV heads stored locally (docs/DESIGN.md "KV cache"): per layer the KV heads that keep only the first `sinks`
   * positions and the recent `window` (a ring), so they save memory and attend to those positions only. A layer
   * without a KV policy with a window gets `sinks=S:DT,window=W:DT,rest=DT` (DT: the K cache dtype; S, W default 4
   * and 64). AetherModel load also takes 'file': the KV heads the file's attention_heads section classes local.
   */
  localHeads?: LocalHeadsSpec | 'file' | { heads: 'file'; sinks?: number; window?: number };
  /** Cap on the wasm memory in bytes (default and maximum: 4 GiB). The memory plan must fit under it. */
  maxMemory?: number;
  /** Testing: leave this many bytes unused at the bottom of the memory, so every address the engine uses is above it
   * (e.g. 2.1 GiB: the large-memory path with a small model; untouched pages cost no RAM). Counts toward the plan. */
  addressOffset?: number;
  /** Keep logits of every batch position (needed for perplexity); default false. */
  logitsAll?: boolean;
  /** Spin iterations before a thread waits (default 20000: with the other cores busy, 200000 made 2 threads
   *  slower than 1; docs/PERFORMANCE.md "Threads"). */
  spin?: number;
  /**
   * Decode steps (one token per forward) run on the calling thread alone when the weights one token streams
   * (Engine.decodeBytes) are fewer than this many bytes (default SINGLE_THREAD_BELOW = 0: off, every decode step on
   * every thread; with the step-synchronised forward pass the second thread measured no loss even on 7 MB models,
   * docs/PERFORMANCE.md "Steps instead of barriers"). Prefill always uses every thread.
   */
  singleThreadBelow?: number;
  /** Extra modules to load ('ffn-fused', 'ffn-saturated'). */
  modules?: string[];
  /**
   * Build of the wasm modules: 'relaxed' (relaxed SIMD: i8 dot products for the quantised dtypes and load-time
   * row-group layouts; every dtype gives the plain build's bits on every host), 'plain', or
   * 'auto' (default: relaxed where the engine validates it, see docs/PERFORMANCE.md). Node 20 validates relaxed
   * SIMD only with --experimental-wasm-relaxed-simd (the aether CLI sets it).
   */
  simd?: SimdMode;
  /**
   * Repack q4_0, q5_0 and q5_1 weight matrices at load into the layouts of their fastest kernels (docs/DESIGN.md
   * "Repacked weights"; in place, no extra memory, results bit-identical): q4_0 rows interleaved in groups of 4, q5_0 /
   * q5_1 blocks with their bits rearranged (the relaxed build: q5_0 / q5_1 / q8_0 / q4_K / q6_K rows in groups of 4 too,
   * where it can, and q5_K / q6_K blocks with their values rearranged). true, false, or 'auto' (default: on, with either build: the R4 matvec reads 4 groups as 4
   * streams and is 1.3-1.9x the file layout's from DRAM in both builds, docs/PERFORMANCE.md "Decode matvecs from
   * DRAM"; the q5_0 layout's expansion takes 8 operations instead of 17, "Session 9").
   */
  repack?: boolean | 'auto';
  /**
   * The relaxed build's kernels built on the i32 relaxed dot (i32x4.relaxed_dot_i8x16_i7x16_add_s: one AVX-VNNI vpdpbusd
   * where V8 runs on an x64 CPU with AVX-VNNI, five instructions where the CPU lacks it) instead of the i16 relaxed dot
   * plus adds or widening, where a dtype has both: the repacked q4_0 prefill GEMM and decode matvec, the file-layout q8_0
   * prefill GEMM, the X8 q5_1 matvec, the repacked q5_0 and q5_1 matvecs, the repacked q4_K, q5_K and q6_K matvecs
   * and prefill GEMMs and the iq4_nl / iq4_xs matvecs (one switch, C AE_FUSED_TILES) and the
   * repacked q8_0 matvec and GEMM (AE_FUSED_R8; docs/DESIGN.md
   * "Relaxed SIMD"). Both forms give the same bits; which is faster depends on the host. true (both switches), false,
   * or 'auto' (default: each switch timed on this host for the kernels the model has, Engine.fusedDotProbe, once at
   * load and again after the warm-up, when the optimised code runs). No effect with the plain build or without such
   * weights.
   */
  fusedDot?: boolean | 'auto';
}

/** One switch's probe: ms of each form on its probe GEMMs (best of the rounds) and the choice. */
export interface FusedDotTiming { i16Ms: number; i32Ms: number; fused: boolean }
/** What the fused-dot probes measured (EngineOptions.fusedDot 'auto'): `tiles` (AE_FUSED_TILES: timed on q4_0 R4
 *  GEMMs; when the model has file-layout q8_0, repacked q4_0, X8 q5_1, R4 q5_0 / q5_1 / q4_K / q5_K / q6_K or iq4_nl / iq4_xs matrices) and `q8_0_r4` (AE_FUSED_R8: on q8_0 R4
 *  GEMMs; when it has R4 q8_0 matrices). */
export interface FusedDotProbe { tiles: FusedDotTiming | null; q8_0_r4: FusedDotTiming | null; when: 'load' | 'warmup' }

const STACK_SIZE = 1 << 20;
/** Dtypes repacked at load whose relaxed kernels have a fused-dot form (q4_0's R4 GEMM, q5_1's X8 matvec: not its R4 layout); q8_0's
 *  prefill GEMM has one too (any q8_0 matrix). */
const FUSED_DOT_REPACKED = new Set(['q4_0', 'q5_1']);
/** Dtypes whose relaxed row-group layout (AE_*_R4) has a fused-dot matvec under AE_FUSED_TILES (q8_0's R4 has its own switch). */
const FUSED_DOT_R4 = new Set(['q5_0', 'q5_1', 'q4_K', 'q5_K', 'q6_K']);
/** What Engine.warmup did: its rounds, the time spent, each round's time, its prefill's time and its time per decode
 *  step (with sampling) (ms), and the maxBatch batch's time (0: not run). */
export interface WarmupStats { rounds: number; ms: number; roundMs: number[]; prefillMs: number[]; decodeMs: number[]; batchMs: number }

/** Default of EngineOptions.singleThreadBelow (bytes of weights per decode token). */
export const SINGLE_THREAD_BELOW = 0;

/** What a disposed engine's heap is replaced with: any use throws 'disposed'. */
const DISPOSED_HEAP = new Proxy({}, { get() { throw new AetherError('disposed', 'the model has been disposed'); } }) as Heap;
const DISPOSED_CORE = DISPOSED_HEAP as unknown as Exports;

/**
 * Tell V8 that `bytes` of memory were released (see Engine.dispose): a non-shared wasm memory of that size is
 * counted by V8's GC heuristics (a shared one, or a plain ArrayBuffer of the same size, measurably is not), and
 * its pages are never touched, so it costs address space only for an instant.
 */
function gcHint(bytes: number): void {
  try {
    const pages = Math.max(1, Math.min(Math.ceil(bytes / 65536), 32768));
    let hint: WebAssembly.Memory | null = new WebAssembly.Memory({ initial: pages, maximum: pages });
    void hint;
    hint = null;
  } catch { /* no address space for the hint: fine */ }
}
/** Per-layer compression modes, in the order of src/model/model.h ae_cmp_mode. */
export const CMP_MODES = ['dense', 'compressed'] as const;
export type CompressionModeName = typeof CMP_MODES[number];
const MAX_RECENT = 1024;
/** Most logit-bias entries per call, and most alternatives per token of log-probabilities. */
export const MAX_LOGIT_BIAS = 1024;
export const MAX_TOP_LOGPROBS = 20;

/** The warm-up's decode steps sample as generations do: greedy, and the default sampling chain with a repetition penalty. */
const WARMUP_GREEDY: SamplerParams = { temperature: 0 };
const WARMUP_SAMPLING: SamplerParams = { temperature: 0.8, topK: 40, topP: 0.95, minP: 0.05, repeatPenalty: 1.1 };
/** Engine.warmup: the least time it spends (small models; docs/PERFORMANCE.md, browser first run) and the decode steps' time per round. */
const WARMUP_MIN_MS = 150;
const WARMUP_DECODE_MS = 8;

export interface SamplerParams {
  temperature?: number; topK?: number; topP?: number; minP?: number; repeatPenalty?: number;
  /**
   * OpenAI / llama.cpp frequency and presence penalties over the same recent window as repeatPenalty (applied after
   * it, once per distinct token): logit -= count * frequencyPenalty + presencePenalty (default 0 = off).
   */
  frequencyPenalty?: number; presencePenalty?: number;
  /**
   * Added to the logits (after the repetition penalty, before everything else) by token id; a bias <= -100
   * bans the token. At most MAX_LOGIT_BIAS entries.
   */
  logitBias?: ReadonlyMap<number, number>;
  /**
   * Log-probabilities: undefined = off; n >= 0 = the sampled token's and the n most probable tokens'
   * (n <= MAX_TOP_LOGPROBS). Log-softmax at temperature 1 of the logits after penalty and bias.
   */
  topLogprobs?: number;
}

/** A sampled token, with its log-probabilities when they were asked for. */
export interface SampleResult {
  token: number;
  rng: bigint;
  logprob?: number;
  top?: { token: number; logprob: number }[];
}

export class Engine {
  readonly heap: Heap;
  readonly config: ModelConfig;
  readonly threads: number;
  readonly threaded: boolean;
  /** The module build in use ('relaxed' or 'plain'). */
  simd: 'relaxed' | 'plain' = 'plain';
  readonly maxBatch: number;
  /** Context length (set by the memory plan). */
  nCtx: number;
  /** The memory plan this engine was created with. */
  plan!: MemoryPlan;
  readonly logitsAll: boolean;
  readonly spin: number;
  readonly singleThreadBelow: number;
  /** Bytes of weights one decode token streams (set at load). */
  decodeBytes = 0;
  readonly warnings: string[] = [];
  private core!: Exports;
  private workers: WorkerPool | null = null;
  private modules: Record<string, WebAssembly.Module> = {};
  private stackTops: Record<string, number>[] = [];
  private pool = 0; private model = 0; private args = 0; private tokBuf = 0; private sampler = 0; private recent = 0;
  private biasIds = 0; private biasVals = 0; private topIds = 0; private topLps = 0;
  private arena = 0; private arenaSize = 0; dataBase = 0; dataSize = 0;
  private disposed = false;
  /** Sample only ids below this (0: the whole vocabulary): a tokenizer smaller than vocab_size cannot decode the rest. */
  sampleLimit = 0;
  /** Tensor table as loaded (name -> info; offsets relative to dataBase). */
  private readonly tensorTable = new Map<string, TensorInfo>();
  /** (layer, role) of each tensor the forward uses. */
  private readonly tensorRoles = new Map<string, { layer: number; role: number }>();
  private readonly repackOpt: boolean | 'auto';
  private readonly fusedDotOpt: boolean | 'auto';
  /** Whether any kernel runs its fused-dot form (EngineOptions.fusedDot), and what the last probe measured. */
  fusedDot = false;
  fusedDotProbe: FusedDotProbe | null = null;
  /** Tensors repacked at load (their bytes in memory are in the repacked layout; tensorBytes() unpacks a copy). */
  readonly repacked = new Set<string>();
  /** Of those, q5_0 / q5_1 / q8_0 / q4_K / q5_K / q6_K tensors in the relaxed build's row-group layouts (AE_Q5_0_R4 ... AE_Q5_K_R4). */
  readonly repackedR4 = new Set<string>();

  private constructor(heap: Heap, config: ModelConfig, threads: number, threaded: boolean, opts: EngineOptions) {
    this.heap = heap; this.config = config; this.threads = threads; this.threaded = threaded;
    this.maxBatch = Math.max(1, Math.min(opts.maxBatch ?? 64, 4096));
    if (opts.nCtx !== undefined && (!Number.isInteger(opts.nCtx) || opts.nCtx < 1 || opts.nCtx > config.n_ctx)) {
      throw new AetherError('invalid_argument', `nCtx: ${opts.nCtx} is outside 1..${config.n_ctx} (the model's context length n_ctx)`, { field: 'nCtx', value: opts.nCtx, max: config.n_ctx });
    }
    this.nCtx = opts.nCtx ?? config.n_ctx;
    this.logitsAll = !!opts.logitsAll;
    this.spin = Math.max(0, Math.floor(opts.spin ?? 20000));
    this.repackOpt = opts.repack ?? 'auto';
    this.fusedDotOpt = opts.fusedDot ?? 'auto';
    this.singleThreadBelow = Math.max(0, opts.singleThreadBelow ?? SINGLE_THREAD_BELOW);
  }

  /** Compile the modules and decide threading; nothing model-specific yet. */
  static async prepare(opts: EngineOptions): Promise<{ threads: number; threaded: boolean; simd: 'relaxed' | 'plain'; modules: Record<string, WebAssembly.Module>; warnings: string[] }> {
    requireSimd();
    if (opts.threads !== undefined && opts.threads !== 'auto' && (!Number.isInteger(opts.threads) || opts.threads < 1)) {
      throw new AetherError('invalid_argument', `threads: expected 'auto' or a positive integer, got ${String(opts.threads)}`, { field: 'threads' });
    }
    const auto = opts.threads === 'auto';
    const feats = probeFeatures();
    const want: number = auto ? (feats.threads ? await autoThreads(isNode) : 1) : (opts.threads as number | undefined) ?? 1;
    const warnings: string[] = [];
    const hw = await hardwareThreads(isNode);
    if (!auto && hw !== undefined && want > hw) {
      warnings.push(`threads=${want} is more than the ${hw} hardware threads of this machine: the threads spin and wait for each other ` +
        `(measured 500x slower with 64 threads on 2 cores); use threads <= ${hw}`);
    }
    let threads = want;
    if (want > 1 && !feats.threads) {
      threads = 1;
      warnings.push(`threads=${want} requested but SharedArrayBuffer / shared wasm memory is unavailable` +
        (feats.crossOriginIsolated ? '' : ' (the page is not cross-origin isolated: serve it with COOP/COEP headers)') + '; using one thread');
    }
    const threaded = threads > 1;
    const names = ['core', ...(opts.modules ?? [])];
    let simd = resolveSimd(opts.simd);
    let mods: WebAssembly.Module[];
    try {
      mods = await Promise.all(names.map((n) => compileModule(n, threaded, simd === 'relaxed')));
    } catch (e) {
      // 'auto' with a relaxed build that is missing (built without a clang >= 16) or rejected: the plain one
      if (simd !== 'relaxed' || (opts.simd ?? 'auto') !== 'auto') throw e;
      warnings.push(`relaxed-SIMD modules unavailable (${(e as Error).message}); using the plain build`);
      simd = 'plain';
      mods = await Promise.all(names.map((n) => compileModule(n, threaded, false)));
    }
    const modules: Record<string, WebAssembly.Module> = {};
    names.forEach((n, i) => { modules[n] = mods[i]; });
    return { threads, threaded, simd, modules, warnings };
  }

  /**
   * Create the engine for `config` and `tensors` (data section of `dataSize` bytes). Returns the engine
   * and the view where the caller streams the data section; then call `finishLoad()`.
   */
  static create(prep: Awaited<ReturnType<typeof Engine.prepare>>, config: ModelConfig, tensors: TensorInfo[],
    dataSize: number, opts: EngineOptions): { engine: Engine; dest: Uint8Array } {
    const e = Engine.setup(prep, config, dataSize, opts);
    const heap = e.heap;
    e.dataSize = dataSize;
    e.dataBase = heap.alloc(dataSize, 64);
    e.setTensors(tensors);
    e.arenaSize = e.arenaBytes(e.nCtx);
    e.arena = heap.alloc(e.arenaSize, 64);
    return { engine: e, dest: heap.u8(e.dataBase, dataSize) };
  }

  /**
   * The memory plan for a model of `config` with a data section of `dataSize` bytes, without loading it (nothing
   * big is allocated). Throws out_of_memory as load() would.
   */
  static planMemory(prep: Awaited<ReturnType<typeof Engine.prepare>>, config: ModelConfig, dataSize: number, opts: EngineOptions): { plan: MemoryPlan; warnings: string[] } {
    const e = Engine.setup(prep, config, dataSize, opts);
    e.dispose();
    return { plan: e.plan, warnings: e.warnings };
  }

  /** Heap, module instances, small buffers, config and the memory plan (which sets nCtx). */
  private static setup(prep: Awaited<ReturnType<typeof Engine.prepare>>, config: ModelConfig, dataSize: number, opts: EngineOptions): Engine {
    const heap = new Heap(prep.threaded);
    const e = new Engine(heap, config, prep.threads, prep.threaded, opts);
    const off = opts.addressOffset ?? 0;
    if (!Number.isSafeInteger(off) || off < 0) throw new AetherError('invalid_argument', `addressOffset = ${off} must be a non-negative integer`);
    if (off > 0) heap.alloc(off, 64);
    e.warnings.push(...prep.warnings);
    e.simd = prep.simd;
    e.modules = prep.modules;
    for (let t = 0; t < prep.threads; t++) {
      const tops: Record<string, number> = {};
      for (const name of Object.keys(prep.modules)) tops[name] = heap.alloc(STACK_SIZE, 16) + STACK_SIZE;
      e.stackTops.push(tops);
    }
    e.core = instantiateSet(prep.modules, heap.memory, e.stackTops[0]).core;
    const c = e.core;
    e.pool = heap.alloc(POOL_SIZE, 64);
    e.model = heap.alloc(c.ae_model_sizeof() >>> 0, 64);
    e.args = heap.alloc(FWD.SIZE, 8);
    e.tokBuf = heap.alloc(4 * e.maxBatch, 4);
    e.sampler = heap.alloc(SMP.SIZE, 8);
    e.recent = heap.alloc(4 * MAX_RECENT, 4);
    e.biasIds = heap.alloc(4 * MAX_LOGIT_BIAS, 4);
    e.biasVals = heap.alloc(4 * MAX_LOGIT_BIAS, 4);
    e.topIds = heap.alloc(4 * MAX_TOP_LOGPROBS, 4);
    e.topLps = heap.alloc(4 * MAX_TOP_LOGPROBS, 4);
    e.hiddenBuf = heap.alloc(4 * config.dim, 16);
    const vocab = config.vocab_size;
    const idx = heap.alloc(8 * vocab, 4), prob = heap.alloc(4 * vocab, 4);   // idx: 2 x vocab (src/model/sampler.h)
    c.ae_model_reset(e.model);
    e.setConfig(config, resolveKvDtype(opts.kvDtype));
    e.kvPolicies = Array(config.n_layers).fill(null);
    e.localKv = Array.from({ length: config.n_layers }, () => new Set<number>());
    e.storedKv = Array.from({ length: config.n_layers }, () => new Set<number>());
    const pol = resolveKvPolicy(opts.kvPolicy);
    if (pol) e.applyKvPolicy(pol, -1);
    if (opts.localHeads !== undefined) e.applyLocalHeads(checkLocalHeads(opts.localHeads, config));
    e.plan = e.plan_(dataSize, opts);
    const dv = heap.view();
    dv.setUint32(e.sampler + SMP.IDX, idx, true);
    dv.setUint32(e.sampler + SMP.PROB, prob, true);
    dv.setUint32(e.sampler + SMP.RECENT, e.recent, true);
    dv.setUint32(e.sampler + SMP.BIAS_IDS, e.biasIds, true);
    dv.setUint32(e.sampler + SMP.BIAS_VALS, e.biasVals, true);
    dv.setUint32(e.sampler + SMP.TOP_IDS, e.topIds, true);
    dv.setUint32(e.sampler + SMP.TOP_LOGPROBS, e.topLps, true);
    return e;
  }

  /** Arena bytes (run state + KV cache) at context n, computed by C in 64 bits; sets the config's n_ctx to n. */
  private arenaBytes(n: number): number {
    const c = this.core;
    checkStatus(c.ae_model_set_config_i(this.model, Cfg.N_CTX, n), { op: 'set config', subject: `n_ctx = ${n}` });
    const a = Number(BigInt.asUintN(64, BigInt(c.ae_model_arena_size(this.model))));
    if (!a) throw new AetherError('config_error', `model config is out of range (n_ctx ${n}, max batch ${this.maxBatch}, KV ${this.kvName()}): ${JSON.stringify(this.config)}`);
    return a;
  }

  private kvTypes: { k: KvDtype; v: KvDtype } = { k: DEFAULT_KV_DTYPE, v: DEFAULT_KV_DTYPE };
  private kvName(): string { return this.kvTypes.k === this.kvTypes.v ? this.kvTypes.k : `K ${this.kvTypes.k} / V ${this.kvTypes.v}`; }

  /**
   * Decide the context length so that runtime + weights + arena (KV cache and scratch) fit under the limit
   * (4 GiB, or maxMemory), before anything big is allocated; all sizes in 64-bit arithmetic (C computes the
   * arena in uint64, JS numbers are exact to 2^53). Throws out_of_memory with the numbers and the largest
   * context that fits.
   */
  private plan_(dataSize: number, opts: EngineOptions): MemoryPlan {
    const cap = opts.maxMemory;
    if (cap !== undefined && !(Number.isFinite(cap) && cap > 0)) throw new AetherError('invalid_argument', `maxMemory = ${cap} must be a positive number of bytes`);
    const limit = Math.min(WASM32_MAX_BYTES, cap ?? Infinity);
    const runtime = align(this.heap.used, 64);
    const need = (n: number) => align(runtime + dataSize, 64) + this.arenaBytes(n);
    const modelCtx = this.config.n_ctx;
    // the largest n in [1, hi] with need(n) <= limit (need grows with n), 0 if none
    const largest = (hi: number): number => {
      if (need(1) > limit) return 0;
      let lo = 1;
      while (lo < hi) { const mid = Math.ceil((lo + hi) / 2); if (need(mid) <= limit) lo = mid; else hi = mid - 1; }
      return lo;
    };
    let n: number, source: MemoryPlan['ctxSource'];
    if (opts.nCtx !== undefined) { n = Math.min(opts.nCtx, modelCtx); source = 'option'; }
    else if (modelCtx > DEFAULT_CTX_CEILING) { n = DEFAULT_CTX_CEILING; source = 'ceiling'; }
    else { n = modelCtx; source = 'model'; }
    if (need(n) > limit) {
      const fit = largest(n);
      if (opts.nCtx !== undefined || fit === 0) {
        const arena = this.arenaBytes(n), kv = this.kvBytes();
        const parts = `runtime ${mib(runtime)} + weights ${mib(dataSize)} + KV cache ${mib(kv)} (n_ctx ${n}, ${this.kvName()}) + scratch ${mib(arena - kv)} = ${mib(need(n))}`;
        const lim = cap !== undefined && cap < WASM32_MAX_BYTES ? `the maxMemory cap of ${mib(limit)}` : 'the 4 GiB wasm32 limit';
        const hint = fit === 0
          ? 'the weights and buffers do not fit even with a context of 1 token'
          : `the largest context that fits is ${fit} (nCtx: ${fit})${this.kvTypes.k === 'f32' || this.kvTypes.v === 'f32' ? '; a smaller KV dtype (kvDtype f16 or q8_0) fits more' : this.kvTypes.k !== 'q8_0' ? '; kvDtype q8_0 fits more' : ''}`;
        throw new AetherError('out_of_memory', `the model does not fit in memory: ${parts} > ${lim}; ${hint}`, {
          runtime, weights: dataSize, kvCache: kv, scratch: arena - kv, total: need(n), limit, nCtx: n, largestNCtx: fit, kvDtype: { ...this.kvTypes },
        });
      }
      this.warnings.push(`context clamped to ${fit} tokens (the model's is ${modelCtx}) so that weights + KV cache fit in ${mib(limit)}`);
      n = fit; source = 'memory';
    }
    const arena = this.arenaBytes(n), kv = this.kvBytes();
    this.nCtx = n;
    return { runtime, weights: dataSize, kvCache: kv, scratch: arena - kv, ffn: 0, other: 0, total: need(n), limit, nCtx: n, kvDtype: { ...this.kvTypes }, ctxSource: source };
  }

  /**
   * Reserve `bytes` in the wasm memory after load, inside the plan: refused with out_of_memory (before the memory
   * grows) when the plan's total would pass its limit (4 GiB or maxMemory), naming every part; otherwise counted
   * in plan[part] and plan.total (= the heap's high-water mark).
   */
  allocAfterLoad(bytes: number, align: number, part: 'ffn' | 'other', what: string): number {
    const p = this.plan;
    const start = Math.ceil(this.heap.used / align) * align;
    if (start + bytes > p.limit) {
      const lim = p.limit < WASM32_MAX_BYTES ? `the maxMemory cap of ${mib(p.limit)}` : 'the 4 GiB wasm32 limit';
      throw new AetherError('out_of_memory', `${what} needs ${mib(bytes)} more: runtime ${mib(p.runtime)} + weights ${mib(p.weights)} + KV cache ${mib(p.kvCache)} + ` +
        `scratch ${mib(p.scratch)} + FFN data ${mib(p.ffn)} + other ${mib(p.other)} = ${mib(p.total)} in use, ${mib(start + bytes)} would pass ${lim}`,
      { ...p, need: bytes, what });
    }
    const ptr = this.heap.alloc(bytes, align);
    p[part] += this.heap.used - p.total;   // the bytes plus the alignment gap before them
    p.total = this.heap.used;
    return ptr;
  }

  private kvBytes(): number { return Number(BigInt.asUintN(64, BigInt(this.core.ae_model_kv_size(this.model)))); }

  private setConfig(cfg: ModelConfig, kv: { k: KvDtype; v: KvDtype }): void {
    const c = this.core, m = this.model;
    const arch = (Arch as Record<string, number>)[cfg.arch];
    if (arch === undefined) throw new AetherError('unsupported', `architecture '${cfg.arch}' is not supported (${Object.keys(Arch).join(', ')})`);
    const act = (FfnAct as Record<string, number>)[cfg.ffn_act ?? 'silu'];
    if (act === undefined) throw new AetherError('unsupported', `FFN activation '${cfg.ffn_act}' is not supported (${Object.keys(FfnAct).join(', ')})`);
    const swaLayers = cfg.swa_layers ?? [];
    const window = swaLayers.some(Boolean) ? cfg.sliding_window ?? 0 : 0;
    const ints: [string, number, number][] = [
      ['arch', Cfg.ARCH, arch], ['dim', Cfg.DIM, cfg.dim], ['n_layers', Cfg.N_LAYERS, cfg.n_layers], ['n_heads', Cfg.N_HEADS, cfg.n_heads],
      ['n_kv_heads', Cfg.N_KV_HEADS, cfg.n_kv_heads], ['head_dim', Cfg.HEAD_DIM, cfg.head_dim], ['hidden_dim', Cfg.HIDDEN_DIM, cfg.hidden_dim],
      ['vocab_size', Cfg.VOCAB, cfg.vocab_size], ['nCtx', Cfg.N_CTX, this.nCtx], ['rope_dim', Cfg.ROPE_DIM, cfg.rope_dim ?? cfg.head_dim],
      ['rope_type', Cfg.ROPE_NEOX, cfg.rope_type === 'neox' ? 1 : 0], ['maxBatch', Cfg.MAX_BATCH, this.maxBatch],
      ['threads', Cfg.MAX_THREADS, this.threads], ['logitsAll', Cfg.LOGITS_ALL, this.logitsAll ? 1 : 0],
      ['ffn_act', Cfg.FFN_ACT, act], ['sliding_window', Cfg.SWA_WINDOW, window],
      ['kvDtype.k', Cfg.KV_TYPE_K, DTYPE_IDS[kv.k]], ['kvDtype.v', Cfg.KV_TYPE_V, DTYPE_IDS[kv.v]],
    ];
    this.kvTypes = kv;
    for (const [name, k, v] of ints) {
      if (!Number.isInteger(v) || v < 0 || v > 0x7fffffff) throw new AetherError('config_error', `config ${name} = ${v} is not a valid integer (0..2^31-1)`, { field: name, value: v });
      checkStatus(c.ae_model_set_config_i(m, k, v), { op: 'set config', subject: `${name} = ${v}` });
    }
    const rs = cfg.rope_scaling;
    const freqScale = rs?.type === 'linear' ? 1 / rs.factor : 1;
    const floats: [string, number, number | undefined][] = [
      ['norm_eps', Cfg.NORM_EPS, cfg.norm_eps], ['rope_theta', Cfg.ROPE_THETA, cfg.rope_theta],
      ['embd_scale', Cfg.EMBD_SCALE, cfg.embd_scale ?? 1], ['attn_scale', Cfg.ATTN_SCALE, cfg.attn_scale ?? 0],
      ['attn_softcap', Cfg.ATTN_SOFTCAP, cfg.attn_softcap ?? 0], ['final_softcap', Cfg.FINAL_SOFTCAP, cfg.final_softcap ?? 0],
      ['rope_scaling.factor', Cfg.ROPE_FREQ_SCALE, freqScale],
      ['rope_scaling.attn_factor', Cfg.ROPE_ATTN_FACTOR, rs?.type === 'longrope' ? rs.attn_factor : 1],
      // SWA layers with their own base (Gemma 3 local layers) use no linear scaling; otherwise they share the global RoPE
      ['rope_theta_swa', Cfg.ROPE_THETA_SWA, cfg.rope_theta_swa ?? 0],
      ['rope_theta_swa', Cfg.ROPE_FREQ_SCALE_SWA, cfg.rope_theta_swa !== undefined ? 1 : freqScale],
    ];
    for (const [name, k, v] of floats) {
      if (typeof v !== 'number' || !Number.isFinite(v)) throw new AetherError('config_error', `config ${name} = ${v} must be a finite number`);
      checkStatus(c.ae_model_set_config_f(m, k, v), { op: 'set config', subject: `${name} = ${v}` });
    }
    for (let l = 0; l < swaLayers.length; l++) {
      if (swaLayers[l]) checkStatus(c.ae_model_set_layer_swa(m, l, 1), { op: 'set config', subject: `swa_layers[${l}]` });
    }
  }

  private setTensors(tensors: TensorInfo[]): void {
    const ropeFactors = ropeFactorsTensor(this.config, this.nCtx);
    if (ropeFactors && !tensors.some((t) => t.name === ropeFactors)) {
      throw new AetherError('format_error', `tensor '${ropeFactors}' is missing (config.rope_scaling ${this.config.rope_scaling?.type} needs it)`);
    }
    for (const t of tensors) {
      this.tensorTable.set(t.name, t);
      let layer = -1, role: number | undefined;
      const mm = /^blk\.(\d+)\.(.+)$/.exec(t.name);
      if (mm) { layer = Number(mm[1]); role = LAYER_TENSOR_ROLES[mm[2]]; }
      else role = t.name === ropeFactors ? Role.ROPE_FREQS : GLOBAL_TENSOR_ROLES[t.name];
      if (role === undefined) continue; // tensors the forward does not use
      if (layer >= this.config.n_layers) throw new AetherError('format_error', `tensor '${t.name}': layer ${layer} >= n_layers ${this.config.n_layers}`);
      const type = DTYPE_IDS[t.dtype];
      if (type === undefined) throw new AetherError('unsupported', `tensor '${t.name}': dtype '${t.dtype}' is not supported`);
      const ne0 = t.shape[0], ne1 = t.shape.length > 1 ? t.shape[1] : 1;
      if (t.shape.length > 2 && t.shape.slice(2).some((d) => d !== 1)) throw new AetherError('format_error', `tensor '${t.name}': shape ${JSON.stringify(t.shape)} has more than 2 dimensions`);
      const chk = this.core.ae_rknot_check_tensor(type, ne0, ne1, t.offset, t.bytes, this.dataSize);
      if (chk) {
        throw new AetherError('format_error', `tensor '${t.name}' (${t.dtype} ${JSON.stringify(t.shape)}, offset ${t.offset}, ${t.bytes} bytes): ` +
          `${RKNOT_CHECK_NAMES[chk] ?? 'invalid'} (checked by the C validator; data section ${this.dataSize} bytes)`);
      }
      checkStatus(this.core.ae_model_set_tensor(this.model, layer, role, this.dataBase + t.offset, type, ne0, ne1),
        { op: 'set tensor', subject: `tensor '${t.name}'`, details: { tensor: t.name } });
      this.tensorRoles.set(t.name, { layer, role });
    }
  }

  /** Validate the tensor table in C, carve the run state, start the workers. */
  async finishLoad(): Promise<void> {
    const st = this.core.ae_model_init(this.model, this.arena, this.arenaSize);
    const badTensor = () => {
      const layer = this.core.ae_model_bad_layer(), role = this.core.ae_model_bad_role(), reason = this.core.ae_model_bad_reason();
      return { layer, role, reason, name: layer >= 0 ? `blk.${layer}.${ROLE_NAMES[role]}` : ROLE_NAMES[role] };
    };
    checkStatus(st, { op: 'model init', badTensor: st === Status.BAD_TENSOR ? badTensor() : undefined,
      hint: st === Status.BAD_CONFIG ? JSON.stringify(this.config) : undefined });
    if (this.repackOpt !== false) this.repackWeights();   // 'auto': both builds (their R4 kernels are the faster ones)
    this.chooseFusedDot('load');
    this.core.ae_pool_init(this.pool, this.threads, this.spin);
    this.decodeBytes = this.core.ae_model_set_single_below(this.model, this.threads > 1 ? this.singleThreadBelow : 0);
    if (this.threads > 1) {
      const inits: WorkerInit[] = [];
      for (let ith = 1; ith < this.threads; ith++) {
        inits.push({ memory: this.heap.memory, modules: this.modules, stackTops: this.stackTops[ith], driver: 'core', pool: this.pool, ith, gen0: 0 });
      }
      this.workers = await WorkerPool.start(inits);
    }
  }

  private check(): void {
    if (this.disposed) throw new AetherError('disposed', 'the model has been disposed');
    // a dead worker would leave the calling thread waiting in the pool's barrier forever: refuse instead
    if (this.workers && !this.workers.dead) {
      const ith = this.core.ae_pool_dead(this.pool);
      if (ith) this.workers.dead = `compute worker ${ith} died`;
    }
    if (this.workers?.dead) throw this.workerDied();
  }

  private workerDied(during?: string): AetherError {
    return new AetherError('worker_died', `${this.workers?.dead ?? `compute worker ${this.core.ae_pool_dead(this.pool)} died`}${during ? ` during ${during}` : ''}: ` +
      `the model cannot run on its ${this.threads} threads any more; dispose it and load it again`, { threads: this.threads });
  }

  /** The status of a call that ran on the pool: a dead worker (AE_ERR_WORKER_DIED) marks the model unusable. */
  private poolStatus(st: number, ctx: StatusContext): void {
    if (st === Status.WORKER_DIED) {
      if (this.workers && !this.workers.dead) this.workers.dead = `compute worker ${this.core.ae_pool_dead(this.pool)} died`;
      throw this.workerDied(`${ctx.op}${ctx.subject ? ` (${ctx.subject})` : ''}`);
    }
    checkStatus(st, ctx);
  }

  /**
   * Warm-up: V8 runs wasm first in its baseline tier (Liftoff) and optimises a function once it has run
   * enough (a budget of bytes executed per function), in the background; without this the first generation after a
   * load is several times slower than later ones (docs/PERFORMANCE.md, browser first run). Runs rounds of a prefill
   * batch of `prefillChunk` tokens (the first chunk of a generation's prefill, AetherModel.prefill) plus decode steps
   * on dummy tokens, each followed by sampling (the same kernels a generation runs, on every thread): 4 decode steps
   * in the first round, then as many as take about WARMUP_DECODE_MS (4..32), since a small model's per-call glue (the
   * forward pass's job loop, RoPE rows, the sampler) spends its budget per call, not per weight. Stops when both the
   * prefill part and the decode part of a round took at most half of their first round's time (the optimised code is
   * in use; then one more round) and at least WARMUP_MIN_MS were spent, or after 40 rounds, or when `maxMs` is spent;
   * then one prefill batch of maxBatch tokens (the size of the later chunks of a long prompt) when its estimated time
   * fits in what is left of `maxMs`. The KV cache rows it wrote are overwritten by the next prompt (the caller forgets
   * its cached tokens). Returns the rounds, the time spent, each round's time (and its prefill and decode parts) and
   * the maxBatch batch's time (0: not run).
   */
  warmup(maxMs = 3000, prefillChunk = 16): WarmupStats {
    this.check();
    const now = () => performance.now();
    const r1 = (x: number) => Math.round(x * 10) / 10;
    const t0 = now();
    const B = Math.min(this.maxBatch, prefillChunk, this.nCtx - 4);
    if (B < 1) return { rounds: 0, ms: 0, roundMs: [], prefillMs: [], decodeMs: [], batchMs: 0 };
    const maxD = Math.min(32, this.nCtx - B);
    // varied token ids, not one repeated id: real prompts give K / V values that take every path of the cache's
    // conversion (a first prefill with the repeated id 0 in the warm-up still ran its K / V stores 7x slower)
    const V = this.config.vocab_size, tokAt = (i: number) => (1 + i * 7919) % V;
    const toks = Array.from({ length: B }, (_, i) => tokAt(i));
    const roundMs: number[] = [], prefillMs: number[] = [], decodeMs: number[] = [];
    let rng = this.seedRng(1);
    let D = 4;
    for (;;) {
      const s = now();
      this.forward(toks, 0);
      const s1 = now();
      for (let i = 0; i < D; i++) {
        this.forward([tokAt(B + i)], B + i);
        rng = this.sample(i % 2 ? WARMUP_GREEDY : WARMUP_SAMPLING, rng, toks).rng;   // the sampler's kernels too
      }
      const s2 = now();
      // per decode step, so that rounds with different step counts compare
      prefillMs.push(r1(s1 - s)); decodeMs.push(r1((s2 - s1) / D)); roundMs.push(r1(s2 - s));
      const n = roundMs.length;
      if (n >= 3 && prefillMs[n - 2] <= 0.5 * prefillMs[0] && decodeMs[n - 2] <= 0.5 * decodeMs[0] && now() - t0 >= WARMUP_MIN_MS) break;
      if (n >= 40 || now() - t0 + (s2 - s) > maxMs) break;
      D = Math.max(4, Math.min(maxD, Math.round(WARMUP_DECODE_MS / Math.max(0.01, (s2 - s1) / D))));
    }
    let batchMs = 0;
    const BM = Math.min(this.maxBatch, this.nCtx);
    if (BM > B && now() - t0 + prefillMs[prefillMs.length - 1] * BM / B <= maxMs) {
      const s = now();
      this.forward(Array.from({ length: BM }, (_, i) => tokAt(i)), 0);
      batchMs = r1(now() - s);
    }
    this.chooseFusedDot('warmup');   // the kernels' optimised code is in use now (browsers tier up while running)
    return { rounds: roundMs.length, ms: now() - t0, roundMs, prefillMs, decodeMs, batchMs };
  }

  /**
   * EngineOptions.fusedDot: set the C switches (ae_set_fused_dot, a mask; the plain build has one form and keeps 0).
   * 'auto' times each switch the model's kernels have on its probe GEMMs (ae_probe_fused_dot, ~2 ms per round) in
   * alternating rounds and takes the fused form when its best round is at least 3% faster. Either choice gives the
   * same bits.
   */
  private chooseFusedDot(when: 'load' | 'warmup'): void {
    const TILES = 1, R8 = 2;   // kernels.h AE_FUSED_TILES, AE_FUSED_R8
    const opt = this.fusedDotOpt;
    if (opt !== 'auto') { this.fusedDot = this.core.ae_set_fused_dot(opt ? TILES | R8 : 0) !== 0; return; }
    const tiles = [...this.tensorTable].some(([n, t]) => (t.dtype === 'q8_0' && !this.repacked.has(n)) || t.dtype === 'iq4_nl' || t.dtype === 'iq4_xs')
      || [...this.repacked].some((n) => !this.repackedR4.has(n) && FUSED_DOT_REPACKED.has(this.tensorTable.get(n)?.dtype ?? ''))
      || [...this.repackedR4].some((n) => FUSED_DOT_R4.has(this.tensorTable.get(n)?.dtype ?? ''));
    const r8 = [...this.repackedR4].some((n) => this.tensorTable.get(n)?.dtype === 'q8_0');
    if (this.simd !== 'relaxed' || (!tiles && !r8)) { this.fusedDot = this.core.ae_set_fused_dot(0) !== 0; return; }
    const now = () => performance.now();
    const time = (kind: number): FusedDotTiming => {
      let reps = 64, i16Ms = Infinity, i32Ms = Infinity;
      for (; reps < 1 << 16; reps *= 2) {   // enough repetitions for >= 1 ms per round (timer resolution)
        const t = now();
        this.core.ae_probe_fused_dot(kind, 0, reps);
        if (now() - t >= 1) break;
      }
      for (let round = 0; round < 4; round++) {
        for (const f of round % 2 ? [1, 0] : [0, 1]) {
          const t = now();
          this.core.ae_probe_fused_dot(kind, f, reps);
          const ms = now() - t;
          if (f) i32Ms = Math.min(i32Ms, ms); else i16Ms = Math.min(i16Ms, ms);
        }
      }
      const r3 = (ms: number) => Math.round(ms * 1000) / 1000;
      return { i16Ms: r3(i16Ms), i32Ms: r3(i32Ms), fused: i32Ms < 0.97 * i16Ms };
    };
    const t = tiles ? time(TILES) : null, q = r8 ? time(R8) : null;
    this.fusedDot = this.core.ae_set_fused_dot((t?.fused ? TILES : 0) | (q?.fused ? R8 : 0)) !== 0;
    this.fusedDotProbe = { tiles: t, q8_0_r4: q, when };
  }

  /**
   * Run tokens at positions pos..pos+n-1 through the model (n may exceed maxBatch: batched; the batches before the
   * last run no output head). With `hiddenSum` (a heap offset of dim floats) there are no logits: the final-normed
   * hidden state of every token is added there instead. With `noLogits` no output head runs at all (a prompt chunk
   * that is not the prompt's last: only the KV cache is filled; logits() keeps the previous values).
   */
  forward(tokens: ArrayLike<number>, pos: number, wantAll = false, hiddenSum = 0, noLogits = false): void {
    this.check();
    const n = tokens.length;
    if (n === 0) return;
    if (pos + n > this.nCtx) {
      throw new AetherError('kv_cache_full', `context is full: ${pos} cached + ${n} new tokens > n_ctx ${this.nCtx}`);
    }
    if (wantAll && (!this.logitsAll || n > this.maxBatch)) throw new AetherError('invalid_argument', 'logits for every position need logitsAll and n <= maxBatch');
    for (let s = 0; s < n; s += this.maxBatch) {
      const chunk = Math.min(this.maxBatch, n - s);
      const tok = this.heap.i32(this.tokBuf, chunk);
      for (let i = 0; i < chunk; i++) tok[i] = tokens[s + i];
      const dv = this.heap.view();
      dv.setUint32(this.args + FWD.MODEL, this.model, true);
      dv.setUint32(this.args + FWD.TOKENS, this.tokBuf, true);
      dv.setInt32(this.args + FWD.N_TOKENS, chunk, true);
      dv.setInt32(this.args + FWD.POS, pos + s, true);
      // want_all: 1 every token's logits, 0 the last token's, -1 none (not the last batch, or noLogits)
      const none = !wantAll && !hiddenSum && (noLogits || s + chunk < n);
      dv.setInt32(this.args + FWD.WANT_ALL, wantAll ? 1 : none ? -1 : 0, true);
      dv.setUint32(this.args + FWD.HIDDEN_SUM, hiddenSum, true);
      this.poolStatus(this.core.ae_forward(this.pool, this.args), {
        op: 'forward', subject: `${chunk} tokens at position ${pos + s}, n_ctx ${this.nCtx}`, details: { pos: pos + s, n: chunk },
      });
    }
  }

  /**
   * Mean over `tokens` (run at positions 0..n-1; the KV cache then holds them) of the final-normed hidden
   * state: the model's last hidden layer with the output norm applied, the input of the output head.
   */
  meanHidden(tokens: ArrayLike<number>): Float32Array {
    this.check();
    const D = this.config.dim;
    this.heap.f32(this.hiddenBuf, D).fill(0);
    this.forward(tokens, 0, false, this.hiddenBuf);
    const out = this.heap.f32(this.hiddenBuf, D).slice();
    for (let i = 0; i < D; i++) out[i] /= tokens.length;
    return out;
  }
  private hiddenBuf = 0;

  /** Logits of the last forward: the last token, or row `row` when run with wantAll. A fresh copy. */
  logits(row = 0): Float32Array {
    const v = this.config.vocab_size;
    return this.heap.f32((this.core.ae_model_logits(this.model) >>> 0) + row * v * 4, v).slice();
  }

  /**
   * Sample from the last logits (modifies them: penalty and bias). `recent` feeds the repetition penalty.
   * Throws invalid_argument when the logit bias bans every token. A greedy pick without penalty, bias or
   * log-probabilities comes from the output head's chunk summaries (src/model/model.c ae_model_greedy): code that
   * writes the logits buffer itself calls `ae_model_logits_changed` first.
   */
  sample(p: SamplerParams, rngState: bigint, recent: number[]): SampleResult {
    this.check();
    const bias = p.logitBias ? [...p.logitBias] : [];
    if (bias.length > MAX_LOGIT_BIAS) throw new AetherError('invalid_argument', `logit bias has ${bias.length} entries; at most ${MAX_LOGIT_BIAS}`);
    const nTop = p.topLogprobs === undefined ? -1 : p.topLogprobs;
    if (!Number.isInteger(nTop) || nTop > MAX_TOP_LOGPROBS || nTop < -1) {
      throw new AetherError('invalid_argument', `top log-probabilities: ${p.topLogprobs} must be an integer in 0..${MAX_TOP_LOGPROBS}`);
    }
    const ids = this.heap.i32(this.biasIds, bias.length), vals = this.heap.f32(this.biasVals, bias.length);
    bias.forEach(([t, b], i) => { ids[i] = t; vals[i] = b; });
    const dv = this.heap.view(), s = this.sampler;
    dv.setFloat32(s + SMP.TEMPERATURE, p.temperature ?? 0, true);
    dv.setInt32(s + SMP.TOP_K, p.topK ?? 0, true);
    dv.setFloat32(s + SMP.TOP_P, p.topP ?? 1, true);
    dv.setFloat32(s + SMP.MIN_P, p.minP ?? 0, true);
    dv.setFloat32(s + SMP.REPEAT_PENALTY, p.repeatPenalty ?? 1, true);
    dv.setFloat32(s + SMP.FREQUENCY_PENALTY, p.frequencyPenalty ?? 0, true);
    dv.setFloat32(s + SMP.PRESENCE_PENALTY, p.presencePenalty ?? 0, true);
    const r = recent.slice(-MAX_RECENT);
    dv.setInt32(s + SMP.N_RECENT, r.length, true);
    const rv = this.heap.i32(this.recent, r.length);
    for (let i = 0; i < r.length; i++) rv[i] = r[i];
    dv.setBigUint64(s + SMP.RNG, rngState, true);
    const n = this.sampleLimit > 0 ? Math.min(this.sampleLimit, this.config.vocab_size) : this.config.vocab_size;
    dv.setInt32(s + SMP.N_BIAS, bias.length, true);
    dv.setInt32(s + SMP.N_TOP, nTop, true);
    // greedy without penalty, bias or log-probabilities: the output head's chunk summaries (src/model/model.c
    // ae_model_greedy: the same pick as the sampler's argmax, without reading every logit on this thread)
    const penalty = Math.fround(p.repeatPenalty ?? 1);
    const penalised = (penalty !== 1 && penalty > 0) || Math.fround(p.frequencyPenalty ?? 0) !== 0 || Math.fround(p.presencePenalty ?? 0) !== 0;
    const greedy = !(Math.fround(p.temperature ?? 0) > 0) && !penalised && bias.length === 0 && nTop < 0;
    const token = greedy ? this.core.ae_model_greedy(this.model, n) : this.core.ae_sample(s, this.core.ae_model_logits(this.model) >>> 0, n);
    if (!greedy && (penalised || bias.length)) this.core.ae_model_logits_changed(this.model);   // the sampler wrote them
    if (token < 0) throw new AetherError('invalid_argument', 'the logit bias bans every token of the vocabulary');
    const out: SampleResult = { token, rng: dv.getBigUint64(s + SMP.RNG, true) };
    if (nTop >= 0) {
      out.logprob = dv.getFloat32(s + SMP.LOGPROB, true);
      const k = Math.min(nTop, n);
      const ti = this.heap.i32(this.topIds, k), tl = this.heap.f32(this.topLps, k);
      out.top = Array.from({ length: k }, (_, i) => ({ token: ti[i], logprob: tl[i] }));
    }
    return out;
  }

  seedRng(seed: number): bigint {
    const lo = seed >>> 0, hi = Math.floor(seed / 2 ** 32) >>> 0;
    return BigInt.asUintN(64, BigInt(this.core.ae_seed_rng(lo, hi)));
  }

  /** Whether the FFN modules (fused, saturated, profile) can run this model: SwiGLU without post-FFN norms. */
  get ffnModulesSupported(): boolean { return (this.config.ffn_act ?? 'silu') === 'silu' && !this.config.post_norms; }

  /** Per-layer FFN mode switch (dense / fused / static / dynamic). */
  setFfnMode(layer: number, mode: keyof typeof FfnMode, aux = 0): void {
    if (mode !== 'dense' && !this.ffnModulesSupported) {
      throw new AetherError('unsupported', `FFN mode '${mode}' needs a SwiGLU FFN without post-FFN norms; ${this.config.arch} (ffn_act ${this.config.ffn_act ?? 'silu'}${this.config.post_norms ? ', post_norms' : ''}) runs the dense FFN only`);
    }
    checkStatus(this.core.ae_model_set_ffn_mode(this.model, layer, FfnMode[mode], aux),
      { op: `set FFN mode '${mode}'`, subject: `layer ${layer}`, details: { layer, mode } });
  }

  ffnActive(layer: number): number { return this.core.ae_model_ffn_active(this.model, layer); }

  /** Compression mode of a layer (src/model/model.h ae_cmp_mode): 'dense' or 'compressed' (its variant). */
  setCompressionMode(layer: number, mode: CompressionModeName): void {
    this.check();
    const code = CMP_MODES.indexOf(mode);
    if (code < 0) throw new AetherError('invalid_argument', `compression mode '${mode}' is not one of ${CMP_MODES.join(', ')}`);
    const st = this.core.ae_model_set_compression(this.model, layer, code);
    if (st === Status.UNSUPPORTED) {
      throw new AetherError('unsupported', mode === 'compressed'
        ? `layer ${layer} has no compressed FFN variant (write one with aether compress)`
        : `layer ${layer} has no dense FFN weights in this file (written by aether compress without --keep-dense)`, { layer, mode });
    }
    checkStatus(st, { op: `set compression '${mode}'`, subject: `layer ${layer}`, details: { layer, mode } });
  }
  compressionMode(layer: number): CompressionModeName { return CMP_MODES[this.core.ae_model_compression(this.model, layer)] ?? 'dense'; }
  /** Intermediate width of the layer's compressed variant (0: none). */
  compressedWidth(layer: number): number { return this.core.ae_model_cmp_width(this.model, layer); }

  /**
   * Calibration capture (src/model/model.h AE_CAP_*): with `ptr` != 0 the forward copies the inputs of
   * layer `layer`'s weight matrices into the area at `ptr` (captureFloats() floats); 0 turns it off.
   */
  setCapture(layer: number, ptr: number): void {
    checkStatus(this.core.ae_model_set_capture(this.model, layer, ptr), { op: 'set capture', subject: `layer ${layer}` });
  }
  /** Float offset of capture block `which` (0 attn input, 1 attention output, 2 FFN input, 3 h; 4 = total floats). */
  captureOffset(which: number): number { return this.core.ae_model_capture_offset(this.model, which); }

  /** Since the last resetCounters(): FFN neurons computed in `layer` (summed over tokens) and tokens run. */
  ffnCounters(layer: number): { active: number; tokens: number } {
    return { active: this.core.ae_model_counter(this.model, layer, 0), tokens: this.core.ae_model_counter(this.model, layer, 1) };
  }

  /** Zero the FFN counters and the time counters. */
  resetCounters(): void { this.core.ae_model_reset_counters(this.model); }

  /**
   * Time counters per (layer, op class) in the forward pass (thread 0 reads the clock at each step boundary;
   * measured cost in docs/PERFORMANCE.md). Off by default; turning them on (again) zeroes them.
   */
  setTiming(on: boolean): void {
    this.check();
    if (on && !this.timingBuf) this.timingBuf = this.allocAfterLoad((this.config.n_layers + 1) * OP_CLASS_NAMES.length * 8, 8, 'other', 'the timing counters');
    checkStatus(this.core.ae_model_set_timing(this.model, on ? this.timingBuf : 0), { op: 'set timing' });
    this.timingOn = on;
  }
  get timing(): boolean { return this.timingOn; }
  private timingBuf = 0;
  private timingOn = false;

  /**
   * Milliseconds per op class: `layers[l][op]` for each layer and `global[op]` (embed, output), op in
   * OP_CLASS_NAMES order; null when timing is off.
   */
  opTimes(): { ops: readonly string[]; layers: number[][]; global: number[] } | null {
    if (!this.timingOn) return null;
    const k = OP_CLASS_NAMES.length, L = this.config.n_layers;
    const all = Array.from(new Float64Array(this.heap.memory.buffer, this.timingBuf, (L + 1) * k));
    const layers: number[][] = [];
    for (let l = 0; l < L; l++) layers.push(all.slice(l * k, (l + 1) * k));
    return { ops: OP_CLASS_NAMES, layers, global: all.slice(L * k) };
  }

  /**
   * Attention statistics of every forward (profile-heads): on zeroes the accumulators; queries at positions
   * >= sinks + window are counted (src/model/model.h enum ae_head_stat).
   */
  setHeadStats(on: boolean, sinks: number, window: number): void {
    this.check();
    const n = this.threads * this.config.n_layers * this.config.n_heads * HEAD_STAT_NAMES.length;
    if (on && !this.headStatsBuf) this.headStatsBuf = this.allocAfterLoad(n * 8, 8, 'other', 'the head statistics');
    checkStatus(this.core.ae_model_set_head_stats(this.model, on ? this.headStatsBuf : 0, sinks, window),
      { op: 'set head statistics', subject: `sinks ${sinks}, window ${window}` });
  }
  private headStatsBuf = 0;

  /** The attention statistics summed over threads: [layer][head] -> { count, entropy, log_n, sink_mass, window_mass }. */
  readHeadStats(): Record<string, number>[][] {
    const L = this.config.n_layers, H = this.config.n_heads, k = HEAD_STAT_NAMES.length;
    const all = new Float64Array(this.heap.memory.buffer, this.headStatsBuf, this.threads * L * H * k);
    const out: Record<string, number>[][] = [];
    for (let l = 0; l < L; l++) {
      out.push([]);
      for (let h = 0; h < H; h++) {
        const r: Record<string, number> = {};
        HEAD_STAT_NAMES.forEach((name, i) => {
          let s = 0;
          for (let t = 0; t < this.threads; t++) s += all[((t * L + l) * H + h) * k + i];
          r[name] = s;
        });
        out[l].push(r);
      }
    }
    return out;
  }

  /** K (which 0) or V (1) of KV head `g` of `layer` at positions 0..n-1 as floats, row-major (n, head_dim). */
  readKv(layer: number, which: 0 | 1, g: number, n: number): Float32Array {
    const hd = this.config.head_dim;
    if (!this.kvReadBuf) this.kvReadBuf = this.allocAfterLoad(this.nCtx * hd * 4, 16, 'other', 'the KV read buffer');
    checkStatus(this.core.ae_model_kv_read(this.model, layer, which, g, 0, n, this.kvReadBuf),
      { op: 'read KV cache', subject: `layer ${layer}, ${which ? 'V' : 'K'} head ${g}, ${n} positions` });
    return this.heap.f32(this.kvReadBuf, n * hd).slice();
  }
  private kvReadBuf = 0;

  /** KV policy per layer (null: the plain cache). */
  kvPolicies: (KvPolicy | null)[] = [];
  /** KV heads marked local per layer (attend to the policy's sinks and window only). */
  localKv: Set<number>[] = [];
  /** KV heads stored locally per layer (a subset of localKv: only the sinks and the window are kept). */
  storedKv: Set<number>[] = [];

  private applyKvPolicy(p: KvPolicy | null, layer: number): void {
    const spec = new Int32Array(Math.max(2, 2 * (p?.ranges.length ?? 0)));
    p?.ranges.forEach((r, i) => { spec[2 * i] = r.end === null ? -1 : r.end; spec[2 * i + 1] = DTYPE_IDS[r.dtype]; });
    // a few bytes per call, from the bump allocator (before load: part of the runtime; after: plan.other)
    const buf = this.plan ? this.allocAfterLoad(spec.byteLength, 4, 'other', 'a KV policy') : this.heap.alloc(spec.byteLength, 4);
    this.heap.i32(buf, spec.length).set(spec);
    checkStatus(this.core.ae_model_set_kv_policy(this.model, layer, p?.ranges.length ?? 0, buf, p?.window?.size ?? 0,
      p?.window ? DTYPE_IDS[p.window.dtype] : 0, p?.sinks ?? 0), { op: 'set KV policy', subject: `${formatKvPolicy(p)} (layer ${layer < 0 ? 'all' : layer}, head_dim ${this.config.head_dim})` });
    const ls = layer < 0 ? this.kvPolicies.map((_, i) => i) : [layer];
    for (const l of ls) { this.kvPolicies[l] = p; if (!p?.window) { this.localKv[l].clear(); this.storedKv[l].clear(); } }
  }

  /** At load: a policy with a window where a layer needs one, then the heads' storage (no relayout: before init). */
  private applyLocalHeads(lh: { heads: number[][]; sinks: number; window: number }): void {
    const dt = this.kvTypes.k;
    lh.heads.forEach((hs, l) => {
      if (!hs.length) return;
      if (!this.kvPolicies[l]?.window) this.applyKvPolicy(parseKvPolicy(`sinks=${lh.sinks}:${dt},window=${lh.window}:${dt},rest=${dt}`, 'localHeads'), l);
      for (const g of hs) this.storeKvHead(l, g, true);
    });
  }

  private storeKvHead(layer: number, g: number, on: boolean): void {
    checkStatus(this.core.ae_model_set_kv_stored_local(this.model, layer, g, on ? 1 : 0), {
      op: `store KV head ${on ? 'locally' : 'fully'}`, subject: `layer ${layer}, KV head ${g}${this.kvPolicies[layer]?.window ? '' : ' (the layer has no KV policy with a window)'}`,
    });
    if (on) { this.storedKv[layer].add(g); this.localKv[layer].add(g); } else this.storedKv[layer].delete(g);
  }

  /**
   * Change the storage of KV heads at run time (on: only the sinks and the window kept; off: every position again,
   * the head still attends locally until setKvLocal(.., false)). The cache is re-carved and emptied (the caller
   * recomputes its tokens); when the new layout does not fit, nothing changes (out_of_memory).
   */
  setKvStored(changes: { layer: number; g: number; on: boolean }[]): void {
    this.check();
    const c = this.config;
    for (const { layer, g } of changes) {
      if (!Number.isInteger(layer) || layer < 0 || layer >= c.n_layers) throw new AetherError('invalid_argument', `layer ${layer} is out of range (0..${c.n_layers - 1})`);
      if (!Number.isInteger(g) || g < 0 || g >= c.n_kv_heads) throw new AetherError('invalid_argument', `KV head ${g} is out of range (0..${c.n_kv_heads - 1})`);
    }
    const todo = changes.filter(({ layer, g, on }) => this.storedKv[layer].has(g) !== on);
    if (!todo.length) return;
    const done: { layer: number; g: number; on: boolean; local: boolean }[] = [];
    try {
      for (const { layer, g, on } of todo) {
        const local = this.localKv[layer].has(g);
        this.storeKvHead(layer, g, on);
        done.push({ layer, g, on, local });
      }
      this.relayout();
    } catch (e) {
      // back to the previous storage: the same layout in the same arena, so the cached rows are untouched
      for (const { layer, g, on, local } of done.reverse()) { this.storeKvHead(layer, g, !on); if (!local) this.setKvLocal(layer, g, false); }
      if (done.length) this.relayout();
      throw e;
    }
  }

  /** Re-carve the arena after a KV layout change (in place when it fits, else a new one); the cache is emptied. */
  private relayout(): void {
    const need = Number(BigInt.asUintN(64, BigInt(this.core.ae_model_arena_size(this.model))));
    if (!need) throw new AetherError('config_error', 'the KV layout does not fit the model config');
    if (need > this.arenaSize) {
      // a larger arena: the old one stays reserved (bump allocator), counted in plan.other
      this.arena = this.allocAfterLoad(need, 64, 'other', 'the re-carved KV cache');
      this.plan.other += this.arenaSize - need;
      this.arenaSize = need;
    }
    const kv = this.kvBytes();
    this.plan.kvCache = kv;
    this.plan.scratch = this.arenaSize - kv;
    checkStatus(this.core.ae_model_relayout(this.model, this.arena, this.arenaSize), { op: 'KV cache relayout', subject: `${need} bytes` });
  }

  /** Bytes saved by the KV heads stored locally in `layer` (-1: all layers), K and V (net of their ring rows). */
  kvLocalSavedBytes(layer = -1): number { return this.core.ae_model_kv_local_saved(this.model, layer); }

  /**
   * Switch the KV policy of `layers` (default all) at run time; the cache is emptied (the caller recomputes its
   * tokens) and re-carved, in place when it fits in the current arena, else in a new one.
   */
  setKvPolicy(policy: string | KvPolicy | null, layers?: number[]): void {
    this.check();
    const p = resolveKvPolicy(policy);
    const ls = layers ?? this.kvPolicies.map((_, i) => i);
    for (const l of ls) {
      if (!Number.isInteger(l) || l < 0 || l >= this.config.n_layers) throw new AetherError('invalid_argument', `layer ${l} is out of range (0..${this.config.n_layers - 1})`);
    }
    for (const l of ls) this.applyKvPolicy(p, l);
    this.relayout();
  }

  /** Mark KV head `g` of `layer` local (attends to the sinks and the window only) or not; needs a policy with a window. */
  setKvLocal(layer: number, g: number, on: boolean): void {
    this.check();
    checkStatus(this.core.ae_model_set_kv_local(this.model, layer, g, on ? 1 : 0), {
      op: `mark KV head ${on ? 'local' : 'full'}`, subject: `layer ${layer}, KV head ${g}${this.kvPolicies[layer]?.window ? '' : ' (the layer has no KV policy with a window)'}`,
    });
    if (on) this.localKv[layer].add(g); else this.localKv[layer].delete(g);
  }

  /** KV cache bytes by dtype: allocated, and holding positions < `positions`. */
  kvCacheBytes(positions: number): { dtype: string; bytes: number; usedBytes: number }[] {
    const out = [];
    for (const dtype of ['f32', 'f16', 'q8_0', 'q4_0']) {
      const id = DTYPE_IDS[dtype];
      const bytes = this.core.ae_model_kv_bytes(this.model, id, this.nCtx);
      if (bytes > 0) out.push({ dtype, bytes, usedBytes: this.core.ae_model_kv_bytes(this.model, id, positions) });
    }
    return out;
  }

  /** Bytes of wasm memory: all of it, the weights (data section), the run state (KV cache included). */
  memoryBytes(): { wasm: number; weights: number; runState: number } {
    return { wasm: this.heap.memory.buffer.byteLength, weights: this.dataSize, runState: this.arenaSize };
  }

  /** Whether module `name` ('ffn-fused', 'ffn-saturated') was loaded (EngineOptions.modules). */
  hasModule(name: string): boolean { return name in this.modules; }

  /** A loaded tensor's table entry, or undefined. */
  tensorInfo(name: string): TensorInfo | undefined { return this.tensorTable.get(name); }

  /**
   * A loaded tensor's bytes in its file layout: a view into wasm memory (valid until the memory grows), or for a
   * tensor repacked at load a fresh copy unpacked to the file layout.
   */
  tensorBytes(name: string): Uint8Array {
    const t = this.tensorTable.get(name);
    if (!t) throw new AetherError('invalid_argument', `no tensor named '${name}'`);
    const v = this.heap.u8(this.dataBase + t.offset, t.bytes);
    if (!this.repacked.has(name)) return v;
    if (this.repackedR4.has(name)) {
      if (t.dtype === 'q8_0') return unpackQ8_0R4(v, t.shape[1], t.shape[0]);
      if (t.dtype === 'q4_K') return unpackQ4_KR4(v, t.shape[1], t.shape[0]);
      if (t.dtype === 'q6_K') return unpackQ6_KR4(v, t.shape[1], t.shape[0]);
      if (t.dtype === 'q5_K') return unpackQ5_KR4(v, t.shape[1], t.shape[0]);
      return unpackQ5R4(v, t.shape[1], t.shape[0], t.dtype === 'q5_1');
    }
    if (t.dtype === 'q5_K') return unpackQ5_KX(v);
    if (t.dtype === 'q6_K') return unpackQ6_KX(v);
    if (t.dtype === 'q3_K') return unpackQ3_KX(v);
    if (t.dtype === 'q5_0') return unpackQ5X8(v, 22, 2);
    if (t.dtype === 'q5_1') return unpackQ5X8(v, 24, 4);
    return unpackQ4_0R4(v, t.shape[1], t.shape[0]);
  }

  /** The load-time repack (EngineOptions.repack): C decides per tensor (ae_model_repack_tensor) and repacks in place. */
  private repackWeights(): void {
    const t0 = typeof performance !== 'undefined' ? performance.now() : Date.now();
    for (const [name, { layer, role }] of this.tensorRoles) {
      const r = this.core.ae_model_repack_tensor(this.model, layer, role);
      if (r < 0) checkStatus(r, { op: 'repack', subject: `tensor '${name}'` });
      if (r === 1 || r === 2) this.repacked.add(name);
      if (r === 2) this.repackedR4.add(name);   // q5_0 / q5_1 / q8_0 / q4_K / q5_K / q6_K in the relaxed build's row-group layouts (AE_*_R4)
    }
    this.repackMs = (typeof performance !== 'undefined' ? performance.now() : Date.now()) - t0;
  }
  /** Milliseconds the load-time repack took (0 when off). */
  repackMs = 0;

  /** Run-state buffer of the C model (0 x, 1 xb, 2 hb, 3 hb2, 4 tmp) as a fresh f32 view of `len` floats. */
  modelBuf(which: number, len: number): Float32Array { return this.heap.f32(this.core.ae_model_buf(this.model, which) >>> 0, len); }

  /** One layer's FFN alone on the n rows of x (modelBuf(0)): x[b] += FFN(rmsnorm(x[b])), in the layer's mode. */
  runFfnLayer(layer: number, n: number): void {
    this.check();
    if (!Number.isInteger(n) || n < 1 || n > this.maxBatch) throw new AetherError('invalid_argument', `runFfnLayer: n = ${n} must be in 1..${this.maxBatch}`);
    const dv = this.heap.view();
    dv.setUint32(this.args + FWD.MODEL, this.model, true);
    dv.setUint32(this.args + FWD.TOKENS, this.tokBuf, true);
    dv.setInt32(this.args + FWD.N_TOKENS, n, true);
    dv.setInt32(this.args + FWD.POS, layer, true);
    dv.setInt32(this.args + FWD.WANT_ALL, 0, true);
    dv.setUint32(this.args + FWD.HIDDEN_SUM, 0, true);
    this.poolStatus(this.core.ae_ffn_layer(this.pool, this.args), { op: `FFN of layer ${layer}`, details: { layer, n } });
  }

  get coreExports(): Exports { return this.core; }
  get modelPtr(): number { return this.model; }

  /**
   * Stop the workers and drop every reference to the wasm memory and instances. A shared memory (threads > 1)
   * is invisible to V8's external-memory accounting, so nothing would prompt a garbage collection and each
   * load/dispose cycle kept its memory (~8 MB for the tiny model, the whole model for a real one) until some
   * unrelated GC: report the released size as a short-lived ArrayBuffer so V8 schedules one (its pages are
   * never touched, so it costs no RSS). Measured in tests/soak.test.mjs and bench/soak.mjs.
   */
  dispose(): void {
    if (this.disposed) return;
    this.disposed = true;
    if (this.workers) {
      try { this.core.ae_pool_quit(this.pool); } catch { /* a dead worker or a trapped instance: terminate anyway */ }
      this.workers.terminate();
      this.workers = null;
    }
    const bytes = this.heap.memory.buffer.byteLength;
    const self = this as unknown as Record<string, unknown>;
    self.core = DISPOSED_CORE; self.modules = {}; self.heap = DISPOSED_HEAP;
    this.tensorTable.clear();
    if (this.threaded) gcHint(bytes);
  }
}

/** KV heads stored locally: per layer the KV head indices (a flat list: the same in every layer), optionally with the
 * sinks and window of the policy given to layers that have none with a window. */
export type LocalHeadsSpec = number[][] | { heads: number[][] | number[]; sinks?: number; window?: number };

/** A localHeads option checked against the config (invalid_argument naming the entry), with the defaults filled in. */
export function checkLocalHeads(o: NonNullable<EngineOptions['localHeads']>, cfg: { n_layers: number; n_kv_heads: number }): { heads: number[][]; sinks: number; window: number } {
  const bad = (msg: string) => new AetherError('invalid_argument', `localHeads: ${msg}`);
  if (o === 'file' || (!Array.isArray(o) && o?.heads === 'file')) throw bad("'file' needs the model file's attention_heads section (aether profile-heads -o); the engine alone takes head lists");
  const spec = Array.isArray(o) ? { heads: o } : o;
  if (!spec || typeof spec !== 'object' || !Array.isArray(spec.heads)) throw bad('expected per-layer arrays of KV head indices, or { heads, sinks?, window? }');
  const every = spec.heads.length > 0 && spec.heads.every((x) => typeof x === 'number');   // the same heads in every layer
  if (!every && spec.heads.length > cfg.n_layers) throw bad(`${spec.heads.length} layers given, the model has ${cfg.n_layers}`);
  const heads = Array.from({ length: cfg.n_layers }, (_, l) => {
    const hs = every ? spec.heads as number[] : (spec.heads as unknown[])[l] ?? [];
    if (!Array.isArray(hs)) throw bad(`layer ${l}: expected an array of KV head indices`);
    for (const g of hs as number[]) if (!Number.isInteger(g) || g < 0 || g >= cfg.n_kv_heads || g >= 64) throw bad(`layer ${l}: KV head ${JSON.stringify(g)} is out of range (0..${Math.min(cfg.n_kv_heads, 64) - 1})`);
    return [...new Set(hs as number[])].sort((a, b) => a - b);
  });
  const sinks = spec.sinks ?? 4, window = spec.window ?? 64;
  if (!Number.isInteger(sinks) || sinks < 0) throw bad(`sinks: expected an integer >= 0, got ${JSON.stringify(spec.sinks)}`);
  if (!Number.isInteger(window) || window < 1) throw bad(`window: expected an integer >= 1, got ${JSON.stringify(spec.window)}`);
  return { heads, sinks, window };
}

/** A kvPolicy option as a checked policy, or null (none). */
export function resolveKvPolicy(o: EngineOptions['kvPolicy']): KvPolicy | null {
  if (o === undefined || o === null) return null;
  if (typeof o === 'string') return parseKvPolicy(o, 'kvPolicy');
  return checkKvPolicy(o, 'kvPolicy');
}

/** The K and V dtypes of a kvDtype option (default f16), checked. */
export function resolveKvDtype(o: EngineOptions['kvDtype']): { k: KvDtype; v: KvDtype } {
  const one = (x: unknown, what: string): KvDtype => {
    if (typeof x !== 'string' || !(KV_DTYPES as readonly string[]).includes(x)) {
      throw new AetherError('invalid_argument', `${what} ${JSON.stringify(x)} is not a KV-cache dtype (${KV_DTYPES.join(', ')})`);
    }
    return x as KvDtype;
  };
  if (o === undefined) return { k: DEFAULT_KV_DTYPE, v: DEFAULT_KV_DTYPE };
  if (typeof o === 'string') { const t = one(o, 'kvDtype'); return { k: t, v: t }; }
  if (o && typeof o === 'object') return { k: one((o as any).k, 'kvDtype.k'), v: one((o as any).v, 'kvDtype.v') };
  return { k: one(o, 'kvDtype'), v: one(o, 'kvDtype') };
}

function align(x: number, a: number): number { return Math.ceil(x / a) * a; }
function mib(b: number): string { return b >= 2 ** 30 ? `${(b / 2 ** 30).toFixed(2)} GiB` : `${(b / 2 ** 20).toFixed(1)} MiB`; }

/**
 * The file layout of a q6_K matrix repacked at load by the relaxed build (src/kernels/kernels.h AE_Q6_K_X; the inverse
 * of ae_repack_q6_K_x, as ae_unpack_q6_K_x): 210-byte blocks whose bytes 0..191 are four groups of 48 B; group G's
 * vector i (i < 3) holds value 64G + 16i + e in bits 0-5 and bits 2i, 2i + 1 of value 64G + 48 + e in bits 6-7. The file
 * layout: ql[128] at 0, qh[64] at 128; value 128h + 32k + l: its low 4 bits in ql[64h + l + 32 (k & 1)] (high nibble
 * when k >= 2), its top 2 bits at bits 2k, 2k + 1 of qh[32h + l].
 */
/**
 * The file layout of a q3_K matrix repacked at load by the relaxed build (src/kernels/kernels.h AE_Q3_K_X; the inverse of
 * ae_repack_q3_K_x, as ae_unpack_q3_K_x): 110-byte blocks whose bytes 0..95 are two groups of 48 B (A, B, C) packing
 * the values u (0..7) of elements 128n + 16t + i; bytes 96..109 (scales, d) as q3_K's.
 */
export function unpackQ3_KX(src: Uint8Array): Uint8Array {
  const out = new Uint8Array(src.length);
  for (let o = 0; o < src.length; o += 110) {
    out.set(src.subarray(o + 96, o + 110), o + 96);
    for (let e = 0; e < 256; e++) {
      const n = e >> 7, t = (e >> 4) & 7, i = e & 15, g = o + 48 * n;
      const A = src[g + i], B = src[g + 16 + i], C = src[g + 32 + i];
      const u = t === 0 ? A & 7 : t === 1 ? (A >> 3) & 7 : t === 2 ? B & 7 : t === 3 ? (B >> 3) & 7 : t === 4 ? C & 7 : t === 5 ? (C >> 3) & 7
        : t === 6 ? (A >> 6) | (((C >> 6) & 1) << 2) : (B >> 6) | ((C >> 7) << 2);
      const j = (e >> 5) & 3, l = e & 31;
      out[o + 32 + 32 * n + l] |= (u & 3) << (2 * j);
      out[o + l] |= (u >> 2) << (4 * n + j);
    }
  }
  return out;
}

export function unpackQ6_KX(src: Uint8Array): Uint8Array {
  const out = src.slice(), q = new Uint8Array(256);
  for (let o = 0; o + 210 <= src.length; o += 210) {
    for (let G = 0; G < 4; G++) {
      const g = o + 48 * G;
      for (let e = 0; e < 16; e++) {
        for (let i = 0; i < 3; i++) q[64 * G + 16 * i + e] = src[g + 16 * i + e] & 0x3f;
        q[64 * G + 48 + e] = (src[g + e] >> 6) | ((src[g + 16 + e] >> 6) << 2) | ((src[g + 32 + e] >> 6) << 4);
      }
    }
    q6kFileValues(out, o, q);
  }
  return out;
}

/** q6_K's ql / qh (the block's bytes 0..191 at o) from its 256 unsigned 6-bit values q. */
function q6kFileValues(out: Uint8Array, o: number, q: Uint8Array): void {
  out.fill(0, o, o + 192);
  for (let v = 0; v < 256; v++) {
    const h = v >> 7, k = (v >> 5) & 3, l = v & 31;
    out[o + 64 * h + l + 32 * (k & 1)] |= k < 2 ? q[v] & 15 : (q[v] & 15) << 4;
    out[o + 128 + 32 * h + l] |= ((q[v] >> 4) & 3) << (2 * k);
  }
}

/**
 * The file layout of a q6_K matrix repacked at load by the relaxed build into row groups (src/kernels/kernels.h
 * AE_Q6_K_R4; the inverse of ae_repack_q6_K_r4, as ae_unpack_q6_K_r4): per super-block column one 840-byte record: the 4
 * rows' d (8 bytes), their scales in pairs (byte 8 + 8p + 2k + r = sc_k[2p + r]), then per sub-block j 48 bytes at
 * 72 + 48j: vector i (i < 3) byte 4k + e holds row k's value 16j + 4i + e in bits 0-5 and bits 2i, 2i + 1 of its value
 * 16j + 12 + e in bits 6-7.
 */
export function unpackQ6_KR4(src: Uint8Array, rows: number, cols: number): Uint8Array {
  const nb = cols / 256, rs = nb * 210, out = new Uint8Array(rows * rs), q = new Uint8Array(256);
  for (let g = 0; g < rows; g += 4) {
    const base = g * rs;
    for (let b = 0; b < nb; b++) {
      const rec = base + b * 840;
      for (let k = 0; k < 4; k++) {
        const o = base + k * rs + b * 210;
        for (let j = 0; j < 16; j++) for (let e = 0; e < 4; e++) {
          let top = 0;
          for (let i = 0; i < 3; i++) {
            const v = src[rec + 72 + 48 * j + 16 * i + 4 * k + e];
            q[16 * j + 4 * i + e] = v & 0x3f;
            top |= (v >> 6) << (2 * i);
          }
          q[16 * j + 12 + e] = top;
        }
        q6kFileValues(out, o, q);
        for (let p = 0; p < 8; p++) { out[o + 192 + 2 * p] = src[rec + 8 + 8 * p + 2 * k]; out[o + 193 + 2 * p] = src[rec + 9 + 8 * p + 2 * k]; }
        out[o + 208] = src[rec + 2 * k]; out[o + 209] = src[rec + 2 * k + 1];
      }
    }
  }
  return out;
}

/**
 * The file layout of a q5_K matrix repacked at load by the relaxed build (src/kernels/kernels.h AE_Q5_K_X; the inverse
 * of ae_repack_q5_K_x, as ae_unpack_q5_K_x): 176-byte blocks whose bytes 16..175 are two groups of 80 B; group G's
 * V_i (i < 4) holds value 128G + 16i + e in bits 0-4 and bits 0-2 of value 128G + 64 + 16i + e in bits 5-7, its V_4
 * byte e bits 3-4 of that value at bits 2i, 2i + 1. The file layout: qh[32] at 16 (bit j of qh[l]: bit 4 of value
 * 32j + l), qs[128] at 48 (value 32j + l's low 4 bits in qs[32 (j >> 1) + l], high nibble when j is odd).
 */
export function unpackQ5_KX(src: Uint8Array): Uint8Array {
  const out = src.slice(), q = new Uint8Array(256);
  for (let o = 0; o + 176 <= src.length; o += 176) {
    for (let G = 0; G < 2; G++) {
      const g = o + 16 + 80 * G;
      for (let i = 0; i < 4; i++)
        for (let e = 0; e < 16; e++) {
          const b = src[g + 16 * i + e];
          q[128 * G + 16 * i + e] = b & 0x1f;
          q[128 * G + 64 + 16 * i + e] = (b >> 5) | (((src[g + 64 + e] >> (2 * i)) & 3) << 3);
        }
    }
    out.fill(0, o + 16, o + 176);
    for (let e = 0; e < 256; e++) {
      const j = e >> 5, l = e & 31, at = o + 48 + 32 * (j >> 1) + l;
      out[at] |= (j & 1) ? (q[e] & 15) << 4 : q[e] & 15;
      out[o + 16 + l] |= ((q[e] >> 4) & 1) << j;
    }
  }
  return out;
}

/**
 * The file layout of a q5_0 / q5_1 matrix repacked at load (src/kernels/kernels.h AE_Q5_0_X8 / AE_Q5_1_X8; the inverse
 * of ae_repack_q5_0_x8 / _q5_1_x8, as ae_unpack_*): blocks of `bs` bytes (22 / 24) whose 20 bytes at `off` (2 / 4, after
 * the f16 fields) are T[4], A[16] instead of qh[4], qs[16]. With q the 5-bit values, A[p] = ((q[p] << 3) ^ 0x80) |
 * (q[p + 16] & 7) and T[p & 3] holds bit 3 / NOT bit 4 of q[p + 16] at bits 6 - 2 (p >> 2) / 7 - 2 (p >> 2).
 */
export function unpackQ5X8(src: Uint8Array, bs: number, off: number): Uint8Array {
  const out = src.slice(), q = new Uint8Array(32);
  for (let o = off; o < src.length; o += bs) {
    for (let p = 0; p < 16; p++) {
      const sh = 2 * (p >> 2), t = src[o + (p & 3)], a = src[o + 4 + p];
      q[p] = (a ^ 0x80) >> 3;
      q[p + 16] = (a & 7) | (((t >> (6 - sh)) & 1) << 3) | ((((t >> (7 - sh)) & 1) ^ 1) << 4);
    }
    let qh = 0;
    for (let e = 0; e < 32; e++) qh |= (q[e] >> 4) << e;
    for (let i = 0; i < 4; i++) out[o + i] = (qh >>> (8 * i)) & 255;
    for (let p = 0; p < 16; p++) out[o + 4 + p] = (q[p] & 15) | ((q[p + 16] & 15) << 4);
  }
  return out;
}

/**
 * The file layout of a q4_0 matrix repacked at load (src/kernels/kernels.h AE_Q4_0_R4; the inverse of
 * ae_repack_q4_0_r4, as ae_unpack_q4_0_r4): rows in groups of 4, per block column one 72-byte record (the 4 rows'
 * f16 scales, then chunks j < 4 of 16 bytes, row k's bytes 4k..4k+3: elements 8j+i low, 8j+4+i high nibble).
 */
export function unpackQ4_0R4(src: Uint8Array, rows: number, cols: number): Uint8Array {
  const nb = cols / 32, rs = nb * 18, out = new Uint8Array(rows * rs), e = new Uint8Array(32);
  for (let g = 0; g < rows; g += 4) {
    const base = g * rs;
    for (let b = 0; b < nb; b++) {
      const rec = base + b * 72;
      for (let k = 0; k < 4; k++) {
        const o = base + k * rs + b * 18;
        out[o] = src[rec + 2 * k]; out[o + 1] = src[rec + 2 * k + 1];
        for (let j = 0; j < 4; j++) {
          for (let i = 0; i < 4; i++) {
            const v = src[rec + 8 + 16 * j + 4 * k + i];
            e[8 * j + i] = v & 15; e[8 * j + 4 + i] = v >> 4;
          }
        }
        for (let i = 0; i < 16; i++) out[o + 2 + i] = e[i] | (e[i + 16] << 4);
      }
    }
  }
  return out;
}

/**
 * The file layout of a q8_0 matrix repacked at load by the relaxed build (src/kernels/kernels.h AE_Q8_0_R4; the inverse
 * of ae_repack_q8_0_r4, as ae_unpack_q8_0_r4): rows in groups of 4, per block column one 136-byte record: the 4 rows'
 * f16 scales, then chunks j < 8 of 16 bytes, row k's elements 4j..4j+3 at bytes 4k..4k+3.
 */
export function unpackQ8_0R4(src: Uint8Array, rows: number, cols: number): Uint8Array {
  const nb = cols / 32, rs = nb * 34, out = new Uint8Array(rows * rs);
  for (let g = 0; g < rows; g += 4) {
    const base = g * rs;
    for (let b = 0; b < nb; b++) {
      const rec = base + b * 136;
      for (let k = 0; k < 4; k++) {
        const o = base + k * rs + b * 34;
        out[o] = src[rec + 2 * k]; out[o + 1] = src[rec + 2 * k + 1];
        for (let j = 0; j < 8; j++) for (let i = 0; i < 4; i++) out[o + 2 + 4 * j + i] = src[rec + 8 + 16 * j + 4 * k + i];
      }
    }
  }
  return out;
}

/**
 * The file layout of a q4_K matrix repacked at load by the relaxed build (src/kernels/kernels.h AE_Q4_K_R4; the inverse
 * of ae_repack_q4_K_r4, as ae_unpack_q4_K_r4): rows in groups of 4, per super-block column one 576-byte record: the 4
 * rows' d (8 bytes), dmin (8), the 6-bit scales and mins as L0, L1, H (16 each: lane 4k + j holds sc_k[j] & 15 |
 * (sc_k[4 + j] & 15) << 4, the same of the mins, and their top 2 bits), then chunks (j, c) of 16 bytes at 64 + 16 (4j + c),
 * row k's bytes 4k + i: element 8c + i (low nibble) and 8c + 4 + i (high) of sub-block j. The scales go back into
 * ggml's 12-byte packing (a bijection).
 */
/** Row k's d, dmin and 12 scale bytes (q4_K / q5_K file layout, at out[o..o+16)) from an AE_Q4_K_R4 / AE_Q5_K_R4 record. */
function unpackK4Head(src: Uint8Array, rec: number, k: number, out: Uint8Array, o: number): void {
  const sc = [0, 0, 0, 0, 0, 0, 0, 0], mn = [0, 0, 0, 0, 0, 0, 0, 0];
  out[o] = src[rec + 2 * k]; out[o + 1] = src[rec + 2 * k + 1];
  out[o + 2] = src[rec + 8 + 2 * k]; out[o + 3] = src[rec + 9 + 2 * k];
  for (let j = 0; j < 4; j++) {
    const i = 4 * k + j, l0 = src[rec + 16 + i], l1 = src[rec + 32 + i], h = src[rec + 48 + i];
    sc[j] = (l0 & 15) | ((h & 3) << 4); sc[4 + j] = (l0 >> 4) | (((h >> 2) & 3) << 4);
    mn[j] = (l1 & 15) | (((h >> 4) & 3) << 4); mn[4 + j] = (l1 >> 4) | (((h >> 6) & 3) << 4);
  }
  for (let j = 0; j < 4; j++) {
    out[o + 4 + j] = (sc[j] & 63) | ((sc[4 + j] >> 4) << 6);
    out[o + 8 + j] = (mn[j] & 63) | ((mn[4 + j] >> 4) << 6);
    out[o + 12 + j] = (sc[4 + j] & 15) | ((mn[4 + j] & 15) << 4);
  }
}

export function unpackQ4_KR4(src: Uint8Array, rows: number, cols: number): Uint8Array {
  const nb = cols / 256, rs = nb * 144, out = new Uint8Array(rows * rs), e = new Uint8Array(256);
  for (let g = 0; g < rows; g += 4) {
    const base = g * rs;
    for (let b = 0; b < nb; b++) {
      const rec = base + b * 576;
      for (let k = 0; k < 4; k++) {
        const o = base + k * rs + b * 144;
        unpackK4Head(src, rec, k, out, o);
        for (let j = 0; j < 8; j++) for (let c = 0; c < 4; c++) for (let i = 0; i < 4; i++) {
          const v = src[rec + 64 + 16 * (4 * j + c) + 4 * k + i];
          e[32 * j + 8 * c + i] = v & 15; e[32 * j + 8 * c + 4 + i] = v >> 4;
        }
        for (let p = 0; p < 4; p++) for (let l = 0; l < 32; l++) out[o + 16 + 32 * p + l] = e[64 * p + l] | (e[64 * p + 32 + l] << 4);
      }
    }
  }
  return out;
}

/**
 * The file layout of a q5_K matrix repacked at load by the relaxed build into row groups (src/kernels/kernels.h
 * AE_Q5_K_R4; the inverse of ae_repack_q5_K_r4, as ae_unpack_q5_K_r4): per super-block column one 704-byte record: the
 * first 64 bytes as AE_Q4_K_R4's, then per sub-block j 80 bytes at 64 + 80j: V_i (i < 4) byte 4k + e holds row k's
 * value 32j + 4i + e in bits 0-4 and bits 0-2 of its value 32j + 16 + 4i + e in bits 5-7, V_4 (at + 64) byte 4k + e
 * bits 3-4 of that value at bits 2i, 2i + 1.
 */
export function unpackQ5_KR4(src: Uint8Array, rows: number, cols: number): Uint8Array {
  const nb = cols / 256, rs = nb * 176, out = new Uint8Array(rows * rs), q = new Uint8Array(256);
  for (let g = 0; g < rows; g += 4) {
    const base = g * rs;
    for (let b = 0; b < nb; b++) {
      const rec = base + b * 704;
      for (let k = 0; k < 4; k++) {
        const o = base + k * rs + b * 176;
        unpackK4Head(src, rec, k, out, o);
        for (let j = 0; j < 8; j++) for (let i = 0; i < 4; i++) for (let e = 0; e < 4; e++) {
          const at = rec + 64 + 80 * j, v = src[at + 16 * i + 4 * k + e], h = src[at + 64 + 4 * k + e];
          q[32 * j + 4 * i + e] = v & 0x1f;
          q[32 * j + 16 + 4 * i + e] = (v >> 5) | (((h >> (2 * i)) & 3) << 3);
        }
        for (let e = 0; e < 256; e++) {
          const j = e >> 5, l = e & 31;
          out[o + 48 + 32 * (j >> 1) + l] |= (j & 1) ? (q[e] & 15) << 4 : q[e] & 15;
          out[o + 16 + l] |= ((q[e] >> 4) & 1) << j;
        }
      }
    }
  }
  return out;
}

/**
 * The file layout of a q5_0 / q5_1 matrix repacked at load by the relaxed build (src/kernels/kernels.h AE_Q5_0_R4 /
 * AE_Q5_1_R4; the inverse of ae_repack_q5_0_r4 / _q5_1_r4, as ae_unpack_*): rows in groups of 4, per block column one
 * 88 / 96-byte record: the 4 rows' f16 scales (q5_1: then their f16 mins), chunks j < 4 of 16 bytes with the low 4 bits
 * of the 5-bit values as AE_Q4_0_R4's nibbles, then 16 bytes of 5th bits (byte 4k + i, bit 2j / 2j + 1: row k's
 * element 8j + i / 8j + 4 + i).
 */
export function unpackQ5R4(src: Uint8Array, rows: number, cols: number, q51: boolean): Uint8Array {
  const bs = q51 ? 24 : 22, rec = q51 ? 96 : 88, co = q51 ? 16 : 8, ho = q51 ? 80 : 72, qo = q51 ? 4 : 2;
  const nb = cols / 32, rs = nb * bs, out = new Uint8Array(rows * rs), q = new Uint8Array(32);
  for (let g = 0; g < rows; g += 4) {
    const base = g * rs;
    for (let b = 0; b < nb; b++) {
      const r0 = base + b * rec;
      for (let k = 0; k < 4; k++) {
        const o = base + k * rs + b * bs;
        out[o] = src[r0 + 2 * k]; out[o + 1] = src[r0 + 2 * k + 1];
        if (q51) { out[o + 2] = src[r0 + 8 + 2 * k]; out[o + 3] = src[r0 + 9 + 2 * k]; }
        for (let j = 0; j < 4; j++) {
          for (let i = 0; i < 4; i++) {
            const v = src[r0 + co + 16 * j + 4 * k + i], h = src[r0 + ho + 4 * k + i];
            q[8 * j + i] = (v & 15) | (((h >> (2 * j)) & 1) << 4);
            q[8 * j + 4 + i] = (v >> 4) | (((h >> (2 * j + 1)) & 1) << 4);
          }
        }
        let qh = 0;
        for (let e = 0; e < 32; e++) qh |= (q[e] >> 4) << e;
        for (let i = 0; i < 4; i++) out[o + qo + i] = (qh >>> (8 * i)) & 255;
        for (let i = 0; i < 16; i++) out[o + qo + 4 + i] = (q[i] & 15) | ((q[i + 16] & 15) << 4);
      }
    }
  }
  return out;
}
