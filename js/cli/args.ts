/** Small argv parser shared by the CLI commands: `--key value`, `--flag`, `-k value`, positionals. */
import { AetherError } from '../src/errors.js';

export interface ArgSpec {
  /** option name (without dashes) -> kind; aliases map a short flag to a long name */
  options: Record<string, 'string' | 'number' | 'boolean'>;
  aliases?: Record<string, string>;
}

export interface ParsedArgs {
  positionals: string[];
  values: Record<string, string | number | boolean | undefined>;
}

export function parseArgs(argv: string[], spec: ArgSpec): ParsedArgs {
  const values: ParsedArgs['values'] = {};
  const positionals: string[] = [];
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (a.startsWith('-') && a.length > 1 && !/^-\d/.test(a)) {
      let name = a.replace(/^--?/, '');
      let inline: string | undefined;
      const eq = name.indexOf('=');
      if (eq >= 0) { inline = name.slice(eq + 1); name = name.slice(0, eq); }
      name = spec.aliases?.[name] ?? name;
      const kind = spec.options[name];
      if (!kind) throw new AetherError('invalid_argument', `unknown option '${a}'`);
      if (kind === 'boolean') { values[name] = inline === undefined ? true : inline !== 'false'; continue; }
      const v = inline ?? argv[++i];
      if (v === undefined) throw new AetherError('invalid_argument', `option '${a}' needs a value`);
      if (kind === 'number') {
        const n = Number(v);
        if (!Number.isFinite(n)) throw new AetherError('invalid_argument', `option '${a}' expects a number, got '${v}'`);
        values[name] = n;
      } else values[name] = v;
    } else positionals.push(a);
  }
  return { positionals, values };
}

/** An auto|on|off option -> 'auto' | true | false (undefined when absent); anything else is refused naming the option. */
function autoOnOff(option: string, v: unknown): boolean | 'auto' | undefined {
  if (v === undefined) return undefined;
  if (v === 'auto') return 'auto';
  if (v === 'on') return true;
  if (v === 'off') return false;
  throw new AetherError('invalid_argument', `--${option}: expected auto, on or off, got '${String(v)}'`);
}

/** --fused-dot auto|on|off -> LoadOptions.fusedDot (undefined when absent). */
export function fusedDotArg(v: unknown): boolean | 'auto' | undefined { return autoOnOff('fused-dot', v); }

/** --repack auto|on|off -> LoadOptions.repack (undefined when absent). */
export function repackArg(v: unknown): boolean | 'auto' | undefined { return autoOnOff('repack', v); }

/** --threads auto|N -> LoadOptions.threads: 'auto' when absent (the machine's physical cores, at most 4: validate.ts
 * autoThreads), a positive integer, or an error naming the option. */
export function threadsArg(v: unknown): number | 'auto' {
  if (v === undefined || v === 'auto') return 'auto';
  const n = typeof v === 'number' ? v : Number(v);
  if (typeof v === 'boolean' || !Number.isInteger(n) || n < 1 || n > 256) throw new AetherError('invalid_argument', `--threads: expected auto or an integer in [1, 256], got '${String(v)}'`);
  return n;
}
