/**
 * The .rknot format (specification: docs/rknot.md), in three parts along its seams:
 *   rknot-read.ts   header, JSON metadata and tensor-table validation, per-tensor checks (browser-safe)
 *   rknot-write.ts  the streaming writer (Node)
 *   rknot-node.ts   file readers: open + validate, read one tensor, verify a whole file (Node, on fileio.ts)
 * This module re-exports all three for callers that want the whole format.
 */
export * from './rknot-read.js';
export * from './rknot-write.js';
export * from './rknot-node.js';
