#!/usr/bin/env node
// Writes the JS mirror of the C ABI from the C sources, so nothing is copied by hand:
//   js/src/generated/abi.ts   dtype registry rows (src/kernels/dtypes.inc), status codes, config keys,
//                             tensor roles and their names, bad-tensor reasons, .rknot check codes,
//                             FFN modes / down modes / profile accumulators, struct offsets
//                             (ae_forward_args, ae_sampler, ae_ffn_aux, ae_pool), module slots
//   src/model/abi_check.c     static_asserts that the struct offsets above are what the compiler lays out
// Conventions it reads: enum members `AE_X = <integer>,` optionally followed on the same line by a
// comment whose first token is a quoted name (`/* "name": ... */`), used for messages or JS keys.
//
//   npm run gen:abi            write both files
//   node scripts/gen-abi.mjs --check   exit 1 if either file differs from what would be written
//   --root DIR                 read and write the tree at DIR instead of this repository
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = (() => {
  const i = process.argv.indexOf('--root');
  return i > 0 ? path.resolve(process.argv[i + 1]) : path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
})();
/** The C sources the mirror is read from (relative to the repository root). */
export const INPUTS = ['src/kernels/dtypes.inc', 'src/core/status.h', 'src/core/common.h', 'src/core/pool.h', 'src/model/model.h',
  'src/model/sampler.h', 'src/format/rknot.h', 'src/kernels/ffn_aux.h', 'CMakeLists.txt'];
export const OUT_TS = 'js/src/generated/abi.ts';
export const OUT_C = 'src/model/abi_check.c';
const read = (p) => fs.readFileSync(path.join(ROOT, p), 'utf8');

function fail(msg) { throw new Error(`gen-abi: ${msg}`); }

function parseInt0(s, where) {
  const t = s.trim().replace(/^\((.*)\)$/, '$1').replace(/[uU]$/, '');
  if (!/^-?(0x[0-9a-fA-F]+|\d+)$/.test(t)) fail(`${where}: '${s}' is not an integer literal`);
  return t.startsWith('-') ? -Number(t.slice(1)) : Number(t);
}

/** Members of `enum NAME { ... }` in file: [{ cname, value, label }] (label: the quoted name of its comment). */
function parseEnum(file, name) {
  const src = read(file);
  const m = new RegExp(`enum\\s+${name}\\s*\\{([\\s\\S]*?)\\};`).exec(src);
  if (!m) fail(`enum ${name} not found in ${file}`);
  const out = [];
  const re = /\b(AE_\w+)\s*=\s*([-\w()]+)\s*,?[ \t]*(\/\*([\s\S]*?)\*\/)?/g;
  for (const e of m[1].matchAll(re)) {
    const label = e[4] !== undefined ? /^\s*"([^"]*)"/.exec(e[4])?.[1] : undefined;
    out.push({ cname: e[1], value: parseInt0(e[2], `${file} ${e[1]}`), label });
  }
  if (!out.length) fail(`enum ${name} in ${file} has no members`);
  return out;
}

/** Value of `#define NAME <integer or a member of enums>`. */
function parseDefine(file, name, enums = []) {
  const m = new RegExp(`#define\\s+${name}\\s+(\\S+)`).exec(read(file));
  if (!m) fail(`#define ${name} not found in ${file}`);
  const e = enums.find((x) => x.cname === m[1]);
  return e ? e.value : parseInt0(m[1], `${file} ${name}`);
}

// wasm32 sizes and alignments of the scalar types the mirrored structs use
const SCALARS = {
  int8_t: 1, uint8_t: 1, char: 1, int16_t: 2, uint16_t: 2, ae_fp16: 2,
  int32_t: 4, uint32_t: 4, int: 4, unsigned: 4, float: 4, size_t: 4, uintptr_t: 4,
  int64_t: 8, uint64_t: 8, double: 8,
};

/** Field offsets of `typedef struct [tag] { ... } NAME;` laid out for wasm32: { fields: [[name, off]], size }. */
function parseStruct(file, name) {
  const src = read(file);
  const m = new RegExp(`typedef\\s+struct(?:\\s+\\w+)?\\s*\\{([^{}]*)\\}\\s*${name}\\s*;`).exec(src);
  if (!m) fail(`struct ${name} not found in ${file}`);
  const body = m[1].replace(/\/\*[\s\S]*?\*\//g, '').replace(/\/\/.*$/gm, '');
  const fields = [];
  let off = 0, maxAlign = 1;
  for (const declRaw of body.split(';')) {
    const decl = declRaw.replace(/\bconst\b/g, ' ').trim().replace(/\s+/g, ' ');
    if (!decl) continue;
    const dm = /^(\w+)\s*(.+)$/.exec(decl);
    if (!dm) fail(`${file} ${name}: cannot read '${decl}'`);
    const base = dm[1];
    for (const d0 of dm[2].split(',')) {
      const d = d0.trim();
      const dd = /^(\*?)\s*(\w+)\s*(?:\[(\w+)\])?$/.exec(d);
      if (!dd) fail(`${file} ${name}: cannot read declarator '${d}'`);
      const ptr = dd[1] === '*';
      const size1 = ptr ? 4 : SCALARS[base];
      if (!size1) fail(`${file} ${name}.${dd[2]}: type '${base}' has no known wasm32 size (add it to SCALARS)`);
      const count = dd[3] ? parseInt0(dd[3], `${file} ${name}.${dd[2]}`) : 1;
      const align = size1;
      off = Math.ceil(off / align) * align;
      fields.push([dd[2], off]);
      off += size1 * count;
      maxAlign = Math.max(maxAlign, align);
    }
  }
  return { fields, size: Math.ceil(off / maxAlign) * maxAlign };
}

function parseDtypes() {
  const src = read('src/kernels/dtypes.inc');
  const rows = [];
  for (const m of src.matchAll(/^AE_DTYPE\(([^)]*)\)/gm)) {
    const f = m[1].split(',').map((s) => s.trim());
    if (f.length !== 9) fail(`dtypes.inc: row '${m[0]}' has ${f.length} fields, expected 9`);
    const [id, name, ggml, blck, bytes, act, kind, s0, s1] = f;
    if (!['A', 'W', 'WM'].includes(kind)) fail(`dtypes.inc: ${name}: kind '${kind}', expected A, W or WM`);
    rows.push({
      id, name, ggmlId: parseInt0(ggml, name), blockSize: parseInt0(blck, name), typeSize: parseInt0(bytes, name),
      act, kind, scaleOffsets: [s0, s1].map((s) => parseInt0(s, name)).filter((v) => v >= 0),
    });
  }
  if (!rows.length) fail('dtypes.inc: no rows');
  for (const r of rows) {
    const a = rows.find((x) => x.id === r.act);
    if (!a) fail(`dtypes.inc: ${r.name}: activation dtype ${r.act} has no row`);
    r.act = a.name;
  }
  return rows;
}

/** { KEY: value } from enum members, KEY = C name without `prefix` (or the label when byLabel). */
function keyed(members, prefix, byLabel = false) {
  const o = {};
  for (const e of members) {
    let k;
    if (byLabel) { k = e.label; if (k === undefined) fail(`${e.cname} has no quoted name`); }
    else if (e.cname.startsWith(prefix)) k = e.cname.slice(prefix.length);
    else fail(`${e.cname} does not start with ${prefix}`);
    o[k] = e.value;
  }
  return o;
}
/** labels indexed by value (values ascending from 0; unassigned values get ''). */
function labels(members) {
  const out = [];
  for (const e of members) {
    if (e.value < out.length) fail(`${e.cname} = ${e.value}: values must ascend for a name list`);
    if (e.label === undefined) fail(`${e.cname} has no quoted name`);
    while (out.length < e.value) out.push('');
    out.push(e.label);
  }
  return out;
}
function offsets(st) {
  const o = {};
  for (const [n, off] of st.fields) o[n.toUpperCase()] = off;
  o.SIZE = st.size;
  return o;
}

/** TypeScript literal of a JSON-like value, one line. */
function lit(v) {
  if (Array.isArray(v)) return `[${v.map(lit).join(', ')}]`;
  if (typeof v === 'string') return `'${v.replace(/\\/g, '\\\\').replace(/'/g, "\\'")}'`;
  if (typeof v === 'number') return String(v);
  if (v && typeof v === 'object') {
    const key = (k) => (/^[A-Za-z_$][\w$]*$/.test(k) ? k : lit(k));
    return `{ ${Object.entries(v).map(([k, x]) => `${key(k)}: ${lit(x)}`).join(', ')} }`;
  }
  fail(`cannot write ${v}`);
}

export function generate() {
  const dtypes = parseDtypes();
  const status = parseEnum('src/core/status.h', 'ae_status');
  const arch = parseEnum('src/model/model.h', 'ae_arch');
  const ffnAct = parseEnum('src/model/model.h', 'ae_ffn_act');
  const cfg = parseEnum('src/model/model.h', 'ae_config_key');
  const role = parseEnum('src/model/model.h', 'ae_role');
  const bad = parseEnum('src/model/model.h', 'ae_bad_reason');
  const ffnMode = parseEnum('src/model/model.h', 'ae_ffn_mode');
  const opClass = parseEnum('src/model/model.h', 'ae_op_class').filter((e) => e.label !== undefined);
  const headStat = parseEnum('src/model/model.h', 'ae_head_stat').filter((e) => e.label !== undefined);
  const firstLayerRole = parseDefine('src/model/model.h', 'AE_T_FIRST_LAYER_ROLE', role);
  const rknot = parseEnum('src/format/rknot.h', 'ae_rknot_error');
  const downMode = parseEnum('src/kernels/ffn_aux.h', 'ae_ffn_down_mode');
  const stat = parseEnum('src/kernels/ffn_aux.h', 'ae_ffn_stat');
  const fwd = parseStruct('src/model/model.h', 'ae_forward_args');
  const smp = parseStruct('src/model/sampler.h', 'ae_sampler');
  const aux = parseStruct('src/kernels/ffn_aux.h', 'ae_ffn_aux');
  const pool = parseStruct('src/core/pool.h', 'ae_pool');
  const slots = {};
  for (const m of read('CMakeLists.txt').matchAll(/^\s*ae_wasm_module\(([\w-]+)\s+(\d+)/gm)) slots[m[1]] = Number(m[2]);
  if (!Object.keys(slots).length) fail('CMakeLists.txt: no ae_wasm_module(name slot ...) calls');

  const layerRoles = {}, globalRoles = {};
  for (const r of role) {
    if (r.label === undefined) continue;
    (r.value < firstLayerRole ? globalRoles : layerRoles)[r.label] = r.value;
  }
  const weightNames = dtypes.filter((d) => d.kind !== 'A').map((d) => d.name);

  const L = [];
  L.push('// Generated by scripts/gen-abi.mjs from the C sources: do not edit. Change the C side and run');
  L.push('// `npm run gen:abi`; tests/abi-mirror.test.mjs fails when this file is stale.');
  L.push('');
  L.push('/** One row of the dtype registry (src/kernels/dtypes.inc). */');
  L.push('export interface DTypeRow {');
  L.push('  /** C enum name (AE_<id>). */');
  L.push('  readonly id: string;');
  L.push('  /** Name in .rknot / GGUF, suffix of the kernels. */');
  L.push('  readonly name: string;');
  L.push('  /** ggml type id (GGUF tensor info `type`). */');
  L.push('  readonly ggmlId: number;');
  L.push('  /** Elements per block (1 for plain floats). */');
  L.push('  readonly blockSize: number;');
  L.push('  /** Bytes per block. */');
  L.push('  readonly typeSize: number;');
  L.push('  /** Name of the activation dtype a row is dotted with (vec_dot_type). */');
  L.push('  readonly act: string;');
  L.push("  /** 'A' activations only; 'W' weights; 'WM' weights with their own batched kernel. */");
  L.push("  readonly kind: 'A' | 'W' | 'WM';");
  L.push('  /** Byte offsets of the f16 block scales (NaN/Inf checks). */');
  L.push('  readonly scaleOffsets: readonly number[];');
  L.push('}');
  L.push('');
  L.push('export const DTYPE_ROWS: readonly DTypeRow[] = [');
  for (const d of dtypes) L.push(`  ${lit(d)},`);
  L.push('];');
  L.push('/** Dtypes a tensor may have (kind W / WM). */');
  L.push(`export type WeightDTypeName = ${weightNames.map((n) => `'${n}'`).join(' | ')};`);
  L.push(`export const WEIGHT_DTYPE_NAMES: readonly WeightDTypeName[] = ${lit(weightNames)};`);
  L.push('');
  L.push('/** enum ae_status (src/core/status.h) */');
  L.push(`export const Status = ${lit(keyed(status.map((e) => ({ ...e, cname: e.cname.replace(/^AE_ERR_/, 'AE_') })), 'AE_'))} as const;`);
  L.push(`export const STATUS_NAMES: readonly string[] = ${lit(labels(status))};`);
  L.push('/** enum ae_arch (src/model/model.h) */');
  L.push(`export const Arch = ${lit(Object.fromEntries(Object.entries(keyed(arch, 'AE_ARCH_')).map(([k, v]) => [k.toLowerCase(), v])))} as const;`);
  L.push('/** enum ae_ffn_act (values of Cfg.FFN_ACT) */');
  L.push(`export const FfnAct = ${lit(keyed(ffnAct, '', true))} as const;`);
  L.push('/** enum ae_config_key */');
  L.push(`export const Cfg = ${lit(keyed(cfg, 'AE_CFG_'))} as const;`);
  L.push('/** enum ae_role */');
  L.push(`export const Role = ${lit(keyed(role, 'AE_T_'))} as const;`);
  L.push('/** Global tensor name -> role (layer -1). */');
  L.push(`export const GLOBAL_TENSOR_ROLES: Readonly<Record<string, number>> = ${lit(globalRoles)};`);
  L.push('/** Per-layer tensor name (after `blk.N.`) -> role. */');
  L.push(`export const LAYER_TENSOR_ROLES: Readonly<Record<string, number>> = ${lit(layerRoles)};`);
  L.push('/** enum ae_bad_reason (ae_model_bad_reason) */');
  L.push(`export const BadReason = ${lit(keyed(bad, 'AE_BAD_'))} as const;`);
  L.push(`export const BAD_TENSOR_REASONS: readonly string[] = ${lit(labels(bad))};`);
  L.push('/** enum ae_rknot_error (src/format/rknot.h) */');
  L.push(`export const RknotCheck = ${lit(keyed(rknot, 'AE_RKNOT_'))} as const;`);
  L.push(`export const RKNOT_CHECK_NAMES: readonly string[] = ${lit(labels(rknot))};`);
  L.push('/** enum ae_ffn_mode */');
  L.push(`export const FfnMode = ${lit(keyed(ffnMode, '', true))} as const;`);
  L.push('/** enum ae_op_class: op classes of the per-layer time counters (ae_model_set_timing), in counter order */');
  L.push(`export const OP_CLASS_NAMES: readonly string[] = ${lit(labels(opClass))};`);
  L.push('/** enum ae_head_stat: attention statistics per (thread, layer, head) (ae_model_set_head_stats), in buffer order */');
  L.push(`export const HEAD_STAT_NAMES: readonly string[] = ${lit(labels(headStat))};`);
  L.push('/** enum ae_ffn_down_mode (src/kernels/ffn_aux.h) */');
  L.push(`export const DOWN_MODE = ${lit(keyed(downMode, '', true))} as const;`);
  L.push('/** enum ae_ffn_stat: profile accumulators per neuron (doubles); N per neuron */');
  L.push(`export const ST = ${lit(keyed(stat, 'AE_FFN_ST_'))} as const;`);
  L.push('/** |silu(g)| histogram (AE_FFN_HIST_*) */');
  L.push(`export const HIST = ${lit({ LO: parseDefine('src/kernels/ffn_aux.h', 'AE_FFN_HIST_LO'), PER: parseDefine('src/kernels/ffn_aux.h', 'AE_FFN_HIST_PER'), BINS: parseDefine('src/kernels/ffn_aux.h', 'AE_FFN_HIST_BINS') })} as const;`);
  L.push(`export const AUX_MAGIC = 0x${parseDefine('src/kernels/ffn_aux.h', 'AE_FFN_AUX_MAGIC').toString(16)};`);
  L.push('');
  L.push('/** Byte offsets of ae_forward_args fields (src/model/model.h) and its size. */');
  L.push(`export const FWD = ${lit(offsets(fwd))} as const;`);
  L.push('/** ae_sampler (src/model/sampler.h) */');
  L.push(`export const SMP = ${lit(offsets(smp))} as const;`);
  L.push('/** ae_ffn_aux (src/kernels/ffn_aux.h) */');
  L.push(`export const AUX = ${lit(offsets(aux))} as const;`);
  L.push('/** ae_pool (src/core/pool.h) */');
  L.push(`export const POOL = ${lit(offsets(pool))} as const;`);
  L.push('');
  L.push('/** Static-data slot of each wasm module (CMakeLists.txt ae_wasm_module): data at 0x10000 * (slot + 1). */');
  L.push(`export const MODULE_SLOTS = ${lit(slots)} as const;`);
  L.push('/** AE_HOST_BASE (src/core/common.h): first byte of linear memory the host allocates. */');
  L.push(`export const HOST_BASE = 0x${parseDefine('src/core/common.h', 'AE_HOST_BASE').toString(16)};`);
  L.push('');
  const ts = L.join('\n');

  const C = [];
  C.push('/* Generated by scripts/gen-abi.mjs: do not edit (npm run gen:abi). The struct layouts that');
  C.push(' * js/src/generated/abi.ts mirrors, checked against the compiler: a failing assert here means the');
  C.push(' * mirror is stale. */');
  C.push('#include "model/model.h"');
  C.push('#include "model/sampler.h"');
  C.push('#include "kernels/ffn_aux.h"');
  C.push('#include "core/pool.h"');
  C.push('');
  C.push('#define AE_ABI_AT(S, F, OFF) static_assert(__builtin_offsetof(S, F) == (OFF), #S "." #F " moved: run npm run gen:abi")');
  C.push('#define AE_ABI_SIZE(S, N) static_assert(sizeof(S) == (N), #S " size changed: run npm run gen:abi")');
  for (const [sname, st] of [['ae_forward_args', fwd], ['ae_sampler', smp], ['ae_ffn_aux', aux], ['ae_pool', pool]]) {
    for (const [f, off] of st.fields) C.push(`AE_ABI_AT(${sname}, ${f}, ${off});`);
    C.push(`AE_ABI_SIZE(${sname}, ${st.size});`);
  }
  C.push('');
  return { [OUT_TS]: ts, [OUT_C]: C.join('\n') };
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const check = process.argv.includes('--check');
  const files = generate();
  let stale = 0;
  for (const [rel, text] of Object.entries(files)) {
    const p = path.join(ROOT, rel);
    const have = fs.existsSync(p) ? fs.readFileSync(p, 'utf8') : null;
    if (have === text) continue;
    if (check) { console.error(`${rel} is stale: run npm run gen:abi`); stale++; continue; }
    fs.mkdirSync(path.dirname(p), { recursive: true });
    fs.writeFileSync(p, text);
    console.log(`wrote ${rel}`);
  }
  if (stale) process.exit(1);
}
