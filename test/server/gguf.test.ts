import { closeSync, mkdtempSync, openSync, rmSync, writeFileSync, writeSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { ggufFacts, ggufSlotType, inspectGguf } from "../../reconciler/host/gguf-facts.js";
import { GgufError, readGgufHeader } from "../../reconciler/host/gguf.js";
import { ggufBytes, kv, modelKvs, writeGguf } from "./gguf-writer.js";

const dir = mkdtempSync(join(tmpdir(), "hal0-gguf-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
let n = 0;
const file = (bytes: Buffer | string) => {
  const p = join(dir, `f${n++}.gguf`);
  writeFileSync(p, bytes);
  return p;
};
const refusal = async (path: string, options?: { maxBytes?: number }) => {
  const err = await readGgufHeader(path, options).then(() => undefined, (e: unknown) => e);
  expect(err).toBeInstanceOf(GgufError);
  return err as GgufError;
};

const TEMPLATE = "{% for m in messages %}{{ m.content }}{% endfor %}{% if tools %}<tools>{% endif %}<think>";

describe("readGgufHeader", () => {
  it("reads a v3 model header: version, counts, the facts hal0 uses", async () => {
    const path = file(ggufBytes({ kvs: modelKvs({ template: TEMPLATE }), tensors: [{ name: "token_embd.weight", dims: [8, 4] }, { name: "output.weight", dims: [8, 4] }] }));
    const h = await readGgufHeader(path);
    expect(h).toMatchObject({ version: 3, endian: "little", tensor_count: 2, kv_count: 13 });
    expect(h.metadata["general.architecture"]).toBe("qwen3");
    expect(h.metadata["tokenizer.ggml.tokens"]).toEqual({ type: "string", length: 300 });
    const facts = await inspectGguf(path);
    expect(facts).toMatchObject({
      architecture: "qwen3", name: "Qwen3 4B", size_label: "4B", context_length: 40960, file_type: 15, quant: "Q4_K_M",
      chat_template: true, chat_template_tools: true, chat_template_thinking: true, kind: "model", tokenizer: "gpt2", vocab_size: 300,
    });
    expect(facts.header_bytes).toBeLessThan(facts.size_bytes);
    expect(ggufSlotType(facts)).toBe("llm");
  });

  it("reads v2 and big-endian v3 files the same way", async () => {
    for (const spec of [{ version: 2 }, { version: 3, endian: "big" as const }]) {
      const facts = ggufFacts(await readGgufHeader(file(ggufBytes({ ...spec, kvs: modelKvs({ fileType: 7, ctx: 8192 }) }))));
      expect(facts).toMatchObject({ version: spec.version, endian: spec.endian ?? "little", quant: "Q8_0", context_length: 8192, chat_template: false });
    }
  });

  it("decodes every scalar type and keeps short arrays", async () => {
    const h = await readGgufHeader(file(ggufBytes({ kvs: [
      { key: "u8", type: "uint8", value: 200 }, { key: "i8", type: "int8", value: -5 }, { key: "u16", type: "uint16", value: 60000 },
      { key: "i16", type: "int16", value: -300 }, { key: "u32", type: "uint32", value: 4_000_000_000 }, { key: "i32", type: "int32", value: -70000 },
      { key: "f32", type: "float32", value: 0.5 }, { key: "b", type: "bool", value: true }, { key: "u64", type: "uint64", value: 2 ** 40 },
      { key: "i64", type: "int64", value: -(2 ** 40) }, { key: "f64", type: "float64", value: 1e-6 }, kv.str("s", "héllo"),
      kv.arr("a", "uint32", [1, 2, 3]), kv.arr("sa", "string", ["x", "y"]),
    ] })));
    expect(h.metadata).toEqual({
      u8: 200, i8: -5, u16: 60000, i16: -300, u32: 4_000_000_000, i32: -70000, f32: 0.5, b: true, u64: 2 ** 40, i64: -(2 ** 40), f64: 1e-6, s: "héllo",
      a: { type: "uint32", length: 3, values: [1, 2, 3] }, sa: { type: "string", length: 2, values: ["x", "y"] },
    });
  });

  it("reads only the header of a huge file (a 64 GiB sparse file answers at once)", async () => {
    const path = join(dir, "huge.gguf");
    const fd = openSync(path, "w");
    writeSync(fd, ggufBytes({ kvs: modelKvs({ name: "Huge" }), tensors: [{ name: "t", dims: [4] }] }));
    writeSync(fd, Buffer.from([1]), 0, 1, 64 * 2 ** 30);
    closeSync(fd);
    const started = performance.now();
    const facts = await inspectGguf(path);
    expect(facts.name).toBe("Huge");
    expect(facts.size_bytes).toBe(64 * 2 ** 30 + 1);
    expect(performance.now() - started).toBeLessThan(2000);
  });

  it("refuses a header that runs past the read limit", async () => {
    const path = file(ggufBytes({ kvs: modelKvs() }));
    expect((await refusal(path, { maxBytes: 1024 })).reason).toBe("too_large");
  });

  it("refuses what is not GGUF, with the reason", async () => {
    expect((await refusal(file("hello, I am a text file\n"))).reason).toBe("not_gguf");
    expect((await refusal(file(""))).reason).toBe("not_gguf");
    expect((await refusal(file(Buffer.concat([Buffer.from("GGUF"), Buffer.from([1, 0, 0, 0]), Buffer.alloc(16)])))).message).toMatch(/version 1; only versions 2 and 3/);
    const full = ggufBytes({ kvs: modelKvs() });
    expect((await refusal(file(full.subarray(0, 200)))).reason).toBe("truncated");
    const badType = ggufBytes({ kvs: [kv.str("general.architecture", "x")] });
    badType.writeUInt32LE(99, 24 + 8 + "general.architecture".length);
    expect((await refusal(file(badType))).message).toMatch(/unknown GGUF value type 99/);
  });

  it("finds the fixture box's .gguf files to be 8-byte placeholders (magic and version only)", async () => {
    const err = await refusal(join(import.meta.dirname, "../../fixtures/box/models/Qwen3-4B-Q4_K_M.gguf"));
    expect(err.reason).toBe("truncated");
  });
});

describe("ggufFacts", () => {
  it("tells rerankers, embedders, projectors, image models, split files and MTP heads apart", async () => {
    const facts = async (kvs: ReturnType<typeof modelKvs>) => ggufFacts(await readGgufHeader(file(ggufBytes({ kvs }))));
    const rerank = await facts(modelKvs({ arch: "bert", extra: [kv.u32("bert.pooling_type", 4)] }));
    expect([rerank.pooling, ggufSlotType(rerank)]).toEqual(["rank", "reranking"]);
    const embed = await facts(modelKvs({ extra: [kv.u32("qwen3.pooling_type", 3)] }));
    expect([embed.pooling, ggufSlotType(embed)]).toEqual(["last", "embedding"]);
    expect(ggufSlotType(await facts(modelKvs({ arch: "nomic-bert" })))).toBe("embedding");
    expect(ggufSlotType(await facts([kv.str("general.architecture", "flux"), kv.u32("general.file_type", 14)]))).toBe("image");
    expect((await facts([kv.str("general.architecture", "clip")])).kind).toBe("mmproj");
    const shard = await facts(modelKvs({ extra: [{ key: "split.no", type: "uint16", value: 0 }, { key: "split.count", type: "uint16", value: 3 }] }));
    expect(shard.split).toEqual({ no: 1, count: 3 });
    expect((await facts(modelKvs({ arch: "glm4moe", extra: [kv.u32("glm4moe.nextn_predict_layers", 1)] }))).mtp_layers).toBe(1);
    expect((await facts(modelKvs({ fileType: 99 }))).quant).toBe("ftype_99");
  });

  it("writes files the way writeGguf says", async () => {
    const path = join(dir, "w.gguf");
    writeGguf(path, { kvs: [kv.bool("x", false)] });
    expect((await readGgufHeader(path)).metadata).toEqual({ x: false });
  });
});
