/**
 * Tensor dtypes understood by Aether (.rknot, GGUF, converter, loader): the weight rows of the C dtype
 * registry (src/kernels/dtypes.inc), mirrored in ../generated/abi.ts (npm run gen:abi).
 * Block formats are ggml's: a row of `ne0` elements is `ne0 / blockSize` blocks of `typeSize` bytes.
 */
import { AetherError } from '../errors.js';
import { DTYPE_ROWS, type WeightDTypeName } from '../generated/abi.js';

export type DTypeName = WeightDTypeName;

export interface DTypeInfo {
  name: DTypeName;
  /** ggml_type id (GGUF tensor info `type`). */
  ggmlId: number;
  /** Elements per block (1 for plain floats). */
  blockSize: number;
  /** Bytes per block. */
  typeSize: number;
  /** Byte offset of the f16 block scales inside a block (quantised types), for cheap NaN/Inf checks. */
  scaleOffsets?: number[];
}

export const DTYPES: Readonly<Record<DTypeName, DTypeInfo>> = Object.freeze(Object.fromEntries(
  DTYPE_ROWS.filter((d) => d.kind !== 'A').map((d) => [d.name, Object.freeze({
    name: d.name as DTypeName, ggmlId: d.ggmlId, blockSize: d.blockSize, typeSize: d.typeSize,
    ...(d.scaleOffsets.length ? { scaleOffsets: [...d.scaleOffsets] } : {}),
  })]),
) as Record<DTypeName, DTypeInfo>);

export const DTYPE_NAMES = Object.keys(DTYPES) as DTypeName[];

/** ggml type names by id, for error messages about types we do not read. */
export const GGML_TYPE_NAMES: Readonly<Record<number, string>> = Object.freeze({
  0: 'F32', 1: 'F16', 2: 'Q4_0', 3: 'Q4_1', 4: 'Q4_2 (removed)', 5: 'Q4_3 (removed)', 6: 'Q5_0', 7: 'Q5_1',
  8: 'Q8_0', 9: 'Q8_1', 10: 'Q2_K', 11: 'Q3_K', 12: 'Q4_K', 13: 'Q5_K', 14: 'Q6_K', 15: 'Q8_K',
  16: 'IQ2_XXS', 17: 'IQ2_XS', 18: 'IQ3_XXS', 19: 'IQ1_S', 20: 'IQ4_NL', 21: 'IQ3_S', 22: 'IQ2_S',
  23: 'IQ4_XS', 24: 'I8', 25: 'I16', 26: 'I32', 27: 'I64', 28: 'F64', 29: 'IQ1_M', 30: 'BF16',
  34: 'TQ1_0', 35: 'TQ2_0', 39: 'MXFP4',
});

const BY_ID = new Map<number, DTypeInfo>(DTYPE_NAMES.map((n) => [DTYPES[n].ggmlId, DTYPES[n]]));

export function dtypeByGgmlId(id: number): DTypeInfo | undefined {
  return BY_ID.get(id);
}

export function isDTypeName(s: unknown): s is DTypeName {
  return typeof s === 'string' && Object.prototype.hasOwnProperty.call(DTYPES, s);
}

export function ggmlTypeName(id: number): string {
  return GGML_TYPE_NAMES[id] ?? `unknown type ${id}`;
}

/** "F32, F16, ... or Q6_K": the ggml names of the dtypes we read, for error messages. */
export function supportedGgmlTypes(): string {
  const n = DTYPE_NAMES.map((d) => ggmlTypeName(DTYPES[d].ggmlId));
  return n.length > 1 ? `${n.slice(0, -1).join(', ')} or ${n[n.length - 1]}` : n.join('');
}

/**
 * Number of elements of a shape, or an error message if a dim is not a positive safe integer or
 * the product overflows 2^53.
 */
export function shapeElements(shape: readonly number[]): number | string {
  let n = 1;
  for (let i = 0; i < shape.length; i++) {
    const d = shape[i];
    if (!Number.isSafeInteger(d) || d <= 0) return `dim ${i} is ${d}, expected a positive integer`;
    if (n > Number.MAX_SAFE_INTEGER / d) return `element count overflows 2^53 (shape [${shape.join(', ')}])`;
    n *= d;
  }
  return n;
}

/** Bytes of one row (shape[0] elements) of a dtype; throws if shape[0] is not a multiple of the block size. */
export function rowBytes(dtype: DTypeName, ne0: number): number {
  const t = DTYPES[dtype];
  if (ne0 % t.blockSize !== 0) {
    throw new AetherError('format_error', `row length ${ne0} is not a multiple of the ${dtype} block size ${t.blockSize}`);
  }
  return (ne0 / t.blockSize) * t.typeSize;
}

/**
 * Bytes of a tensor, or an error message (dims invalid, overflow, row length not a multiple of the block size).
 */
export function tensorBytes(dtype: DTypeName, shape: readonly number[]): number | string {
  const n = shapeElements(shape);
  if (typeof n === 'string') return n;
  const t = DTYPES[dtype];
  if (shape.length === 0) return `empty shape`;
  if (shape[0] % t.blockSize !== 0) return `shape[0] = ${shape[0]} is not a multiple of the ${dtype} block size ${t.blockSize}`;
  const b = (n / t.blockSize) * t.typeSize;
  if (!Number.isSafeInteger(b)) return `byte size overflows 2^53 (shape [${shape.join(', ')}])`;
  return b;
}
