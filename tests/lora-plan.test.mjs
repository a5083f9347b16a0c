// aether lora-plan: PEFT LoraConfig JSON from the spectral atlas. Field names and types as PEFT's LoraConfig
// dataclass declares them (huggingface/peft src/peft/tuners/lora/config.py), rank_pattern keys checked against every
// Hugging Face module name of llama and phi3 with both of PEFT's key matchers, the three-zone rule's boundaries
// (cliff 8, energy keep, last 15% of depth), and the CLI on tiny-llama-a and on a generated Phi-3 model.
import test from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { execFileSync } from 'node:child_process';
import { repoRoot } from './helpers/paths.mjs';
import { Q8 } from './helpers/ffn.mjs';
import { generateGGUF } from './helpers/gen-gguf.mjs';
import { loraPlan, isLateLayer, hfModuleMap } from '../dist/src/compress/lora-plan.js';

const CLI = path.join(repoRoot, 'dist/cli/aether.js');
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'aether-lora-'));

// PEFT LoraConfig fields -> the JSON types their annotations allow (config.py; PeftConfig for peft_type, task_type,
// base_model_name_or_path, inference_mode)
const PEFT_TYPES = {
  peft_type: ['string'], task_type: ['string'], base_model_name_or_path: ['string', 'null'], inference_mode: ['boolean'],
  r: ['int'], lora_alpha: ['int'], lora_dropout: ['number'], target_modules: ['string[]', 'string', 'null'],
  rank_pattern: ['dict<int>'], alpha_pattern: ['dict<int>'], bias: ['none|all|lora_only'], fan_in_fan_out: ['boolean'],
  use_rslora: ['boolean'], use_dora: ['boolean'], init_lora_weights: ['boolean', 'string'], modules_to_save: ['string[]', 'null'],
  layers_to_transform: ['int[]', 'int', 'null'], layers_pattern: ['string[]', 'string', 'null'],
};
function typeOk(v, t) {
  switch (t) {
    case 'string': return typeof v === 'string';
    case 'null': return v === null;
    case 'boolean': return typeof v === 'boolean';
    case 'int': return Number.isInteger(v);
    case 'number': return typeof v === 'number' && Number.isFinite(v);
    case 'string[]': return Array.isArray(v) && v.every((x) => typeof x === 'string');
    case 'int[]': return Array.isArray(v) && v.every(Number.isInteger);
    case 'dict<int>': return v !== null && typeof v === 'object' && !Array.isArray(v) && Object.values(v).every((x) => Number.isInteger(x) && x > 0);
    case 'none|all|lora_only': return ['none', 'all', 'lora_only'].includes(v);
    default: return false;
  }
}
function checkSchema(cfg) {
  for (const k of Object.keys(cfg)) assert.ok(k in PEFT_TYPES, `field '${k}' is not a LoraConfig field`);
  for (const [k, types] of Object.entries(PEFT_TYPES)) {
    if (!(k in cfg)) continue;
    assert.ok(types.some((t) => typeOk(cfg[k], t)), `${k} = ${JSON.stringify(cfg[k])} is not ${types.join(' | ')}`);
  }
  for (const k of ['r', 'lora_alpha', 'target_modules', 'rank_pattern', 'alpha_pattern', 'peft_type']) assert.ok(k in cfg, k);
  assert.equal(cfg.peft_type, 'LORA');
  assert.deepEqual(Object.keys(cfg.alpha_pattern).sort(), Object.keys(cfg.rank_pattern).sort());
}

// PEFT's matchers of rank_pattern keys (peft/utils/other.py get_pattern_key): >= 0.14 and before
const matchNew = (key, name) => new RegExp(`^(.*\\.)?(${key})$`).test(name);
const matchOld = (key, name) => new RegExp(`^.*\\.${key}$`).test(name);
/** The rank PEFT gives module `name`: the first matching key in insertion order, else r. */
const peftRank = (cfg, name, match) => { for (const [k, r] of Object.entries(cfg.rank_pattern)) if (match(k, name)) return r; return cfg.r; };

function hfNames(arch, L) {
  const mods = arch === 'phi3' ? ['self_attn.qkv_proj', 'self_attn.o_proj', 'mlp.gate_up_proj', 'mlp.down_proj']
    : ['self_attn.q_proj', 'self_attn.k_proj', 'self_attn.v_proj', 'self_attn.o_proj', 'mlp.gate_proj', 'mlp.up_proj', 'mlp.down_proj'];
  const out = [];
  for (let l = 0; l < L; l++) for (const m of mods) out.push(`model.layers.${l}.${m}`);
  return out;
}

/** A synthetic atlas: matrix `name` of layer l gets cliff / energy from f(l, name). */
function atlasOf(L, names, f) {
  return { version: 1, rule: { keep: 0.9, cliff: 8 }, layers: Array.from({ length: L }, (_, l) => ({
    layer: l, mode: '50', mode_cliff: 'preserve',
    matrices: Object.fromEntries(names.map((n) => { const { cliff, e } = f(l, n); return [n, { rows: 8, cols: 8, sigma1: cliff, sigma2: 1, cliff, stable_rank: 1, alpha: 2, alpha_xmin: 1, alpha_tail: 4, alpha_ks: 0.1, energy75: e, energy50: e, aa_energy75: e, aa_energy50: e }]; })),
  })) };
}
const LLAMA = ['attn_q', 'attn_k', 'attn_v', 'attn_output', 'ffn_gate', 'ffn_up', 'ffn_down'];
const PHI3 = ['attn_qkv', 'attn_output', 'ffn_gate', 'ffn_up', 'ffn_down'];

test('last 15% of depth: (layer + 1) / n_layers > 0.85', () => {
  const late = (L) => Array.from({ length: L }, (_, l) => l).filter((l) => isLateLayer(l, L));
  assert.deepEqual(late(6), [5]);
  assert.deepEqual(late(20), [17, 18, 19]);   // exactly 15%
  assert.deepEqual(late(32), [27, 28, 29, 30, 31]);
  assert.deepEqual(late(2), [1]);
  assert.deepEqual(late(40), [34, 35, 36, 37, 38, 39]);
});

test('seed rule: cliff 8 boundary, three zones, PEFT key matching (llama, both matchers, every module)', () => {
  const L = 20;
  // layer l, matrix index i: cliff 8 exactly for even layers' q, 7.999 for odd layers' q, 100 elsewhere
  const atlas = atlasOf(L, LLAMA, (l, n) => ({ cliff: n === 'attn_q' ? (l % 2 ? 7.999 : 8) : n === 'ffn_down' && l === 3 ? 1.5 : 100, e: 0.5 }));
  const { config, entries } = loraPlan(atlas, 'llama', L, { rule: 'seed' });
  checkSchema(config);
  assert.deepEqual(config.target_modules, ['down_proj', 'gate_proj', 'k_proj', 'o_proj', 'q_proj', 'up_proj', 'v_proj']);
  assert.equal(config.r, 8);
  assert.equal(config.lora_alpha, 16);
  const want = (l, mod) => {
    const cliff = mod === 'self_attn.q_proj' ? (l % 2 ? 7.999 : 8) : mod === 'mlp.down_proj' && l === 3 ? 1.5 : 100;
    return cliff < 8 ? 32 : l >= 17 ? 16 : 8;
  };
  for (const name of hfNames('llama', L)) {
    const [, l, mod] = /^model\.layers\.(\d+)\.(.+)$/.exec(name);
    for (const prefix of ['', 'base_model.model.']) {
      assert.equal(peftRank(config, prefix + name, matchNew), want(Number(l), mod), `new matcher ${prefix}${name}`);
      if (prefix) assert.equal(peftRank(config, prefix + name, matchOld), want(Number(l), mod), `old matcher ${prefix}${name}`);
      assert.equal(peftRank(config, name, matchOld), want(Number(l), mod), `old matcher ${name}`);
    }
  }
  for (const [k, r] of Object.entries(config.rank_pattern)) assert.equal(config.alpha_pattern[k], 2 * r);
  assert.equal(entries.filter((e) => e.zone === 'fragile').length, 10 + 1);
  assert.equal(entries.filter((e) => e.zone === 'compressible-late').length, 3 * 7 - 2);   // layers 17-19, q of 17 and 19 fragile
});

test('measured rule: energy boundary at keep; phi3 fused modules take the largest rank; PEFT keys', () => {
  const L = 32;
  const atlas = atlasOf(L, PHI3, (l, n) => ({ cliff: 1.2, e: n === 'ffn_up' && l === 4 ? 0.8999 : n === 'ffn_gate' && l === 5 ? 0.9 : n === 'attn_qkv' && l === 30 ? 0.5 : 0.95 }));
  const { config } = loraPlan(atlas, 'phi3', L, { rule: 'measured' });
  checkSchema(config);
  assert.deepEqual(config.target_modules, ['down_proj', 'gate_up_proj', 'o_proj', 'qkv_proj']);
  assert.equal(config.r, 8);
  const want = (l, mod) => (mod === 'mlp.gate_up_proj' && l === 4) || (mod === 'self_attn.qkv_proj' && l === 30) ? 32 : l >= 27 ? 16 : 8;
  for (const name of hfNames('phi3', L)) {
    const [, l, mod] = /^model\.layers\.(\d+)\.(.+)$/.exec(name);
    assert.equal(peftRank(config, name, matchNew), want(Number(l), mod), name);
    assert.equal(peftRank(config, name, matchOld), want(Number(l), mod), name);
    assert.equal(peftRank(config, 'base_model.model.' + name, matchNew), want(Number(l), mod), name);
  }
  // the seed rule on the same atlas: every matrix is fragile (cliff 1.2), so r = 32 and no pattern
  const seed = loraPlan(atlas, 'phi3', L, { rule: 'seed' }).config;
  assert.equal(seed.r, 32); assert.deepEqual(seed.rank_pattern, {});
  assert.throws(() => loraPlan(atlas, 'phi3', L, { rule: 'other' }), (e) => e.code === 'invalid_argument');
  assert.throws(() => hfModuleMap('gpt2'), (e) => e.code === 'unsupported');
  assert.throws(() => loraPlan(atlas, 'phi3', 4), (e) => e.code === 'format_error', 'atlas layers beyond n_layers');
});

test('aether lora-plan CLI: tiny-llama-a (seed: all fragile; measured with calibration) and a generated Phi-3', () => {
  const seedOut = path.join(tmp, 'seed.json');
  const seed = JSON.parse(execFileSync(process.execPath, [CLI, 'lora-plan', Q8, '-o', seedOut, '--json'], { encoding: 'utf8' }));
  const cfg = JSON.parse(fs.readFileSync(seedOut, 'utf8'));
  checkSchema(cfg);
  assert.deepEqual(seed.config, cfg);
  assert.equal(seed.entries.length, 42);
  assert.ok(seed.entries.every((e) => e.zone === 'fragile' && e.score < 8), 'sigma1/sigma2 < 8 everywhere on tiny-llama-a');
  assert.equal(cfg.r, 32);
  assert.equal(cfg.base_model_name_or_path, 'tiny-llama-a');
  const measOut = path.join(tmp, 'measured.json');
  const meas = JSON.parse(execFileSync(process.execPath, [CLI, 'lora-plan', Q8, '-o', measOut, '--rule', 'measured', '--calib', path.join(repoRoot, 'tests/fixtures/tiny-llama-a/val.txt'), '--docs', '0:67', '--max-tokens', '512', '--json'], { encoding: 'utf8' }));
  checkSchema(meas.config);
  for (const e of meas.entries) {
    const fragile = e.score < 0.9;
    assert.equal(e.zone, fragile ? 'fragile' : e.layer === 5 ? 'compressible-late' : 'compressible', `${e.key} score ${e.score}`);
  }
  // generated Phi-3 (fused qkv and gate_up in the GGUF): module names qkv_proj / gate_up_proj
  const { file } = generateGGUF('phi3', 'f32', 7);
  const phiOut = path.join(tmp, 'phi3.json');
  const phi = JSON.parse(execFileSync(process.execPath, [CLI, 'lora-plan', file, '-o', phiOut, '--rule', 'measured', '--json'], { encoding: 'utf8' }));
  checkSchema(phi.config);
  assert.deepEqual(phi.config.target_modules, ['down_proj', 'gate_up_proj', 'o_proj', 'qkv_proj']);
  assert.deepEqual(phi.entries.map((e) => e.key).sort(), hfNames('phi3', 2).map((n) => n.replace(/^model\./, '')).sort());
  assert.ok(phi.entries.find((e) => e.module === 'gate_up_proj').from.sort().join() === 'ffn_gate,ffn_up');
  // errors: missing -o, bad rule
  assert.throws(() => execFileSync(process.execPath, [CLI, 'lora-plan', Q8, '--json'], { encoding: 'utf8', stdio: 'pipe' }), /-o PLAN.json is required/);
  assert.throws(() => execFileSync(process.execPath, [CLI, 'lora-plan', Q8, '-o', phiOut, '--rule', 'x', '--json'], { encoding: 'utf8', stdio: 'pipe' }), /expected seed or measured/);
});
