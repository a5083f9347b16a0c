#!/usr/bin/env node
// Cross-core round trip (bench/lib/common.mjs crossCoreNs): the main thread and a worker_threads worker hand a counter
// back and forth through one shared slot; the median ns of one round trip. Each decode step of the threaded forward
// pays it at least twice (a chunk claimed, a step completed), so 2-thread decode on small models moves with it: on the
// project's VMs ~450-550 ns (sessions 20-21, 25) and ~110 ns (session 25, minutes apart), with s15m's 2-thread decode
// 1.42x and 1.86x one thread (docs/PERFORMANCE.md "Session 25"). decode-profile, decode-ab and peers print it for runs
// with more than one thread.
//   node bench/pingpong.mjs [--rounds 200000] [--reps 5]
import { args, crossCoreNs, machine } from './lib/common.mjs';

const { opt } = args();
const rounds = Number(opt('--rounds', 200000)), reps = Number(opt('--reps', 5));
const m = machine();
const ns = await crossCoreNs({ rounds, reps });
if (ns === null) console.log(`one CPU available (${m.cpu}): no cross-core round trip to measure`);
else console.log(`cross-core round trip ${ns} ns (median of ${reps} reps of up to ${rounds} or ~1 s) on ${m.cpu}, ${m.nproc} cores, load average ${m.loadavg.map((x) => x.toFixed(2)).join(' ')}`);
