// Every built module in wasm/: validates (wabt wasm-validate), imports only env.memory (+ declared
// function imports), shared memory for <name>.wasm / non-shared for <name>-st.wasm, static data inside
// its slot (__heap_base below the next slot's base), and SIMD128 opcodes inside the hot kernels
// (wasm-objdump -d). Missing wabt tools fail the test (they are part of the toolchain).
import test from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync, existsSync } from 'node:fs';
import { spawnSync } from 'node:child_process';
import { setFlagsFromString } from 'node:v8';
import { ROOT, DTYPE_ROWS } from './helpers/kernels.mjs';

// the -relaxed builds need relaxed SIMD (Node 20: behind a flag) to compile here
setFlagsFromString('--experimental-wasm-relaxed-simd');

const MODULES = [['core', 0], ['ffn-fused', 1], ['ffn-saturated', 2], ['kernels-test', 3]];
// Function imports a module may declare besides env.memory, as 'module.name': the core calls the FFN
// modules (src/model/forward.c; js/src/runtime/instance.ts wires them or stubs them) and reads the host clock
// for its time counters (env.ae_clock_ms, instance.ts ENV_FUNCS).
const ALLOWED_FUNC_IMPORTS = {
  core: ['ffn_fused.ae_ffn_fused_run', 'ffn_saturated.ae_ffn_saturated_run', 'env.ae_clock_ms'], 'ffn-fused': [], 'ffn-saturated': [], 'kernels-test': [],
};

function findModule(name) {
  for (const p of [`${ROOT}wasm/${name}.wasm`, `${ROOT}wasm/${name}`]) if (existsSync(p)) return p;
  return null;
}
function tool(name, args) {
  const r = spawnSync(name, args, { encoding: 'utf8', maxBuffer: 1 << 28 });
  if (r.error) assert.fail(`${name} is required (wabt): ${r.error.message}`);
  return r;
}
const built = [];
for (const [name, slot] of MODULES)
  for (const variant of ['', '-st', '-relaxed', '-st-relaxed']) {
    const path = findModule(name + variant);
    if (path) built.push({ name, variant, slot, path });
  }

test('kernels-test is built (both variants)', () => {
  assert.ok(built.some((m) => m.name === 'kernels-test' && m.variant === ''), 'wasm/kernels-test.wasm missing: run npm run build:wasm');
  assert.ok(built.some((m) => m.name === 'kernels-test' && m.variant === '-st'), 'wasm/kernels-test-st.wasm missing');
  assert.ok(built.some((m) => m.name === 'kernels-test' && m.variant === '-relaxed'), 'wasm/kernels-test-relaxed.wasm missing (needs clang >= 16)');
});

for (const m of built) {
  const label = `${m.name}${m.variant}`;
  const shared = !m.variant.startsWith('-st');
  test(`${label}: wasm-validate`, () => {
    const r = tool('wasm-validate', ['--enable-threads', ...(m.variant.endsWith('-relaxed') ? ['--enable-relaxed-simd'] : []), m.path]);
    assert.equal(r.status, 0, `wasm-validate ${m.path}: ${r.stderr}${r.stdout}`);
  });

  test(`${label}: imports, memory kind, exports, static data within slot ${m.slot}`, async () => {
    const mod = new WebAssembly.Module(readFileSync(m.path));
    const imports = WebAssembly.Module.imports(mod);
    const mem = imports.filter((i) => i.kind === 'memory');
    assert.deepEqual(mem.map((i) => `${i.module}.${i.name}`), ['env.memory'], 'exactly one memory import, env.memory');
    for (const i of imports.filter((i) => i.kind !== 'memory')) {
      assert.equal(i.kind, 'function', `unexpected ${i.kind} import ${i.module}.${i.name}`);
      assert.ok(ALLOWED_FUNC_IMPORTS[m.name].includes(`${i.module}.${i.name}`), `undeclared import ${i.module}.${i.name}`);
    }
    const names = WebAssembly.Module.exports(mod).map((e) => e.name);
    for (const e of ['__stack_pointer', '__heap_base', '__data_end']) assert.ok(names.includes(e), `exports ${e}`);
    // the memory kind must match the variant: instantiating with the other kind fails
    const good = new WebAssembly.Memory({ initial: 256, maximum: 65536, shared });
    const bad = new WebAssembly.Memory({ initial: 256, maximum: 65536, shared: !shared });
    const imp = (memory) => {
      const o = { env: { memory } };
      for (const f of ALLOWED_FUNC_IMPORTS[m.name]) { const [mod, name] = f.split('.'); (o[mod] ??= {})[name] = () => 0; }
      return o;
    };
    await assert.rejects(WebAssembly.instantiate(mod, imp(bad)), `${label} must not accept a ${shared ? 'non-shared' : 'shared'} memory`);
    const inst = await WebAssembly.instantiate(mod, imp(good));
    const heapBase = inst.exports.__heap_base.value, dataEnd = inst.exports.__data_end.value;
    const base = 0x10000 * (m.slot + 1), next = 0x10000 * (m.slot + 2);
    assert.ok(dataEnd >= base, `__data_end 0x${dataEnd.toString(16)} below slot base 0x${base.toString(16)}`);
    assert.ok(heapBase <= next, `__heap_base 0x${heapBase.toString(16)} beyond next slot 0x${next.toString(16)}`);
  });

  test(`${label}: SIMD128 opcodes in the hot kernels (wasm-objdump -d)`, () => {
    const r = tool('wasm-objdump', ['-d', m.path]);
    assert.equal(r.status, 0, r.stderr);
    const bodies = new Map();
    let cur = null;
    for (const line of r.stdout.split('\n')) {
      const h = /^[0-9a-f]+ func\[(\d+)\]/.exec(line);
      if (h) { cur = []; bodies.set(+h[1], cur); } else if (cur) cur.push(line);
    }
    const all = [...bodies.values()].map((b) => b.join('\n')).join('\n');
    for (const op of ['v128.load', 'f32x4.mul', 'i32x4.dot_i16x8_s']) assert.ok(all.includes(op), `${label} has no ${op}`);
    if (m.name !== 'kernels-test') return;
    // map table index -> function index via the element section, then check each hot kernel's body
    const elem = tool('wasm-objdump', ['-x', '-j', 'Elem', m.path]).stdout;
    const table = new Map();
    for (const e of elem.matchAll(/elem\[(\d+)\] = func\[(\d+)\]/g)) table.set(+e[1], +e[2]);
    const inst = new WebAssembly.Instance(new WebAssembly.Module(readFileSync(m.path)),
      { env: { memory: new WebAssembly.Memory({ initial: 256, maximum: 65536, shared }) } });
    // every weight dtype of the registry: vec_dot and matvec (and its batched kernel), then the other hot kernels
    // the relaxed builds: the i8 dot (wabt's name for i32x4.relaxed_dot_i8x16_i7x16_add_s) and relaxed_madd
    const relaxed = m.variant.endsWith('-relaxed');
    // dtypes whose dot kernels have relaxed variants (#if AE_RELAXED in their dot_*_simd128.c); the others compile
    // their plain code in the relaxed builds too
    // (f32 / f16 / q8_0 compile their plain code there: the same bits, measured as fast; docs/DESIGN.md "Relaxed SIMD")
    const RELAXED_KERNELS = ['q4_0', 'q4_K', 'q5_K', 'q6_K'];
    const FLOAT_OPS = ['f32x4.mul', 'f32x4.add', 'v128.load'];
    const QUANT_OPS = relaxed ? ['i32x4.dot_i8x16_i7x16_add_s', 'v128.load'] : ['i32x4.dot_i16x8_s', 'v128.load'];
    // q4_0 and the k-quants use the i16 form (i16x8.relaxed_dot_i8x16_i7x16_s: one pmaddubsw on x64), also in their
    // prefill GEMMs; the k-quants apply their sub-block scales with i32x4.dot_i16x8
    const I16 = ['i16x8.dot_i8x16_i7x16_s', 'v128.load'], I16K = [...I16, 'i32x4.dot_i16x8_s'];
    const RELAXED_I16 = { q4_0: I16, q4_K: I16K, q5_K: I16K, q6_K: I16K };
    const EXTRA_OPS = {   // what the current kernels are known to use besides the generic set
      'matvec q8_0': ['f32x4.mul'], 'matvec q4_0': ['f32x4.mul'],
      ...(relaxed ? {} : { 'vec_dot q4_K': ['i32x4.mul'], 'matvec q4_K': ['i32x4.mul'] }),
      // the plain q6_K matvec narrows two 16-element sums into one i16x8 and applies both scales with one dot_i16x8
      ...(relaxed ? {} : { 'vec_dot q6_K': ['i16x8.narrow_i32x4_s'], 'matvec q6_K': ['i16x8.narrow_i32x4_s'] }),
      // the plain k-quant GEMM multiplies the weights by their sub-block scales in i16
      ...(relaxed ? {} : { 'matmul q4_K': ['i16x8.mul'], 'matmul q5_K': ['i16x8.mul'], 'matmul q6_K': ['i16x8.mul'] }),
    };
    const KERNELS = [];
    for (const d of DTYPE_ROWS.filter((d) => d.kind !== 'A')) {
      ['vec_dot', 'matvec', ...(d.kind === 'WM' ? ['matmul'] : [])].forEach((k, which) => {
        const what = `${k} ${d.name}`;
        // the prefill GEMMs have a relaxed variant for q4_0 and the k-quants (gemm_q8act_simd128.c, gemm_k_simd128.c):
        // the plain instructions for the others
        const rel = relaxed && (k !== 'matmul' || ['q4_0', 'q4_K', 'q5_K', 'q6_K'].includes(d.name)) && RELAXED_KERNELS.includes(d.name);
        const base = d.act === 'f32' ? (rel ? FLOAT_OPS : ['f32x4.mul', 'f32x4.add', 'v128.load'])
          : (rel ? (RELAXED_I16[d.name] ?? QUANT_OPS) : ['i32x4.dot_i16x8_s', 'v128.load']);
        KERNELS.push([what, [...base, ...(EXTRA_OPS[what] ?? [])], inst.exports.kt_dtype_fn(d.ggmlId, which)]);
      });
    }
    const OTHER = [
      ['attention', ['f32x4.mul', 'f32x4.add', 'v128.load']],
      ['axpy_rows f32', ['f32x4.mul', 'f32x4.add', 'v128.load']], ['axpy_rows f16', ['f32x4.mul', 'f32x4.add', 'v128.load']],
      ['axpy_rows q8_0', ['f32x4.mul', 'f32x4.add', 'i32x4.extend_low_i16x8_s']], ['axpy_rows q4_0', ['f32x4.mul', 'f32x4.add', 'v128.and']],
      ['gather_dot', ['i32x4.dot_i16x8_s', 'v128.load']],
      ['attn_accum f32', ['f32x4.mul', 'f32x4.add', 'v128.load']], ['attn_accum f16', ['f32x4.mul', 'f32x4.add', 'v128.load']],
      ['attn_accum q8_0', ['f32x4.mul', 'f32x4.add', 'i32x4.extend_low_i16x8_s']], ['attn_accum q4_0', ['f32x4.mul', 'f32x4.add', 'v128.and']],
    ];
    OTHER.forEach(([what, ops], i) => KERNELS.push([what, ops, inst.exports.kt_kernel_fn(i)]));
    // the load-time repacked q4_0 layout (kernels.h AE_Q4_0_R4): its matvec and prefill GEMM
    const R4 = inst.exports.kt_q4_0_r4_type(), r4ops = relaxed ? ['i16x8.dot_i8x16_i7x16_s', 'v128.load32_splat'] : ['i32x4.dot_i16x8_s', 'v128.load32_splat'];
    KERNELS.push(['matvec q4_0_r4', r4ops, inst.exports.kt_dtype_fn(R4, 1)], ['matmul q4_0_r4', r4ops, inst.exports.kt_dtype_fn(R4, 2)]);
    // the load-time q5_0 layout (kernels.h AE_Q5_0_X8): its 5-bit expansion is one i16x8.mul of the splatted T bytes
    const X8 = inst.exports.kt_q5_0_x8_type(), x8ops = ['i32x4.dot_i16x8_s', 'i16x8.mul', 'v128.load32_splat'];
    KERNELS.push(['matvec q5_0_x8', x8ops, inst.exports.kt_dtype_fn(X8, 1)], ['matmul q5_0_x8', x8ops, inst.exports.kt_dtype_fn(X8, 2)]);
    const X81 = inst.exports.kt_q5_1_x8_type();
    KERNELS.push(['matvec q5_1_x8', x8ops, inst.exports.kt_dtype_fn(X81, 1)], ['matmul q5_1_x8', x8ops, inst.exports.kt_dtype_fn(X81, 2)]);
    for (let i = 0; i < KERNELS.length; i++) {
      const [what, ops, ti] = KERNELS[i];
      assert.ok(table.has(ti), `${what}: table index ${ti} not in the element section`);
      // a thin wrapper (vec_dot = the row kernel on one row) is followed through its direct calls
      const seen = new Set();
      const code = (f) => {
        if (seen.has(f)) return '';
        seen.add(f);
        const b = (bodies.get(f) ?? []).join('\n');
        return b + [...b.matchAll(/\bcall (\d+)/g)].map((c) => code(+c[1])).join('\n');
      };
      const body = code(table.get(ti));
      for (const op of ops) assert.ok(body.includes(op), `${what} (func[${table.get(ti)}]) has no ${op}`);
    }
    assert.equal(inst.exports.kt_kernel_fn(OTHER.length), -1, 'kernel list in sync with kt_kernel_fn');
  });
}
