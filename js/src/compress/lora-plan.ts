/**
 * LoRA rank plan (aether lora-plan): a PEFT `LoraConfig` (huggingface/peft, src/peft/tuners/lora/config.py) from the
 * spectral atlas, with per-module ranks in `rank_pattern` / `alpha_pattern`.
 *
 * Rules, per weight matrix of the atlas (both are the three zones; they differ in what "fragile" means):
 *   seed     : fragile = sigma1/sigma2 < 8 (the design's cliff score)         -> rank 32
 *              compressible (cliff >= 8)                                      -> rank 8
 *              compressible in the last 15% of depth ((layer + 1) / n_layers > 0.85) -> rank 16
 *   measured : the same zones with fragile = the matrix keeps < `keep` (0.9) of its activation-aware energy at 50%
 *              rank (aa_energy50; the plain energy50 when the atlas has no calibration), the criterion of the atlas'
 *              FFN modes (docs/QUALITY.md found sigma1/sigma2 uninformative: it is 1.02-1.85 for every matrix of
 *              tiny-llama-a, so the seed rule calls everything fragile).
 * A Hugging Face module fused from several atlas matrices (Phi-3's qkv_proj, gate_up_proj) takes the largest rank.
 * lora_alpha = alpha_ratio x r (2 by default, a common choice) and alpha_pattern keeps that ratio per module.
 * r is the most common rank; rank_pattern lists the modules whose rank differs from it.
 *
 * rank_pattern keys: `layers.N.self_attn.q_proj` etc. PEFT matches a key k against a module's full name with
 * re.match(rf"(.*\.)?({k})$", name) (peft/utils/other.py get_pattern_key; before 0.14: rf".*\.{k}$", which needs a
 * dot before the key). Keys that begin with `layers.` match `model.layers.N...` under both, and only layer N
 * (tests/lora-plan.test.mjs checks every key against every module name of the architecture with both matchers).
 */
import { AetherError } from '../errors.js';
import type { Atlas } from './analyze.js';

export type LoraRule = 'seed' | 'measured';

/** Hugging Face module (under model.layers.N.) of each atlas matrix, per architecture family. */
const HF_MODULES: Record<string, Record<string, string>> = {
  llama: { attn_q: 'self_attn.q_proj', attn_k: 'self_attn.k_proj', attn_v: 'self_attn.v_proj', attn_output: 'self_attn.o_proj',
    ffn_gate: 'mlp.gate_proj', ffn_up: 'mlp.up_proj', ffn_down: 'mlp.down_proj' },
  phi3: { attn_qkv: 'self_attn.qkv_proj', attn_q: 'self_attn.qkv_proj', attn_k: 'self_attn.qkv_proj', attn_v: 'self_attn.qkv_proj',
    attn_output: 'self_attn.o_proj', ffn_gate: 'mlp.gate_up_proj', ffn_up: 'mlp.gate_up_proj', ffn_down: 'mlp.down_proj' },
};
/** Architectures whose HF module names are the llama ones (Qwen2/3, Gemma 1-3, SmolLM2, Llama 2/3). */
const LLAMA_NAMED = ['llama', 'qwen2', 'qwen3', 'gemma', 'gemma2', 'gemma3'];

export function hfModuleMap(arch: string): Record<string, string> {
  if (arch === 'phi3') return HF_MODULES.phi3;
  if (LLAMA_NAMED.includes(arch)) return HF_MODULES.llama;
  throw new AetherError('unsupported', `lora-plan: no Hugging Face module names known for architecture '${arch}'`);
}

export interface LoraPlanOptions {
  rule?: LoraRule;
  /** measured rule: energy threshold (default the atlas' rule.keep, else 0.9) */
  keep?: number;
  /** seed rule: cliff threshold (default 8) */
  cliff?: number;
  /** lora_alpha / r (default 2) */
  alphaRatio?: number;
  ranks?: { fragile: number; compressible: number; late: number };
  lateFraction?: number;
  baseModel?: string | null;
}

/** The LoraConfig fields written, with PEFT's names; the rest keep PEFT's defaults when the file is loaded. */
export interface PeftLoraConfig {
  peft_type: 'LORA';
  task_type: 'CAUSAL_LM';
  base_model_name_or_path: string | null;
  r: number;
  lora_alpha: number;
  lora_dropout: number;
  target_modules: string[];
  rank_pattern: Record<string, number>;
  alpha_pattern: Record<string, number>;
  bias: 'none';
  fan_in_fan_out: boolean;
  use_rslora: boolean;
  use_dora: boolean;
  init_lora_weights: boolean;
  modules_to_save: null;
  layers_to_transform: null;
  layers_pattern: null;
  inference_mode: boolean;
}

export interface LoraPlanEntry { layer: number; module: string; key: string; rank: number; zone: 'fragile' | 'compressible' | 'compressible-late'; from: string[]; score: number }

export function isLateLayer(layer: number, nLayers: number, lateFraction = 0.15): boolean {
  return (layer + 1) / nLayers > 1 - lateFraction + 1e-12;
}

export function loraPlan(atlas: Atlas, arch: string, nLayers: number, opts: LoraPlanOptions = {}): { config: PeftLoraConfig; entries: LoraPlanEntry[] } {
  const rule = opts.rule ?? 'seed';
  if (rule !== 'seed' && rule !== 'measured') throw new AetherError('invalid_argument', `--rule: expected seed or measured, got '${rule}'`);
  const map = hfModuleMap(arch);
  const keep = opts.keep ?? atlas.rule?.keep ?? 0.9, cliff = opts.cliff ?? 8, ratio = opts.alphaRatio ?? 2;
  const ranks = opts.ranks ?? { fragile: 32, compressible: 8, late: 16 };
  if (!(ratio > 0)) throw new AetherError('invalid_argument', `alpha ratio must be > 0, got ${ratio}`);
  if (!atlas?.layers?.length) throw new AetherError('invalid_argument', 'lora-plan: the atlas has no layers');
  const byKey = new Map<string, LoraPlanEntry>();
  for (const L of atlas.layers) {
    if (!(L.layer >= 0 && L.layer < nLayers)) throw new AetherError('format_error', `compression.atlas: layer ${L.layer} outside 0..${nLayers - 1}`);
    for (const [name, m] of Object.entries(L.matrices)) {
      const mod = map[name];
      if (!mod) continue;
      let fragile: boolean, score: number;
      if (rule === 'seed') { score = m.cliff; fragile = !(m.cliff >= cliff); }
      else {
        score = m.aa_energy50 ?? m.energy50;
        if (typeof score !== 'number') throw new AetherError('format_error', `compression.atlas: layer ${L.layer} ${name} has no energy50`);
        fragile = !(score >= keep);
      }
      const late = isLateLayer(L.layer, nLayers, opts.lateFraction);
      const zone: LoraPlanEntry['zone'] = fragile ? 'fragile' : late ? 'compressible-late' : 'compressible';
      const rank = fragile ? ranks.fragile : late ? ranks.late : ranks.compressible;
      const key = `layers.${L.layer}.${mod}`;
      const prev = byKey.get(key);
      if (!prev) byKey.set(key, { layer: L.layer, module: mod.split('.').pop()!, key, rank, zone, from: [name], score });
      else {
        prev.from.push(name);
        if (rank > prev.rank) { prev.rank = rank; prev.zone = zone; prev.score = score; }
      }
    }
  }
  const entries = [...byKey.values()].sort((a, b) => a.layer - b.layer || a.key.localeCompare(b.key));
  if (entries.length === 0) throw new AetherError('invalid_argument', 'lora-plan: no atlas matrix maps to a Hugging Face module');
  // r = the most common rank (ties: the smaller), so rank_pattern lists the exceptions only
  const count = new Map<number, number>();
  for (const e of entries) count.set(e.rank, (count.get(e.rank) ?? 0) + 1);
  const r = [...count.entries()].sort((a, b) => b[1] - a[1] || a[0] - b[0])[0][0];
  const alpha = (x: number) => Math.round(ratio * x);
  const rank_pattern: Record<string, number> = {}, alpha_pattern: Record<string, number> = {};
  for (const e of entries) if (e.rank !== r) { rank_pattern[e.key] = e.rank; alpha_pattern[e.key] = alpha(e.rank); }
  const target_modules = [...new Set(entries.map((e) => e.module))].sort();
  const config: PeftLoraConfig = {
    peft_type: 'LORA', task_type: 'CAUSAL_LM', base_model_name_or_path: opts.baseModel ?? null,
    r, lora_alpha: alpha(r), lora_dropout: 0.05, target_modules, rank_pattern, alpha_pattern,
    bias: 'none', fan_in_fan_out: false, use_rslora: false, use_dora: false, init_lora_weights: true,
    modules_to_save: null, layers_to_transform: null, layers_pattern: null, inference_mode: false,
  };
  return { config, entries };
}
