// Coverage feedback for the JS fuzz targets, from V8's precise block coverage (node:inspector, in-process).
//
// Why not Jazzer.js: docs/FUZZING.md. Here: Profiler.startPreciseCoverage({ callCount: true, detailed: true }) makes V8
// count executions of every basic block (bytecode IncBlockCounter, kept in optimised code too);
// Profiler.takePreciseCoverage returns the counts since the previous take and resets them. The in-process inspector
// session answers synchronously, so a take costs one serialisation of the counters (about 0.1-1 ms here, measured by
// `node fuzz/fuzz.mjs --target NAME --seconds 10`: `cov_take_ms`).
//
// A feature is (script, block range, hit-count bucket) as in AFL / libFuzzer: buckets 1, 2, 3, 4-7, 8-15, 16-31,
// 32-127, 128+. An input is kept in the corpus when it runs a block never run before or raises the highest bucket
// seen for a block ("max bucket" novelty; see novel() for what V8's folded ranges allow). Only scripts whose URL
// passes `filter` (the parsers in dist/src) count; the driver and mutators do not.
//
// Batches: taking coverage after every input costs about as much as a fast input. So inputs run in batches of B and
// coverage is taken once per batch. Summed over a batch a block's count is >= its count for any one input of the
// batch, and a block run by the batch was run by one of its inputs: when the batch runs no new block, none of its
// inputs does (sound for new blocks). When it does, its inputs are re-run one by one with a take after each (the
// targets are deterministic given their input and per-input seed) and the novel ones are kept. Summed counts would
// make buckets look novel more often than any input is (a block hit once by each of 8 inputs reaches bucket 8-15),
// so batches of more than one input are judged on new blocks only; count buckets are judged in batches of one (the
// re-runs, and the exploration phase). B adapts: halved after a novel batch, doubled (up to maxBatch, 64) after a
// dull one, so early exploration runs per input and the long tail in batches of 64.
import inspector from 'node:inspector';

const bucket = (c) => (c >= 128 ? 8 : c >= 32 ? 7 : c >= 16 ? 6 : c >= 8 ? 5 : c >= 4 ? 4 : c);

export class CoverageTracker {
  /** @param {(url: string) => boolean} filter scripts that count */
  constructor(filter) {
    this.filter = filter;
    this.session = new inspector.Session();
    this.session.connect();
    this.post('Profiler.enable');
    this.post('Profiler.startPreciseCoverage', { callCount: true, detailed: true, allowTriggeredUpdates: false });
    this.max = new Map();        // block key -> highest bucket seen
    this.scripts = new Map();    // url -> index (block keys are numbers: index * 2^40 + start * 2^20 + end)
    this.fns = new Map();        // function key -> [start, end, key, ...] of its ranges ever listed (its own first)
    this.seen = new Set();       // keys of every range ever listed
    this.takes = 0;
    this.takeMs = 0;
  }

  post(method, params) {
    let out, err;
    this.session.post(method, params ?? {}, (e, r) => { err = e; out = r; });
    if (err) throw err;
    return out;
  }

  /**
   * Counts since the last take: [key, count, isFunctionRange] triples over every range of the filtered scripts ever
   * listed, each with its true count. V8 lists a nested block range only when its count differs from its parent's
   * (a block run exactly as often as its enclosing range is folded into it), so a range not listed now has the count
   * of the innermost listed range around it (ranges come in pre-order: the last listed one containing it).
   */
  take() {
    const t0 = performance.now();
    const r = this.post('Profiler.takePreciseCoverage').result;
    const hits = [];
    for (const s of r) {
      if (!this.filter(s.url)) continue;
      let si = this.scripts.get(s.url);
      if (si === undefined) { si = this.scripts.size; this.scripts.set(s.url, si); }
      const base = si * 2 ** 40;
      for (const f of s.functions) {
        const rs = f.ranges;
        if (!rs.length) continue;
        const fk = base + rs[0].startOffset * 2 ** 20 + Math.min(rs[0].endOffset, 2 ** 20 - 1);
        let known = this.fns.get(fk);
        if (!known) { known = []; this.fns.set(fk, known); }
        for (const rg of rs) {
          const k = base + Math.min(rg.startOffset, 2 ** 20 - 1) * 2 ** 20 + Math.min(rg.endOffset, 2 ** 20 - 1);
          if (!this.seen.has(k)) { this.seen.add(k); known.push(rg.startOffset, rg.endOffset, k); }
        }
        for (let j = 0; j < known.length; j += 3) {
          const a = known[j], b = known[j + 1];
          let c = 0;
          for (let i = rs.length - 1; i >= 0; i--) if (rs[i].startOffset <= a && b <= rs[i].endOffset) { c = rs[i].count; break; }
          hits.push(known[j + 2], c, j === 0);
        }
      }
    }
    this.takes++;
    this.takeMs += performance.now() - t0;
    return hits;
  }

  /** Discard the counts gathered so far (e.g. of the driver's own set-up). */
  reset() { this.post('Profiler.takePreciseCoverage'); }

  /**
   * Would these hits be novel? Novel blocks: a function run for the first time, or a range known not run (count 0
   * before) now run. A range listed for the first time with a count > 0 inside a function that ran before is not
   * new (it ran before, folded into its parent). `blocksOnly`: that test alone (sound for a batch); else also a
   * count bucket above the range's highest (sound for one input; counts are exact, see take()).
   */
  novel(hits, blocksOnly) {
    for (let i = 0; i < hits.length; i += 3) {
      const c = hits[i + 1];
      if (c === 0) continue;
      const m = this.max.get(hits[i]);
      if (m === 0) return true;
      if (m === undefined) { if (hits[i + 2]) return true; continue; }
      if (!blocksOnly && bucket(c) > m) return true;
    }
    return false;
  }

  /** Record these hits; returns the number of features (block, bucket steps) they added. */
  add(hits) {
    let n = 0;
    for (let i = 0; i < hits.length; i += 3) {
      const b = bucket(hits[i + 1]), m = this.max.get(hits[i]);
      if (m === undefined || b > m) { this.max.set(hits[i], b); if (b > 0) n += b - (m ?? 0); }
    }
    return n;
  }

  /** Blocks known to have run (ranges with a count > 0 at least once). */
  get blocks() { let n = 0; for (const b of this.max.values()) if (b > 0) n++; return n; }
  get features() { let n = 0; for (const b of this.max.values()) n += b; return n; }

  stop() {
    try { this.post('Profiler.stopPreciseCoverage'); this.post('Profiler.disable'); } catch { /* session gone */ }
    this.session.disconnect();
  }
}
