import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { compile, loadTree } from "../../compiler/index.js";
import { main } from "../../cli/main.js";
import { CODES, type Diagnostic } from "../../schema/index.js";

/**
 * The invalid-config corpus: every folder of fixtures/invalid/ is a small tree
 * whose `expected.txt` holds a `# what it covers` line and then one line per
 * diagnostic, `<file>:<line>:<column> <severity> <code>`, in the compiler's order.
 */
const ROOT = join(import.meta.dirname, "../../fixtures/invalid");
const CASES = readdirSync(ROOT, { withFileTypes: true })
  .filter((entry) => entry.isDirectory())
  .map((entry) => entry.name)
  .sort();

function golden(name: string): { about: string; lines: string[] } {
  const text = readFileSync(join(ROOT, name, "expected.txt"), "utf8");
  const all = text.split("\n").filter((line) => line.trim() !== "");
  return { about: all[0] ?? "", lines: all.filter((line) => !line.startsWith("#")) };
}

async function diagnose(name: string): Promise<{ diagnostics: Diagnostic[]; hasModel: boolean }> {
  const { tree, diagnostics } = await loadTree(join(ROOT, name));
  const result = compile(tree, diagnostics);
  return { diagnostics: result.diagnostics, hasModel: result.model !== undefined };
}

function asLine(d: Diagnostic): string {
  return `${d.file}:${d.line}:${d.column} ${d.severity} ${d.code}`;
}

/** The one diagnostic of `name` with `code` at `file:line:column`. */
async function diagnosticAt(name: string, at: string, code: string): Promise<Diagnostic> {
  const { diagnostics } = await diagnose(name);
  const hits = diagnostics.filter((d) => `${d.file}:${d.line}:${d.column}` === at && d.code === code);
  expect(hits).toHaveLength(1);
  return hits[0]!;
}

function fakeIo(cwd: string) {
  let out = "";
  let err = "";
  const io = {
    stdout: { write: (text: string) => (out += text) },
    stderr: { write: (text: string) => (err += text) },
    env: {},
    cwd,
  };
  return { io, out: () => out, err: () => err };
}

describe("a file that is not UTF-8", () => {
  it("is config.read_error at the first byte that does not decode, naming it", async () => {
    const d = await diagnosticAt("read-error", "models.toml:2:21", "config.read_error");
    expect(d.detail).toBe("hal0 could not read this file: it is not valid UTF-8 text: byte 0xe9 at line 2, column 21.");
  });
});

describe("a required key left out", () => {
  it("is config.missing_key, an enum's naming its choices and an integer's saying so", async () => {
    const transport = await diagnosticAt("mcp-transport-missing", "mcp-servers/inventory.toml:1:1", "config.missing_key");
    expect(transport.summary).toBe("missing required key `transport`");
    expect(transport.detail).toBe('This file needs `transport` (one of "stdio", "streamable-http", "sse").');
    const { diagnostics } = await diagnose("slot-missing-port");
    expect(diagnostics.find((d) => d.code === "config.missing_key" && d.summary === "missing required key `port`")?.detail).toBe("This file needs `port` (an integer).");
  });
});

describe("fixtures/invalid", () => {
  it("holds at least 36 cases, each golden opening with a one-line description", () => {
    expect(CASES.length).toBeGreaterThanOrEqual(36);
    for (const name of CASES) expect(golden(name).about, name).toMatch(/^# \S.*\S$/);
  });

  it("covers every code the compiler emits (stage compile), and no other", () => {
    const seen = new Set(CASES.flatMap((name) => golden(name).lines.map((line) => line.split(" ")[2])));
    const compileCodes = Object.entries(CODES).filter(([, info]) => info.stage === "compile").map(([code]) => code);
    const missing = compileCodes.filter((code) => !seen.has(code));
    expect(missing).toEqual([]);
    for (const code of seen) expect(compileCodes, `${code} is not a compile-stage code`).toContain(code);
    for (const code of seen) expect(Object.keys(CODES), `unknown code ${code}`).toContain(code);
  });

  describe.each(CASES)("%s", (name) => {
    it("compiles to exactly the golden diagnostics, in order, and no model", async () => {
      const { diagnostics, hasModel } = await diagnose(name);
      expect(diagnostics.map(asLine)).toEqual(golden(name).lines);
      expect(hasModel).toBe(false);
    });

    it("fails `hal0 validate --json` with exit 1 and the golden's error count", async () => {
      const dir = join(ROOT, name);
      const { io, out, err } = fakeIo(dir);
      expect(await main(["validate", "--config", dir, "--json"], io)).toBe(1);
      expect(err()).toBe("");
      const report = JSON.parse(out()) as { valid: boolean; error_count: number; warning_count: number; diagnostics: Diagnostic[] };
      const lines = golden(name).lines;
      expect(report.valid).toBe(false);
      expect(report.error_count).toBe(lines.filter((line) => line.includes(" error ")).length);
      expect(report.warning_count).toBe(lines.filter((line) => line.includes(" warning ")).length);
      expect(report.diagnostics.map(asLine)).toEqual(lines);
    });
  });
});

describe("related positions and details", () => {
  it("a port conflict points at the other slot's port", async () => {
    const d = await diagnosticAt("port-conflict-slots", "slots/code.toml:3:8", "slot.port_conflict");
    expect(d.related).toEqual([{ file: "slots/chat.toml", line: 3, column: 8, message: "slot `chat` uses port 8081" }]);
  });

  it("a conflict with hal0's own port points at [server] port of hal0.toml", async () => {
    const d = await diagnosticAt("port-conflict-server", "slots/chat.toml:3:8", "slot.port_conflict");
    expect(d.related).toMatchObject([{ file: "hal0.toml", line: 2, column: 8 }]);
  });

  it("a tool in two tiers points at its first listing", async () => {
    const d = await diagnosticAt("policy-two-tiers", "policy.toml:3:25", "policy.tool_in_two_tiers");
    expect(d.related).toMatchObject([{ file: "policy.toml", line: 2, column: 10 }]);
  });

  it("a slot named twice in a stack points at the first entry", async () => {
    const d = await diagnosticAt("stack-duplicate-slot", "stacks/forge.toml:7:8", "stack.duplicate_slot");
    expect(d.related).toMatchObject([{ file: "stacks/forge.toml", line: 4, column: 8 }]);
  });

  it("an NPU slot beyond the first points at the first one's profile, which puts it there", async () => {
    const d = await diagnosticAt("npu-exclusivity", "slots/npu-b.toml:1:11", "slot.npu_exclusivity_violation");
    expect(d.related).toMatchObject([{ file: "slots/npu-a.toml", line: 1, column: 11 }]);
  });

  it("a child name of capabilities.toml that breaks its grammar says the grammar", async () => {
    const d = await diagnosticAt("capability-invalid-child-name", "capabilities.toml:2:17", "config.invalid_name");
    expect(d.detail).toBe('"Draft" is not a valid name. A name here is a child name: 1–32 characters, lowercase a–z, digits, `_` and `-`, starting with a letter.');
  });

  it("a [memory] url with a password is refused without repeating it (the diagnostics reach any caller of a server whose tree never compiled)", async () => {
    const d = await diagnosticAt("settings-memory-url-credentials", "hal0.toml:3:7", "config.invalid_value");
    expect(d.summary).toContain("user name or password");
    expect(JSON.stringify(d)).not.toContain("s3cret");
  });

  it("a URL with user:password@ anywhere in the tree is refused, and the refusal does not repeat it", async () => {
    for (const at of ["agents/coder.toml:5:7", "mcp-servers/search.toml:4:7", "upstreams.toml:3:7"]) {
      const d = await diagnosticAt("url-credentials", at, "config.invalid_value");
      expect(d.summary).toContain("user name or password");
      expect(JSON.stringify(d)).not.toMatch(/hunter2|tok3n|s3cret/);
    }
  });

  it("a near-typo of a key gets a did-you-mean", async () => {
    const tune = await diagnosticAt("unknown-key-typo", "slots/chat.toml:5:1", "config.unknown_key");
    expect(tune.detail).toContain("Did you mean `ctx_size`?");
    const settings = await diagnosticAt("unknown-key-typo", "hal0.toml:2:1", "config.unknown_key");
    expect(settings.detail).toContain("Did you mean `max_slots`?");
  });

  it("a key that is a property of every object gets the hint any unknown key gets", async () => {
    for (const at of ["slots/chat.toml:3:1", "slots/chat.toml:4:1", "slots/chat.toml:7:1"]) {
      const d = await diagnosticAt("unknown-key-object-property", at, "config.unknown_key");
      expect(d.detail, at).toMatch(/Known keys: `/);
      expect(d.detail, at).not.toMatch(/function|native code|moved/i);
    }
  });

  it("a near-typo of a tool or a profile gets a did-you-mean; a far one does not", async () => {
    expect((await diagnosticAt("policy-unknown-tool", "policy.toml:2:10", "policy.unknown_tool")).detail).toContain("Did you mean `slot_list`?");
    expect((await diagnosticAt("policy-unknown-tool", "policy.toml:5:12", "policy.unknown_tool")).detail).not.toContain("Did you mean");
    expect((await diagnosticAt("slot-unknown-profile", "slots/chat.toml:1:11", "slot.unknown_profile")).detail).toContain("Did you mean `rocm`?");
  });

  it("names invisible and look-alike characters in a refused name", async () => {
    expect((await diagnosticAt("name-zero-width", "models.toml:1:8", "config.invalid_name")).detail).toContain("zero-width space (U+200B)");
    expect((await diagnosticAt("name-bom", "profiles.toml:1:10", "config.invalid_name")).detail).toContain("byte-order mark (U+FEFF)");
    expect((await diagnosticAt("name-cyrillic-profile", "profiles.toml:1:10", "config.invalid_name")).detail).toContain("U+043E");
  });

  it("a value with a format that is not a name says what it must be, never 'not a valid name'", async () => {
    const at = (where: string) => diagnosticAt("model-value-formats", where, "config.invalid_value");
    expect((await at("models.toml:4:10")).detail).toBe("`model.a.sha256` must be a sha256: 64 lowercase hex digits.");
    expect((await at("models.toml:5:11")).detail).toContain("must be a Hub repository as owner/name");
    expect((await at("models.toml:6:12")).detail).toMatch(/must be a commit: 7 to 64 lowercase hex digits; .* contains a zero-width space \(U\+200B\)\.$/);
    expect((await at("models.toml:7:17")).detail).toContain("must be a capability: 1–32 characters");
    for (const where of ["models.toml:4:10", "models.toml:5:11", "models.toml:6:12", "models.toml:7:17"]) expect((await at(where)).detail).not.toMatch(/name grammar|not a valid name/);
  });
});

describe("[slots] docker_host", () => {
  it("an address hal0 cannot use (ssh://, a remote or port-less tcp://, a relative socket) is config.invalid_value at its value; the local socket and loopback TCP compile", async () => {
    const d = await diagnosticAt("settings-docker-host-unusable", "hal0.toml:3:15", "config.invalid_value");
    expect(d.summary).toBe('docker engine address "ssh://builder@gpu-box" is not unix:///PATH or tcp://127.0.0.1:PORT (slots are health-checked on loopback, so the engine must run on this machine)');
    const withHost = (host: string) => compile({ root: "/box", files: new Map([["hal0.toml", `[slots]\ndocker_host = ${JSON.stringify(host)}\n`]]) });
    for (const bad of ["tcp://10.0.0.2:2375", "tcp://127.0.0.1", "unix://docker.sock", "npipe:////./pipe/docker_engine", "tcp://localhost:70000"]) {
      expect(withHost(bad).diagnostics.map((x) => [x.code, x.line, x.column]), bad).toEqual([["config.invalid_value", 2, 15]]);
    }
    for (const good of ["", "unix:///var/run/docker.sock", "/run/user/1000/docker.sock", "tcp://127.0.0.1:2375", "http://localhost:2375/", "tcp://[::1]:2375"]) {
      expect(withHost(good).diagnostics.filter((x) => x.severity === "error"), good).toEqual([]);
    }
  });
});
