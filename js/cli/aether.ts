#!/usr/bin/env node
/**
 * aether CLI. Each subcommand lives in ./commands/<name>.js and exports
 * `run(argv: string[]): Promise<number>` (the process exit code) and `usage: string`.
 */
import { setFlagsFromString } from 'node:v8';
import { AetherError } from '../src/errors.js';
import { relaxedSimdSupported } from '../src/runtime/env.js';

// Compile wasm with the optimising tier right away: V8's baseline compiler (Liftoff) runs the kernels
// several times slower until tier-up, which dominates short runs (measured: 75 vs 418 tok/s decode for
// 64 tokens), and compile every function up front rather than on its first call (which the prefill
// would pay). Only this process is affected; library users keep their own V8 settings.
setFlagsFromString('--no-liftoff');
setFlagsFromString('--no-wasm-lazy-compilation');
// Relaxed SIMD (Node 20's V8 11.3 has it behind a flag; V8 >= 11.4 ships it): lets --simd auto/relaxed
// pick the -relaxed.wasm builds. Set before any module is compiled.
if (!relaxedSimdSupported()) setFlagsFromString('--experimental-wasm-relaxed-simd');

const COMMANDS = ['run', 'serve', 'bench', 'convert', 'inspect', 'profile', 'profile-heads', 'eval', 'longctx', 'analyze', 'compress', 'lora-plan'] as const;

async function main(argv: string[]): Promise<number> {
  const [cmd, ...rest] = argv;
  if (!cmd || cmd === '-h' || cmd === '--help' || cmd === 'help') {
    process.stdout.write(`usage: aether <command> [options]\n\ncommands: ${COMMANDS.join(', ')}\n` +
      `run 'aether <command> --help' for the options of one command\n`);
    return cmd ? 0 : 1;
  }
  if (!(COMMANDS as readonly string[]).includes(cmd)) {
    process.stderr.write(`aether: unknown command '${cmd}' (expected one of: ${COMMANDS.join(', ')})\n`);
    return 2;
  }
  let mod: { run(argv: string[]): Promise<number>; usage: string };
  try {
    mod = await import(`./commands/${cmd}.js`);
  } catch (e) {
    process.stderr.write(`aether: command '${cmd}' is not available in this build (${(e as Error).message})\n`);
    return 2;
  }
  if (rest.includes('-h') || rest.includes('--help')) {
    process.stdout.write(mod.usage + '\n');
    return 0;
  }
  return mod.run(rest);
}

main(process.argv.slice(2)).then(
  (code) => { process.exitCode = code; },
  (e) => {
    const json = process.argv.includes('--json');
    if (e instanceof AetherError) {
      if (json) process.stdout.write(JSON.stringify({ error: { code: e.code, message: e.message } }) + '\n');
      process.stderr.write(`aether: ${e.code}: ${e.message}\n`);
    } else {
      if (json) process.stdout.write(JSON.stringify({ error: { code: 'internal', message: String(e?.message ?? e) } }) + '\n');
      process.stderr.write(`aether: ${e?.stack ?? e}\n`);
    }
    process.exitCode = 1;
  },
);
