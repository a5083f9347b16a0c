/** A one-line progress bar on stderr (only when stderr is a TTY, or when forced with --progress). */

export interface ProgressBar {
  update(done: number, total: number, label?: string): void;
  done(message?: string): void;
}

function fmtBytes(n: number): string {
  if (n >= 1 << 30) return (n / (1 << 30)).toFixed(2) + ' GiB';
  if (n >= 1 << 20) return (n / (1 << 20)).toFixed(1) + ' MiB';
  if (n >= 1 << 10) return (n / (1 << 10)).toFixed(1) + ' KiB';
  return n + ' B';
}

export function createProgress(opts: { title: string; force?: boolean; stream?: NodeJS.WriteStream; minIntervalMs?: number; unit?: 'bytes' | 'items' }): ProgressBar {
  const fmt = opts.unit === 'items' ? (n: number) => (Number.isInteger(n) ? String(n) : n.toFixed(1)) : fmtBytes;
  const out = opts.stream ?? process.stderr;
  const tty = !!out.isTTY;
  const enabled = tty || !!opts.force;
  const minInterval = opts.minIntervalMs ?? (tty ? 100 : 1000);
  const t0 = performance.now();
  let last = -Infinity;
  let shown = false;
  const render = (done: number, total: number, label?: string): string => {
    const frac = total > 0 ? Math.min(1, done / total) : 0;
    const secs = (performance.now() - t0) / 1000;
    const rate = secs > 0 ? done / secs : 0;
    const width = 24;
    const fill = Math.round(frac * width);
    const bar = '#'.repeat(fill) + '-'.repeat(width - fill);
    const eta = rate > 0 && total > done ? ` eta ${Math.ceil((total - done) / rate)}s` : '';
    let line = `${opts.title} [${bar}] ${(frac * 100).toFixed(0).padStart(3)}% ${fmt(done)}/${fmt(total)} ${fmt(rate)}/s${eta}`;
    if (label) line += ` ${label}`;
    const cols = tty ? (out.columns ?? 100) - 1 : 200;
    return line.length > cols ? line.slice(0, cols) : line;
  };
  return {
    update(done, total, label) {
      if (!enabled) return;
      const now = performance.now();
      if (now - last < minInterval && done < total) return;
      last = now;
      shown = true;
      if (tty) out.write(`\r${render(done, total, label)}\x1b[K`);
      else out.write(render(done, total, label) + '\n');
    },
    done(message) {
      if (!enabled) return;
      if (tty && shown) out.write('\r\x1b[K');
      if (message) out.write(message + '\n');
    },
  };
}
