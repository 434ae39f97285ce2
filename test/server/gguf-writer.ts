import { writeFileSync } from "node:fs";

/**
 * A tiny GGUF writer for tests: a real v2/v3 file (header, metadata KVs of
 * the declared types, tensor infos, alignment padding, tensor data), small
 * enough to write by the dozen in a temp folder.
 */

export type KvType = "uint8" | "int8" | "uint16" | "int16" | "uint32" | "int32" | "float32" | "bool" | "string" | "uint64" | "int64" | "float64";
export type Kv =
  | { key: string; type: KvType; value: number | boolean | string }
  | { key: string; type: "array"; of: KvType; values: Array<number | boolean | string> };

const TYPE_ID: Record<KvType | "array", number> = {
  uint8: 0, int8: 1, uint16: 2, int16: 3, uint32: 4, int32: 5, float32: 6, bool: 7, string: 8, array: 9, uint64: 10, int64: 11, float64: 12,
};

export const kv = {
  str: (key: string, value: string): Kv => ({ key, type: "string", value }),
  u32: (key: string, value: number): Kv => ({ key, type: "uint32", value }),
  u64: (key: string, value: number): Kv => ({ key, type: "uint64", value }),
  i32: (key: string, value: number): Kv => ({ key, type: "int32", value }),
  f32: (key: string, value: number): Kv => ({ key, type: "float32", value }),
  bool: (key: string, value: boolean): Kv => ({ key, type: "bool", value }),
  arr: (key: string, of: KvType, values: Array<number | boolean | string>): Kv => ({ key, type: "array", of, values }),
};

export interface GgufSpec {
  readonly version?: number;
  readonly endian?: "little" | "big";
  readonly kvs: readonly Kv[];
  /** Tensors written after the metadata (F32, zero-filled). */
  readonly tensors?: ReadonlyArray<{ name: string; dims: number[] }>;
}

class Out {
  readonly parts: Buffer[] = [];
  constructor(private readonly little: boolean) {}
  get length(): number {
    return this.parts.reduce((n, b) => n + b.length, 0);
  }
  raw(b: Buffer): void {
    this.parts.push(b);
  }
  int(type: KvType, v: number | boolean): void {
    const L = this.little;
    const sizes: Record<string, number> = { uint8: 1, int8: 1, bool: 1, uint16: 2, int16: 2, uint32: 4, int32: 4, float32: 4, uint64: 8, int64: 8, float64: 8 };
    const b = Buffer.alloc(sizes[type]!);
    const n = Number(v);
    switch (type) {
      case "uint8": case "bool": b.writeUInt8(n); break;
      case "int8": b.writeInt8(n); break;
      case "uint16": L ? b.writeUInt16LE(n) : b.writeUInt16BE(n); break;
      case "int16": L ? b.writeInt16LE(n) : b.writeInt16BE(n); break;
      case "uint32": L ? b.writeUInt32LE(n) : b.writeUInt32BE(n); break;
      case "int32": L ? b.writeInt32LE(n) : b.writeInt32BE(n); break;
      case "float32": L ? b.writeFloatLE(n) : b.writeFloatBE(n); break;
      case "uint64": L ? b.writeBigUInt64LE(BigInt(n)) : b.writeBigUInt64BE(BigInt(n)); break;
      case "int64": L ? b.writeBigInt64LE(BigInt(n)) : b.writeBigInt64BE(BigInt(n)); break;
      case "float64": L ? b.writeDoubleLE(n) : b.writeDoubleBE(n); break;
      default: throw new Error(`not a number type: ${type}`);
    }
    this.raw(b);
  }
  str(s: string): void {
    const bytes = Buffer.from(s, "utf8");
    this.int("uint64", bytes.length);
    this.raw(bytes);
  }
  value(type: KvType, v: number | boolean | string): void {
    if (type === "string") this.str(String(v));
    else this.int(type, v as number | boolean);
  }
}

/** The bytes of a GGUF file. */
export function ggufBytes(spec: GgufSpec): Buffer {
  const o = new Out((spec.endian ?? "little") === "little");
  const tensors = spec.tensors ?? [];
  o.raw(Buffer.from("GGUF", "latin1"));
  o.int("uint32", spec.version ?? 3);
  o.int("uint64", tensors.length);
  o.int("uint64", spec.kvs.length);
  for (const entry of spec.kvs) {
    o.str(entry.key);
    o.int("uint32", TYPE_ID[entry.type]);
    if (entry.type === "array") {
      o.int("uint32", TYPE_ID[entry.of]);
      o.int("uint64", entry.values.length);
      for (const v of entry.values) o.value(entry.of, v);
    } else {
      o.value(entry.type, entry.value);
    }
  }
  let offset = 0;
  const sizes = tensors.map((t) => t.dims.reduce((a, b) => a * b, 1) * 4);
  tensors.forEach((t, i) => {
    o.str(t.name);
    o.int("uint32", t.dims.length);
    for (const d of t.dims) o.int("uint64", d);
    o.int("uint32", 0); // GGML_TYPE_F32
    o.int("uint64", offset);
    offset += Math.ceil(sizes[i]! / 32) * 32;
  });
  o.raw(Buffer.alloc((32 - (o.length % 32)) % 32));
  o.raw(Buffer.alloc(offset));
  return Buffer.concat(o.parts);
}

/** A plausible llama.cpp-style model header: architecture, name, context, file type, tokenizer. */
export function modelKvs(opts: { arch?: string; name?: string; sizeLabel?: string; ctx?: number; fileType?: number; template?: string; extra?: Kv[] } = {}): Kv[] {
  const arch = opts.arch ?? "qwen3";
  return [
    kv.str("general.architecture", arch),
    kv.str("general.type", "model"),
    kv.str("general.name", opts.name ?? "Qwen3 4B"),
    kv.str("general.size_label", opts.sizeLabel ?? "4B"),
    kv.u32(`${arch}.context_length`, opts.ctx ?? 40960),
    kv.u32(`${arch}.embedding_length`, 2560),
    kv.u32(`${arch}.block_count`, 36),
    kv.u32("general.file_type", opts.fileType ?? 15),
    kv.u32("general.quantization_version", 2),
    kv.str("tokenizer.ggml.model", "gpt2"),
    kv.arr("tokenizer.ggml.tokens", "string", Array.from({ length: 300 }, (_, i) => `tok${i}`)),
    kv.arr("tokenizer.ggml.token_type", "int32", Array.from({ length: 300 }, () => 1)),
    ...(opts.template === undefined ? [] : [kv.str("tokenizer.chat_template", opts.template)]),
    ...(opts.extra ?? []),
  ];
}

export function writeGguf(path: string, spec: GgufSpec): void {
  writeFileSync(path, ggufBytes(spec));
}
