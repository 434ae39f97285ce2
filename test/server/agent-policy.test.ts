import { mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { compile, sourceTree, type CompiledAgent } from "../../compiler/index.js";
import { checkWorkspaceArgs, classifyTool, guardToolCall, type ToolVerdict } from "../../server/agents/classify.js";
import { ApiError } from "../../server/errors.js";

/** Compiles one agent file through the real compiler, as `agents/<name>.toml` of an otherwise empty tree. */
function compiledAgent(name: string, text: string): CompiledAgent {
  const result = compile(sourceTree("/etc/hal0", [[`agents/${name}.toml`, text]]));
  expect(result.diagnostics).toEqual([]);
  return result.model!.agents[name]!;
}

/** What `fn` threw, as an ApiError. */
function refusal(fn: () => unknown): ApiError {
  try {
    fn();
  } catch (err) {
    if (err instanceof ApiError) return err;
    throw err;
  }
  throw new Error("expected a refusal, got none");
}

const CODER = `
[agent]
name = "coder"

[mcp.servers.hal0-admin]
builtin = true

[mcp.servers.hal0-memory]
builtin = true

[mcp.servers.files]
url = "http://127.0.0.1:9310/mcp"

[mcp.servers.search]
url = "http://127.0.0.1:9320/mcp"
enabled = false

[tools]
allow = ["slot_list", "memory_search", "read_text_file", "web_search"]
gated = ["slot_load", "write_file"]
blocked = ["slot_unload"]
`;

describe("compiled agents", () => {
  it("defaults the display to the name and the workspace to /var/lib/hal0/agents/<name>/workspace", () => {
    const coder = compiledAgent("coder", CODER);
    expect(coder.display).toBe("coder");
    expect(coder.workspace).toBe("/var/lib/hal0/agents/coder/workspace");
    expect(Object.keys(coder.servers)).toEqual(["files", "hal0-admin", "hal0-memory", "search"]);
    expect(coder.servers["hal0-memory"]).toEqual({ builtin: true, enabled: true, auth: { kind: "none" } });
  });

  it("keeps a written workspace, without trailing or doubled slashes", () => {
    expect(compiledAgent("w", `[agent]\nname = "w"\nworkspace = "/srv//code/w/"\n`).workspace).toBe("/srv/code/w");
  });
});

describe("classifyTool", () => {
  const coder = compiledAgent("coder", CODER);
  const TABLE: Array<[string, string, ToolVerdict]> = [
    ["hal0-admin", "slot_list", "allow"],
    ["hal0-admin", "slot_load", "gated"],
    ["hal0-admin", "slot_unload", "blocked"],
    ["hal0-admin", "model_pull", "unknown_tool"],
    ["hal0-memory", "memory_search", "allow"], // builtin, no url
    ["files", "write_file", "gated"],
    ["files", "delete_file", "unknown_tool"],
    ["search", "web_search", "unknown_server"], // disabled, though the tool is allowed
    ["search", "slot_unload", "unknown_server"], // the server is judged before the tool
    ["github", "slot_list", "unknown_server"], // not listed
    ["", "slot_list", "unknown_server"],
    ["__proto__", "slot_list", "unknown_server"],
    ["constructor", "slot_list", "unknown_server"],
    ["hal0-admin", "toString", "unknown_tool"],
    ["hal0-admin", "SLOT_LIST", "unknown_tool"], // names are exact
  ];
  it.each(TABLE)("%s / %s → %s", (server, tool, verdict) => {
    expect(classifyTool(coder, server, tool)).toBe(verdict);
  });

  it("favours the stricter list when a hand-built agent lists a tool twice: blocked > gated > allow", () => {
    const agent: CompiledAgent = {
      ...coder,
      tools: { allow: ["a", "b", "c"], gated: ["a", "b", "d"], blocked: ["a", "e"] },
    };
    expect(["a", "b", "c", "d", "e", "f"].map((tool) => classifyTool(agent, "files", tool)))
      .toEqual(["blocked", "gated", "allow", "gated", "blocked", "unknown_tool"]);
  });
});

let tmp: string;
let ws: string;
let outside: string;

beforeAll(() => {
  tmp = mkdtempSync(join(tmpdir(), "hal0-agent-ws-"));
  ws = join(tmp, "ws");
  outside = join(tmp, "outside");
  mkdirSync(join(ws, "sub", "a", "b"), { recursive: true });
  mkdirSync(outside);
  writeFileSync(join(ws, "notes.txt"), "inside\n");
  writeFileSync(join(outside, "secret.txt"), "outside\n");
  symlinkSync(outside, join(ws, "out-link")); // a folder link out, absolute target
  symlinkSync("../outside", join(ws, "up-link")); // the same, relative target
  symlinkSync(join(outside, "secret.txt"), join(ws, "secret-link")); // a file link out
  symlinkSync(join(outside, "not-yet.txt"), join(ws, "dangling")); // writing through it creates a file outside
  symlinkSync("sub", join(ws, "in-link")); // a link that stays inside
  symlinkSync("sub/a", join(ws, "deep-link")); // the same, two levels down
  symlinkSync("loop-b", join(ws, "loop-a"));
  symlinkSync("loop-a", join(ws, "loop-b"));
  symlinkSync(ws, join(tmp, "ws-link")); // a workspace reached through a link
});

afterAll(() => {
  rmSync(tmp, { recursive: true, force: true });
});

const agentAt = (workspace: string): CompiledAgent => ({ ...compiledAgent("coder", CODER), workspace });

describe("checkWorkspaceArgs", () => {
  const INSIDE: Array<[string, () => string]> = [
    ["an existing file", () => "notes.txt"],
    ["a file not created yet", () => "sub/new.txt"],
    ["a folder chain not created yet", () => "new/deeper/file.txt"],
    ["the workspace itself, relative", () => "."],
    ["the empty path (the workspace)", () => ""],
    ["an absolute path inside", () => join(ws, "notes.txt")],
    ["the workspace itself, absolute", () => ws],
    ["`..` that stays inside", () => "sub/a/../../notes.txt"],
    ["a symlink that stays inside", () => "in-link/a/new.txt"],
    ["dots inside a name", () => "a..b"],
    ["a file: URL inside", () => `file://${ws}/notes.txt`],
  ];
  it.each(INSIDE)("lets %s through", (_what, value) => {
    expect(() => checkWorkspaceArgs(agentAt(ws), { path: value() })).not.toThrow();
  });

  const ESCAPES: Array<[string, () => string, string]> = [
    ["`../x`", () => "../x", "parent"],
    ["`..` deeper down", () => "sub/../../x", "parent"],
    ["/etc/passwd", () => "/etc/passwd", "absolute"],
    ["an absolute path to a sibling", () => join(outside, "secret.txt"), "absolute"],
    ["a sibling sharing the workspace's prefix", () => `${ws}-other/x`, "absolute"],
    ["a file: URL outside", () => "file:///etc/passwd", "absolute"],
    ["a file: URL on another host", () => "file://files.example/share/x", "absolute"],
    ["a file symlink out", () => "secret-link", "symlink"],
    ["a file under a folder symlink out", () => "out-link/secret.txt", "symlink"],
    ["a file not created yet under a folder symlink out", () => "out-link/new.txt", "symlink"],
    ["a folder chain not created yet under a folder symlink out", () => "out-link/x/y/new.txt", "symlink"],
    ["a relative symlink out", () => "up-link/secret.txt", "symlink"],
    ["a dangling symlink whose target is outside", () => "dangling", "symlink"],
    ["`..` after a symlink, climbed from its target", () => "out-link/../x", "symlink"],
    ["a missing folder's `..` in front of a symlink out", () => "missing/../out-link/x", "symlink"],
    // The kernel climbs from sub/a and finds no sub/out-link; a server that normalizes first opens ws/out-link/x.
    ["`..` after an inside symlink, normalized away in front of a symlink out", () => "deep-link/../out-link/x", "symlink"],
    ["a symlink loop", () => "loop-a/x", "unresolvable"],
    ["a home folder", () => "~/.ssh/id_rsa", "home"],
    ["another user's home folder", () => "~root/x", "home"],
    ["a NUL", () => "notes.txt\u0000.png", "nul"],
  ];
  it.each(ESCAPES)("refuses %s", (_what, value, reason) => {
    const err = refusal(() => checkWorkspaceArgs(agentAt(ws), { path: value() }));
    expect(err.code).toBe("agent.workspace_escape");
    expect(err.status).toBe(403);
    expect(err.details).toEqual({ agent: "coder", arg: "path", value: value(), reason });
  });

  it("checks every path-like key, however it is spelled, and names the one refused", () => {
    for (const key of ["path", "file", "filename", "filePath", "file_path", "FILE-PATH", "dir", "directory", "root", "cwd", "workdir", "source", "destination", "target", "src", "dest"]) {
      expect(refusal(() => checkWorkspaceArgs(agentAt(ws), { [key]: "/etc/passwd" })).details.arg, key).toBe(key);
    }
  });

  it("checks arrays of paths nested to any depth, and objects under a path key", () => {
    const agent = agentAt(ws);
    expect(() => checkWorkspaceArgs(agent, { paths: ["notes.txt", ["sub/x", ["new.txt"]]] })).not.toThrow();
    expect(refusal(() => checkWorkspaceArgs(agent, { paths: ["notes.txt", ["sub/x", ["../escape"]]] })).details.arg).toBe("paths[1][1][0]");
    expect(refusal(() => checkWorkspaceArgs(agent, { files: [{ name: "x", at: "out-link/x" }] })).details.arg).toBe("files[0].at");
    expect(refusal(() => checkWorkspaceArgs(agent, { target: { where: "/etc" } })).details.arg).toBe("target.where");
  });

  it("finds path keys at any depth of the arguments", () => {
    const err = refusal(() => checkWorkspaceArgs(agentAt(ws), { edits: [{ path: "notes.txt" }, { path: "../x", text: "y" }] }));
    expect(err.details).toMatchObject({ arg: "edits[1].path", reason: "parent" });
  });

  it("refuses the first escaping path in argument order", () => {
    expect(refusal(() => checkWorkspaceArgs(agentAt(ws), { source: "notes.txt", paths: ["../a", "/etc"], dest: "~" })).details.arg).toBe("paths[0]");
  });

  it("leaves other arguments alone: strings under other keys, and non-strings under path keys", () => {
    expect(() => checkWorkspaceArgs(agentAt(ws), { query: "../../etc/passwd", content: "/etc/shadow", path: 42, paths: [null, true], dir: {} })).not.toThrow();
  });

  it("does not loop on a cyclic argument object", () => {
    const args: Record<string, unknown> = { path: "notes.txt" };
    args.self = args;
    expect(() => checkWorkspaceArgs(agentAt(ws), args)).not.toThrow();
  });

  it("pins to a workspace that does not exist yet", () => {
    const agent = agentAt(join(tmp, "not-yet", "ws"));
    expect(() => checkWorkspaceArgs(agent, { path: "x/y.txt" })).not.toThrow();
    expect(refusal(() => checkWorkspaceArgs(agent, { path: "../x" })).details.reason).toBe("parent");
  });

  it("pins to a workspace reached through a symlink, by its real folder", () => {
    const agent = agentAt(join(tmp, "ws-link"));
    expect(() => checkWorkspaceArgs(agent, { path: "notes.txt" })).not.toThrow();
    expect(() => checkWorkspaceArgs(agent, { path: "in-link/new.txt" })).not.toThrow();
    expect(refusal(() => checkWorkspaceArgs(agent, { path: "out-link/x" })).details.reason).toBe("symlink");
  });
});

describe("guardToolCall", () => {
  it("returns allow or gated, checking the arguments of both", () => {
    const agent = agentAt(ws);
    expect(guardToolCall(agent, "hal0-admin", "slot_list", {})).toBe("allow");
    expect(guardToolCall(agent, "files", "write_file", { path: "sub/new.txt" })).toBe("gated");
    expect(refusal(() => guardToolCall(agent, "files", "write_file", { path: "out-link/new.txt" })).code).toBe("agent.workspace_escape");
    expect(refusal(() => guardToolCall(agent, "files", "read_text_file", { path: "/etc/passwd" })).code).toBe("agent.workspace_escape");
  });

  const REFUSED: Array<[string, string, string, string]> = [
    ["hal0-admin", "slot_unload", "agent.tool_blocked", "blocked"],
    ["hal0-admin", "model_pull", "agent.unknown_tool", "unknown_tool"],
    ["search", "web_search", "agent.unknown_server", "unknown_server"],
    ["github", "slot_list", "agent.unknown_server", "unknown_server"],
  ];
  it.each(REFUSED)("refuses %s / %s with %s (403), before looking at the arguments", (server, tool, code, verdict) => {
    const err = refusal(() => guardToolCall(agentAt(ws), server, tool, { path: "/etc/passwd" }));
    expect(err.code).toBe(code);
    expect(err.status).toBe(403);
    expect(err.details).toMatchObject({ agent: "coder", server, tool, verdict });
  });

  it("names the enabled servers when the server is unknown", () => {
    expect(refusal(() => guardToolCall(agentAt(ws), "github", "slot_list", {})).details.known).toEqual(["files", "hal0-admin", "hal0-memory"]);
  });
});
