/**
 * Server-level metrics of `aether serve` and their Prometheus text exposition (format 0.0.4: `# HELP` /
 * `# TYPE` once per family, base units in the names, counters ending in `_total`). /metrics appends the
 * model's own (`formatPrometheus(model.metrics())`, js/src/runtime/metrics.ts); the names here do not clash.
 */

export type MetricType = 'counter' | 'gauge';
export interface MetricSample { labels?: Record<string, string>; value: number }
export interface MetricFamily { name: string; help: string; type: MetricType; samples: MetricSample[] }

export { PROMETHEUS_CONTENT_TYPE } from '../runtime/metrics.js';

const NAME_RE = /^[a-zA-Z_:][a-zA-Z0-9_:]*$/;
const LABEL_RE = /^[a-zA-Z_][a-zA-Z0-9_]*$/;
const escapeLabel = (v: string): string => v.replace(/\\/g, '\\\\').replace(/\n/g, '\\n').replace(/"/g, '\\"');
const escapeHelp = (v: string): string => v.replace(/\\/g, '\\\\').replace(/\n/g, '\\n');
const num = (v: number): string => (Number.isNaN(v) ? 'NaN' : v === Infinity ? '+Inf' : v === -Infinity ? '-Inf' : String(v));

/** Text exposition of `families` (names and label names checked). */
export function formatFamilies(families: MetricFamily[]): string {
  const out: string[] = [];
  for (const f of families) {
    if (!NAME_RE.test(f.name)) throw new Error(`metric name '${f.name}' is not a valid Prometheus name`);
    out.push(`# HELP ${f.name} ${escapeHelp(f.help)}`, `# TYPE ${f.name} ${f.type}`);
    for (const s of f.samples) {
      const ls = Object.entries(s.labels ?? {});
      for (const [k] of ls) if (!LABEL_RE.test(k) || k.startsWith('__')) throw new Error(`label name '${k}' is not valid`);
      out.push(`${f.name}${ls.length ? `{${ls.map(([k, v]) => `${k}="${escapeLabel(v)}"`).join(',')}}` : ''} ${num(s.value)}`);
    }
  }
  return out.join('\n') + '\n';
}

/** Counters and gauges the server updates. */
export class ServerMetrics {
  private readonly requests = new Map<string, number>();
  private readonly durations = new Map<string, { sum: number }>();
  promptTokens = 0;
  completionTokens = 0;
  generationSeconds = 0;
  aborted = 0;
  queueLength = 0;
  inFlight = 0;
  readonly startedAt = Date.now();

  /** One answered request: its route (a fixed set) and HTTP status. */
  request(route: string, status: number, seconds: number): void {
    const k = `${route}\u0000${status}`;
    this.requests.set(k, (this.requests.get(k) ?? 0) + 1);
    const d = this.durations.get(route) ?? { sum: 0 };
    d.sum += seconds;
    this.durations.set(route, d);
  }

  private readonly finishes = new Map<string, number>();

  /** Tokens and time of one generation (finished, or ended early: finish reason 'aborted'). */
  generation(promptTokens: number, completionTokens: number, seconds: number, finishReason = 'stop'): void {
    this.finishes.set(finishReason, (this.finishes.get(finishReason) ?? 0) + 1);
    this.promptTokens += promptTokens;
    this.completionTokens += completionTokens;
    this.generationSeconds += seconds;
  }

  families(extra: { model: string }): MetricFamily[] {
    const mem = process.memoryUsage();
    const m = { model: extra.model };
    return [
      {
        name: 'aether_http_requests_total', type: 'counter', help: 'HTTP requests answered, by route and status code.',
        samples: [...this.requests].map(([k, v]) => { const [route, code] = k.split('\u0000'); return { labels: { route, code }, value: v }; }),
      },
      {
        name: 'aether_http_request_seconds_total', type: 'counter', help: 'Time from request to the end of the response, summed by route.',
        samples: [...this.durations].map(([route, d]) => ({ labels: { route }, value: d.sum })),
      },
      { name: 'aether_queue_requests', type: 'gauge', help: 'Requests waiting for the engine.', samples: [{ value: this.queueLength }] },
      { name: 'aether_inflight_requests', type: 'gauge', help: 'Requests running on the engine (0 or 1).', samples: [{ value: this.inFlight }] },
      { name: 'aether_aborted_requests_total', type: 'counter', help: 'Requests whose client disconnected before the end.', samples: [{ value: this.aborted }] },
      {
        name: 'aether_server_generations_total', type: 'counter', help: 'Generation requests run (embeddings included), by finish reason.',
        samples: [...this.finishes].map(([reason, v]) => ({ labels: { ...m, finish_reason: reason }, value: v })),
      },
      { name: 'aether_server_prompt_tokens_total', type: 'counter', help: 'Prompt tokens of generations and embeddings.', samples: [{ labels: m, value: this.promptTokens }] },
      { name: 'aether_server_completion_tokens_total', type: 'counter', help: 'Tokens generated (by aborted generations too).', samples: [{ labels: m, value: this.completionTokens }] },
      { name: 'aether_server_generation_seconds_total', type: 'counter', help: 'Engine time of generations.', samples: [{ labels: m, value: this.generationSeconds }] },
      { name: 'process_resident_memory_bytes', type: 'gauge', help: 'Resident set size of the server process.', samples: [{ value: mem.rss }] },
      { name: 'nodejs_heap_used_bytes', type: 'gauge', help: 'V8 heap in use.', samples: [{ value: mem.heapUsed }] },
      { name: 'process_uptime_seconds', type: 'gauge', help: 'Seconds since the server started.', samples: [{ value: (Date.now() - this.startedAt) / 1000 }] },
    ];
  }
}
