import { describe, expect, it } from "vitest";
import { normalizeArgv, shellSplit } from "../../compiler/index.js";

describe("shellSplit", () => {
  it("splits on whitespace and honours quotes and escapes", () => {
    expect(shellSplit(`-fa on  --override-kv 'a=b c' --x "q \\"u\\"" a\\ b`)).toEqual(["-fa", "on", "--override-kv", "a=b c", "--x", 'q "u"', "a b"]);
    expect(shellSplit("")).toEqual([]);
    expect(shellSplit(`--empty ""`)).toEqual(["--empty", ""]);
  });

  it("splits text without quotes or escapes on runs of spaces, tabs and line breaks only", () => {
    expect(shellSplit("  -b 512\t--no-mmap\r\n  -ub  256 ")).toEqual(["-b", "512", "--no-mmap", "-ub", "256"]);
    expect(shellSplit(" \t\n")).toEqual([]);
    // A form feed or a non-breaking space is part of a word, as in the quoting path.
    expect(shellSplit("a\fb c\u00a0d")).toEqual(["a\fb", "c\u00a0d"]);
    expect(shellSplit("a\fb 'c'")).toEqual(["a\fb", "c"]);
  });

  it("returns undefined for an unterminated quote", () => {
    expect(shellSplit(`--chat-template 'abc`)).toBeUndefined();
    expect(shellSplit(`"abc`)).toBeUndefined();
  });
});

describe("normalizeArgv", () => {
  it("keeps the last value of a flag set twice, at its last position", () => {
    expect(normalizeArgv(["-b", "512", "--no-mmap", "-b", "1024"])).toEqual(["--no-mmap", "-b", "1024"]);
  });

  it("treats aliases as one flag", () => {
    expect(normalizeArgv(["--batch-size", "512", "-fa", "on", "-b", "2048", "--flash-attn", "off"])).toEqual(["-b", "2048", "--flash-attn", "off"]);
  });

  it("keeps every occurrence of repeatable flags", () => {
    expect(normalizeArgv(["--lora", "a.gguf", "--lora", "b.gguf", "--override-kv", "x=1", "--override-kv", "y=2"]))
      .toEqual(["--lora", "a.gguf", "--lora", "b.gguf", "--override-kv", "x=1", "--override-kv", "y=2"]);
  });

  it("drops a repeated flag with its value word, keeps stray words, and lets a flag before a flag take no value", () => {
    expect(normalizeArgv(["llama-server", "-b", "512", "stray", "--no-mmap", "-b", "--jinja", "-b", "64", "--x=1", "tail"]))
      .toEqual(["llama-server", "stray", "--no-mmap", "--jinja", "-b", "64", "--x=1", "tail"]);
    // No flag repeats: the same array back.
    const argv = ["llama-server", "-b", "512", "--jinja"];
    expect(normalizeArgv(argv)).toBe(argv);
  });

  it("reads negative numbers as values and --flag=value as one token", () => {
    expect(normalizeArgv(["--reasoning-budget", "-1", "--threads=4", "--threads=8"])).toEqual(["--reasoning-budget", "-1", "--threads=8"]);
  });
});
