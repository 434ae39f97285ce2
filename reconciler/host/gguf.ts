import { open, type FileHandle } from "node:fs/promises";

/**
 * A GGUF v2/v3 header reader: magic, version, tensor count and the metadata
 * key/values, read in bounded chunks from the file's start. It never reads
 * past the metadata (tensor infos and weights are left alone) and never more
 * than `maxBytes`, so a 20 GB model costs a few megabytes of reads at most.
 * Both byte orders are read (GGUF has big-endian files for s390x).
 */

/** A metadata value; an array keeps its values only when it is short (tokenizer vocabularies are not kept). */
export type GgufValue = number | boolean | string | GgufArray;
export interface GgufArray {
  readonly type: string;
  readonly length: number;
  readonly values?: readonly GgufValue[];
}

export interface GgufHeader {
  readonly version: number;
  readonly endian: "little" | "big";
  readonly tensor_count: number;
  readonly kv_count: number;
  readonly metadata: Readonly<Record<string, GgufValue>>;
  /** Bytes from the file's start to the end of the metadata. */
  readonly header_bytes: number;
}

export type GgufErrorReason = "not_gguf" | "unsupported_version" | "truncated" | "too_large" | "malformed";

/** The file is not a GGUF file this reader can read; `reason` says why. */
export class GgufError extends Error {
  constructor(readonly reason: GgufErrorReason, message: string) {
    super(message);
  }
}

/** Element type ids of the GGUF spec; their names are what `GgufArray.type` reports. */
const TYPES = ["uint8", "int8", "uint16", "int16", "uint32", "int32", "float32", "bool", "string", "array", "uint64", "int64", "float64"] as const;
const FIXED_SIZE: Readonly<Record<number, number>> = { 0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8 };
const KEEP_ARRAY_VALUES = 64;
const CHUNK = 1 << 20;
export const DEFAULT_MAX_HEADER_BYTES = 128 << 20;

/** Reads the header of the GGUF file at `path`. Throws GgufError for anything not a readable GGUF v2/v3 header. */
export async function readGgufHeader(path: string, options: { maxBytes?: number } = {}): Promise<GgufHeader> {
  const fh = await open(path, "r");
  try {
    const size = (await fh.stat()).size;
    const c = new Cursor(fh, size, options.maxBytes ?? DEFAULT_MAX_HEADER_BYTES);
    if (size < 4) throw new GgufError("not_gguf", `${path} is not a GGUF file (${size} bytes, shorter than the GGUF magic)`);
    await c.fill(4);
    if (c.buf.toString("latin1", 0, 4) !== "GGUF") throw new GgufError("not_gguf", `${path} is not a GGUF file (it does not start with the GGUF magic)`);
    c.pos = 4;
    await c.fill(4);
    const le = c.buf.readUInt32LE(4 - c.offset);
    const be = c.buf.readUInt32BE(4 - c.offset);
    c.little = le <= 0xffff || be > 0xffff;
    const version = c.little ? le : be;
    if (version !== 2 && version !== 3) throw new GgufError("unsupported_version", `${path} is GGUF version ${version}; only versions 2 and 3 are read`);
    c.pos = 8;
    await c.fill(16);
    const tensorCount = c.u64();
    const kvCount = c.u64();
    if (kvCount > 1_000_000) throw new GgufError("malformed", `${path} claims ${kvCount} metadata keys`);
    const metadata: Record<string, GgufValue> = {};
    for (let i = 0; i < kvCount; i++) {
      const key = await c.string();
      await c.fill(4);
      metadata[key] = await readValue(c, c.u32(), 0);
    }
    return { version, endian: c.little ? "little" : "big", tensor_count: tensorCount, kv_count: kvCount, metadata, header_bytes: c.pos };
  } finally {
    await fh.close();
  }
}

async function readValue(c: Cursor, type: number, depth: number): Promise<GgufValue> {
  if (type === 8) return c.string();
  if (type === 9) return readArray(c, depth);
  const size = FIXED_SIZE[type];
  if (size === undefined) throw new GgufError("malformed", `unknown GGUF value type ${type} at byte ${c.pos - 4}`);
  await c.fill(size);
  return c.scalar(type);
}

async function readArray(c: Cursor, depth: number): Promise<GgufArray> {
  if (depth > 4) throw new GgufError("malformed", "GGUF arrays nested too deep");
  await c.fill(12);
  const type = c.u32();
  const length = c.u64();
  const name = TYPES[type] ?? `type_${type}`;
  const keep = length <= KEEP_ARRAY_VALUES;
  const values: GgufValue[] = [];
  const size = FIXED_SIZE[type];
  if (size !== undefined && !keep) {
    await c.skip(size * length);
    return { type: name, length };
  }
  for (let i = 0; i < length; i++) {
    const v = await readValue(c, type, depth + 1);
    if (keep) values.push(v);
  }
  return keep ? { type: name, length, values } : { type: name, length };
}

/** A window on the file: `fill(n)` makes sure the next n bytes from `pos` are in `buf`. */
class Cursor {
  buf = Buffer.alloc(0);
  private start = 0;
  pos = 0;
  little = true;

  constructor(private readonly fh: FileHandle, private readonly size: number, private readonly max: number) {}

  /** Where `buf` starts in the file. */
  get offset(): number {
    return this.start;
  }

  /** Fast path (bytes already in the window) stays synchronous for the caller's `await`. */
  fill(n: number): Promise<void> | void {
    if (this.pos + n <= this.start + this.buf.length && this.pos >= this.start) return;
    return this.load(n);
  }

  private async load(n: number): Promise<void> {
    if (this.pos + n > this.max) throw new GgufError("too_large", `the GGUF metadata runs past the ${this.max}-byte read limit`);
    if (this.pos + n > this.size) throw new GgufError("truncated", `the file ends inside its GGUF header (at byte ${this.size}, needed ${this.pos + n})`);
    const length = Math.min(Math.max(n, CHUNK), this.size - this.pos, this.max - this.pos);
    const buf = Buffer.alloc(length);
    const { bytesRead } = await this.fh.read(buf, 0, length, this.pos);
    if (bytesRead < n) throw new GgufError("truncated", `the file ends inside its GGUF header (at byte ${this.pos + bytesRead})`);
    this.buf = buf.subarray(0, bytesRead);
    this.start = this.pos;
  }

  async skip(n: number): Promise<void> {
    if (this.pos + n > this.size) throw new GgufError("truncated", `the file ends inside its GGUF header (at byte ${this.size}, needed ${this.pos + n})`);
    if (this.pos + n > this.max) throw new GgufError("too_large", `the GGUF metadata runs past the ${this.max}-byte read limit`);
    this.pos += n;
  }

  async string(): Promise<string> {
    await this.fill(8);
    const length = this.u64();
    if (length > this.max) throw new GgufError("too_large", `a GGUF string of ${length} bytes is over the read limit`);
    await this.fill(length);
    const s = this.buf.toString("utf8", this.pos - this.start, this.pos - this.start + length);
    this.pos += length;
    return s;
  }

  u32(): number {
    const at = this.pos - this.start;
    this.pos += 4;
    return this.little ? this.buf.readUInt32LE(at) : this.buf.readUInt32BE(at);
  }

  /** A uint64 that must fit in a JS number (counts and lengths). */
  u64(): number {
    const at = this.pos - this.start;
    this.pos += 8;
    const v = this.little ? this.buf.readBigUInt64LE(at) : this.buf.readBigUInt64BE(at);
    if (v > BigInt(Number.MAX_SAFE_INTEGER)) throw new GgufError("malformed", `a GGUF count of ${v} is not plausible`);
    return Number(v);
  }

  scalar(type: number): number | boolean {
    const at = this.pos - this.start;
    const b = this.buf;
    const L = this.little;
    this.pos += FIXED_SIZE[type]!;
    switch (type) {
      case 0: return b.readUInt8(at);
      case 1: return b.readInt8(at);
      case 2: return L ? b.readUInt16LE(at) : b.readUInt16BE(at);
      case 3: return L ? b.readInt16LE(at) : b.readInt16BE(at);
      case 4: return L ? b.readUInt32LE(at) : b.readUInt32BE(at);
      case 5: return L ? b.readInt32LE(at) : b.readInt32BE(at);
      case 6: return L ? b.readFloatLE(at) : b.readFloatBE(at);
      case 7: return b.readUInt8(at) !== 0;
      case 10: return Number(L ? b.readBigUInt64LE(at) : b.readBigUInt64BE(at));
      case 11: return Number(L ? b.readBigInt64LE(at) : b.readBigInt64BE(at));
      default: return L ? b.readDoubleLE(at) : b.readDoubleBE(at);
    }
  }
}
