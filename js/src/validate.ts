/**
 * Validation of public API arguments: every bad value is an AetherError('invalid_argument') naming the option
 * and what was expected (never a TypeError from deep inside, never a silent clamp).
 */
import { AetherError } from './errors.js';

function describe(v: unknown): string {
  if (typeof v === 'number') return String(v);
  if (typeof v === 'string') return JSON.stringify(v.length > 40 ? v.slice(0, 40) + '...' : v);
  if (v === null) return 'null';
  if (Array.isArray(v)) return 'an array';
  return typeof v;
}

function bad(field: string, v: unknown, expected: string): never {
  throw new AetherError('invalid_argument', `${field}: expected ${expected}, got ${describe(v)}`, { field, value: typeof v === 'number' || typeof v === 'string' ? v : typeof v });
}

/** undefined, or an integer in [min, max]. */
export function optInt(field: string, v: unknown, min: number, max = Number.MAX_SAFE_INTEGER): number | undefined {
  if (v === undefined) return undefined;
  if (typeof v !== 'number' || !Number.isInteger(v) || v < min || v > max) {
    bad(field, v, max === Number.MAX_SAFE_INTEGER ? `an integer >= ${min}` : `an integer in ${min}..${max}`);
  }
  return v;
}

/** undefined, or a finite number in [min, max]. */
export function optNum(field: string, v: unknown, min = -Infinity, max = Infinity): number | undefined {
  if (v === undefined) return undefined;
  if (typeof v !== 'number' || !Number.isFinite(v) || v < min || v > max) {
    const range = min === -Infinity && max === Infinity ? '' : min === -Infinity ? ` <= ${max}` : max === Infinity ? ` >= ${min}` : ` in [${min}, ${max}]`;
    bad(field, v, `a finite number${range}`);
  }
  return v;
}

export function optBool(field: string, v: unknown): boolean | undefined {
  if (v === undefined) return undefined;
  if (typeof v !== 'boolean') bad(field, v, 'true or false');
  return v;
}

export function optSignal(field: string, v: unknown): AbortSignal | undefined {
  if (v === undefined || v === null) return undefined;
  if (typeof v !== 'object' || typeof (v as AbortSignal).aborted !== 'boolean' || typeof (v as AbortSignal).addEventListener !== 'function') {
    bad(field, v, 'an AbortSignal');
  }
  return v as AbortSignal;
}

/** The options argument itself: undefined or a plain object. */
export function optionsObject(field: string, v: unknown): Record<string, unknown> {
  if (v === undefined || v === null) return {};
  if (typeof v !== 'object' || Array.isArray(v)) bad(field, v, 'an options object');
  return v as Record<string, unknown>;
}

/** A prompt: a string, or a non-empty array of integer token ids (range checked by the caller). */
export function checkPrompt(v: unknown): string | number[] {
  if (typeof v === 'string') return v;
  if (Array.isArray(v) || (ArrayBuffer.isView(v) && !(v instanceof DataView))) {
    const a = Array.from(v as ArrayLike<unknown>);
    a.forEach((t, i) => { if (typeof t !== 'number' || !Number.isInteger(t)) bad(`prompt[${i}]`, t, 'an integer token id'); });
    return a as number[];
  }
  return bad('prompt', v, 'a string or an array of token ids');
}

/** `stop`: a string (one stop sequence) or an array of strings. */
export function checkStop(v: unknown): string[] | undefined {
  if (v === undefined || v === null) return undefined;
  if (typeof v === 'string') return [v];
  if (!Array.isArray(v)) bad('stop', v, 'a string or an array of strings');
  (v as unknown[]).forEach((s, i) => { if (typeof s !== 'string') bad(`stop[${i}]`, s, 'a string'); });
  return v as string[];
}

/** Hardware threads of this machine (Node: os.availableParallelism; browsers: navigator.hardwareConcurrency). */
export async function hardwareThreads(isNode: boolean): Promise<number | undefined> {
  try {
    if (isNode) {
      const os = await import('node:os');
      return typeof os.availableParallelism === 'function' ? os.availableParallelism() : os.cpus().length;
    }
    const n = (globalThis as { navigator?: { hardwareConcurrency?: number } }).navigator?.hardwareConcurrency;
    return typeof n === 'number' && n > 0 ? n : undefined;
  } catch {
    return undefined;
  }
}

/** threads: 'auto' never picks more than this many (docs/DESIGN.md "Threads": decode streams the weights, and a few
 * cores already move what the memory gives; only 1 and 2 threads were measured on this project's machines). */
export const AUTO_THREADS_MAX = 4;

/**
 * Physical cores of a Linux machine: the distinct sibling sets under `root` (sysfs: cpuN/topology/core_cpus_list, or
 * thread_siblings_list on older kernels). undefined where sysfs is missing or unreadable.
 */
export async function physicalCores(root = '/sys/devices/system/cpu'): Promise<number | undefined> {
  try {
    const fs = await import('node:fs');
    const path = await import('node:path');
    const sets = new Set<string>();
    for (const name of fs.readdirSync(root)) {
      if (!/^cpu\d+$/.test(name)) continue;
      const topo = path.join(root, name, 'topology');
      let list: string | undefined;
      for (const f of ['core_cpus_list', 'thread_siblings_list']) {
        try { list = fs.readFileSync(path.join(topo, f), 'utf8').trim(); break; } catch { /* the other name */ }
      }
      if (list) sets.add(list);
    }
    return sets.size > 0 ? sets.size : undefined;
  } catch {
    return undefined;
  }
}

/**
 * What threads: 'auto' means: the physical cores (Node on Linux: sysfs, within os.availableParallelism, which follows
 * the process's CPU affinity; elsewhere the hardware threads, and in browsers half of navigator.hardwareConcurrency
 * from 4 up, since browsers count SMT siblings), at most AUTO_THREADS_MAX; 1 when nothing is known.
 */
export async function autoThreads(isNode: boolean): Promise<number> {
  const hw = await hardwareThreads(isNode);
  let n = hw ?? 1;
  if (isNode) {
    const os = await import('node:os');
    const cores = os.platform() === 'linux' ? await physicalCores() : undefined;
    if (cores !== undefined) n = Math.min(n, cores);
  } else if (n >= 4) n = Math.floor(n / 2);
  return Math.max(1, Math.min(AUTO_THREADS_MAX, n));
}

/** undefined, 'auto', or an integer in [1, 256] (LoadOptions.threads). */
export function optThreads(v: unknown): number | 'auto' | undefined {
  if (v === undefined || v === 'auto') return v;
  if (typeof v !== 'number' || !Number.isInteger(v) || v < 1 || v > 256) bad('threads', v, "'auto' or an integer in [1, 256]");
  return v;
}
