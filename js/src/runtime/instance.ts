/** Instantiate a set of Aether modules over one memory, wiring cross-module imports. */
import { AetherError } from '../errors.js';
import { Status } from './abi.js';

export type Exports = Record<string, any>;

/** Module names as they appear in import declarations (C `import_module`) -> file names. */
const IMPORT_MODULE_NAMES: Record<string, string> = { ffn_fused: 'ffn-fused', ffn_saturated: 'ffn-saturated' };

/** Host functions a module may import from `env` besides the memory: the clock of the time counters (forward.c). */
const ENV_FUNCS: Record<string, (...a: any[]) => unknown> = {
  ae_clock_ms: typeof performance !== 'undefined' ? () => performance.now() : () => Date.now(),
};

/**
 * Instantiate `modules` (name -> compiled module) over `memory`. Modules without function imports go
 * first; a function import from a module that is not loaded gets a stub returning AE_ERR_UNSUPPORTED.
 * `stackTops` gives each module instance the top of its own stack region.
 */
export function instantiateSet(modules: Record<string, WebAssembly.Module>, memory: WebAssembly.Memory,
  stackTops: Record<string, number>): Record<string, Exports> {
  const out: Record<string, Exports> = {};
  const names = Object.keys(modules).sort((a, b) => deps(modules[a]) - deps(modules[b]));
  for (const name of names) {
    const imports: Record<string, Record<string, WebAssembly.ImportValue>> = { env: { memory } };
    for (const imp of WebAssembly.Module.imports(modules[name])) {
      if (imp.kind !== 'function') continue;
      const from = IMPORT_MODULE_NAMES[imp.module] ?? imp.module;
      const fn = imp.module === 'env' ? ENV_FUNCS[imp.name] : out[from]?.[imp.name];
      (imports[imp.module] ??= {})[imp.name] = typeof fn === 'function' ? fn : () => Status.UNSUPPORTED;
    }
    let inst: WebAssembly.Instance;
    try {
      inst = new WebAssembly.Instance(modules[name], imports);
    } catch (e) {
      throw new AetherError('wasm_error', `cannot instantiate wasm module '${name}': ${(e as Error).message}`);
    }
    const ex = inst.exports as Exports;
    const top = stackTops[name];
    if (!top || !ex.__stack_pointer) throw new AetherError('wasm_error', `module '${name}' has no stack assigned`);
    ex.__stack_pointer.value = top;
    out[name] = ex;
  }
  return out;
}

function deps(m: WebAssembly.Module): number {
  return WebAssembly.Module.imports(m).filter((i) => i.kind === 'function').length;
}
