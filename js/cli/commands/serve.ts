/** aether serve MODEL [--host 127.0.0.1] [--port 8080]: the OpenAI-compatible HTTP server (js/src/node/server.ts). */
import { parseArgs, threadsArg } from '../args.js';
import { load } from '../../src/aether.js';
import { AetherError } from '../../src/errors.js';
import { serve } from '../../src/node/server.js';

export const usage = `usage: aether serve MODEL [options]
  MODEL                 .rknot file, GGUF file or HF folder (converted on the fly)
  --host H              address to listen on (default 127.0.0.1)
  --port P              port (default 8080; 0 = any free port)
  -t, --threads T       compute threads (default auto: the physical cores, at most 4)
  --ctx N               context length (default: the model's)
  --max-body BYTES      largest request body (default 1048576)
  --max-queue N         requests that may wait for the engine (default 256; more get 429)
  --quiet               no request log on stderr
Endpoints: POST /v1/chat/completions, /v1/completions (stream: true for server-sent events), /v1/embeddings;
GET /v1/models, /health, /metrics (Prometheus text). Requests run one at a time, in arrival order.`;

export async function run(argv: string[]): Promise<number> {
  const { positionals, values: v } = parseArgs(argv, {
    options: { host: 'string', port: 'number', threads: 'string', ctx: 'number', 'max-body': 'number', 'max-queue': 'number', quiet: 'boolean' },
    aliases: { t: 'threads' },
  });
  if (positionals.length !== 1) throw new AetherError('invalid_argument', `expected one MODEL argument\n${usage}`);
  const port = (v.port as number | undefined) ?? 8080;
  if (!Number.isInteger(port) || port < 0 || port > 65535) throw new AetherError('invalid_argument', `--port ${port}: expected 0..65535`);
  const model = await load(positionals[0], { threads: threadsArg(v.threads), nCtx: v.ctx as number | undefined });
  for (const w of model.warnings) process.stderr.write(`aether: ${w}\n`);
  const s = await serve(model, {
    host: (v.host as string | undefined) ?? '127.0.0.1', port,
    maxBodyBytes: v['max-body'] as number | undefined, maxQueue: v['max-queue'] as number | undefined,
    log: v.quiet ? undefined : (line) => process.stderr.write(line + '\n'),
  });
  process.stdout.write(`aether serve: ${model.modelId} on ${s.url} (OpenAI-compatible API under ${s.url}/v1)\n`);
  await new Promise<void>((resolve) => {
    const stop = () => { process.stderr.write('aether serve: shutting down\n'); void s.close().then(resolve); };
    process.once('SIGINT', stop);
    process.once('SIGTERM', stop);
  });
  model.dispose();
  return 0;
}
