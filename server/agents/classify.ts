import { lstatSync, readlinkSync } from "node:fs";
import { posix } from "node:path";
import { classifyTool, type CompiledAgent } from "../../compiler/index.js";
import { ApiError } from "../errors.js";

/**
 * The policy layer for bundled agents (seed 001 "hal0 as an MCP client",
 * reference §1.4): what an agent's `agents/<name>.toml` lets it do with a
 * tool call, and the workspace pin of its filesystem-style arguments. Pure
 * policy: no MCP connection is made here; whoever forwards the call asks
 * `guardToolCall` first.
 */

/** `classifyTool` and `ToolVerdict` live with the compiler, which folds an agent's verdicts for hal0's own servers into the policy. */
export { classifyTool, type ToolVerdict } from "../../compiler/index.js";

/**
 * Refuses a call the agent may not make, else returns whether it runs now
 * (`allow`) or waits for an approval (`gated`). Throws `agent.unknown_server`,
 * `agent.tool_blocked` or `agent.unknown_tool` (403) by the verdict, then
 * `agent.workspace_escape` when a filesystem-style argument leads outside the
 * workspace (see `checkWorkspaceArgs`). A gated call must be checked again
 * when its approval runs it: the filesystem may have changed meanwhile.
 */
export function guardToolCall(agent: CompiledAgent, server: string, tool: string, args: Readonly<Record<string, unknown>>): "allow" | "gated" {
  const verdict = classifyTool(agent, server, tool);
  const details = { agent: agent.name, server, tool, verdict };
  switch (verdict) {
    case "unknown_server": {
      const known = Object.keys(agent.servers).filter((id) => agent.servers[id]!.enabled);
      throw new ApiError("agent.unknown_server", `agent \`${agent.name}\` has no enabled MCP server \`${server}\``, { ...details, known });
    }
    case "blocked":
      throw new ApiError("agent.tool_blocked", `agent \`${agent.name}\` may not call \`${tool}\`: its policy blocks it`, details);
    case "unknown_tool":
      throw new ApiError("agent.unknown_tool", `agent \`${agent.name}\` may not call \`${tool}\`: no list of its policy names it`, details);
    default:
      checkWorkspaceArgs(agent, args);
      return verdict;
  }
}

/**
 * Argument names that hold filesystem paths, compared after lowercasing and
 * dropping `_` and `-` (so `file_path`, `filePath` and `FILE-PATH` are all
 * `filepath`). Every string anywhere under such a key — directly, in arrays
 * nested to any depth, or in objects under it — is a path. Keys are found at
 * any depth of the arguments (`{edits: [{path: …}]}`).
 */
export const WORKSPACE_PATH_KEYS: readonly string[] = [
  "path", "paths", "file", "files", "filename", "filepath", "dir", "directory", "root", "cwd", "workdir",
  "source", "destination", "target", "src", "dest",
];
const PATH_KEYS = new Set(WORKSPACE_PATH_KEYS);

/** Why a path argument was refused (`details.reason` of `agent.workspace_escape`). */
export type EscapeReason = "parent" | "absolute" | "symlink" | "home" | "nul" | "unresolvable";

/** Symlinks followed before a path counts as a loop (Linux's MAXSYMLINKS). */
const MAX_LINKS = 40;

/**
 * Pins every filesystem-style argument (WORKSPACE_PATH_KEYS) to the agent's
 * workspace. A relative path is taken against the workspace. Refused with
 * `agent.workspace_escape` (details: agent, arg, value, reason):
 * - `parent`: `..` segments that climb out;
 * - `absolute`: an absolute path (or a `file:` URL) outside the workspace;
 * - `home`: a leading `~`, which servers expand to a home folder;
 * - `nul`: a NUL character;
 * - `symlink`: following symlinks, as the kernel does component by component
 *   (a dangling link's target included), leads outside the real workspace —
 *   both for the path as written and lexically normalized, since servers do
 *   either; a file not created yet is judged by its deepest existing ancestor;
 * - `unresolvable`: a component cannot be inspected (permission denied,
 *   a symlink loop).
 * The workspace itself need not exist. Reads the filesystem (lstat and
 * readlink only); synchronous, as each check is a few system calls.
 */
export function checkWorkspaceArgs(agent: CompiledAgent, args: Readonly<Record<string, unknown>>): void {
  const workspace = posix.resolve(agent.workspace);
  let realWorkspace: string | undefined;
  for (const { at, value } of pathStrings(args)) {
    const refuse = (reason: EscapeReason): never => {
      throw new ApiError("agent.workspace_escape", `\`${at}\` leads outside the workspace of agent \`${agent.name}\` (${reason})`, { agent: agent.name, arg: at, value, reason });
    };
    if (value.includes("\u0000")) refuse("nul");
    if (value.startsWith("~")) refuse("home");
    const written = /^file:/i.test(value) ? (fileUrlPath(value) ?? refuse("absolute")) : value;
    const absolute = posix.isAbsolute(written);
    const joined = absolute ? written : `${workspace}/${written}`;
    const lexical = posix.resolve(joined);
    if (!inside(lexical, workspace)) refuse(absolute ? "absolute" : "parent");
    realWorkspace ??= resolveLinks(workspace) ?? refuse("unresolvable");
    for (const form of [joined, lexical]) {
      const real = resolveLinks(form) ?? refuse("unresolvable");
      if (!inside(real, realWorkspace)) refuse("symlink");
    }
  }
}

/** Every string under a path key of `args`, with where it sits (`paths[1]`, `edits[0].path`), in argument order. */
function pathStrings(args: Readonly<Record<string, unknown>>): Array<{ at: string; value: string }> {
  const out: Array<{ at: string; value: string }> = [];
  const seen = new Set<object>();
  const stack: Array<{ value: unknown; at: string; pinned: boolean }> = [{ value: args, at: "", pinned: false }];
  while (stack.length > 0) {
    const { value, at, pinned } = stack.pop()!;
    if (typeof value === "string") {
      if (pinned) out.push({ at, value });
      continue;
    }
    if (typeof value !== "object" || value === null || seen.has(value)) continue;
    seen.add(value);
    const children = Array.isArray(value)
      ? value.map((item, i) => ({ value: item as unknown, at: `${at}[${i}]`, pinned }))
      : Object.entries(value).map(([key, item]) => ({ value: item, at: at === "" ? key : `${at}.${key}`, pinned: pinned || PATH_KEYS.has(normalizeKey(key)) }));
    for (let i = children.length - 1; i >= 0; i--) stack.push(children[i]!);
  }
  return out;
}

function normalizeKey(key: string): string {
  return key.toLowerCase().replace(/[-_]/g, "");
}

/** The absolute path a `file:` URL names; undefined when it does not parse or names another host. */
function fileUrlPath(value: string): string | undefined {
  try {
    const url = new URL(value);
    return url.host === "" || url.host === "localhost" ? decodeURIComponent(url.pathname) : undefined;
  } catch {
    return undefined;
  }
}

/**
 * Where `path` (absolute) leads when opened: each existing component is
 * inspected with lstat and a symlink is replaced by its target (relative to
 * the link's folder), as the kernel does; `..` climbs from the real folder
 * reached so far. From the first component that does not exist, the rest is
 * taken as written (`..` still climbs), and components after it are still
 * inspected, since a server may normalize `missing/..` away. Undefined when
 * a component cannot be inspected or the links loop.
 */
function resolveLinks(path: string): string | undefined {
  const pending = path.split("/").reverse();
  let current = "/";
  let links = 0;
  while (pending.length > 0) {
    const part = pending.pop()!;
    if (part === "" || part === ".") continue;
    if (part === "..") {
      current = posix.dirname(current);
      continue;
    }
    const next = current === "/" ? `/${part}` : `${current}/${part}`;
    const stat = lstatOrMissing(next);
    if (stat === "error" || (stat === "link" && ++links > MAX_LINKS)) return undefined;
    if (stat !== "link") {
      current = next;
      continue;
    }
    const target = readLink(next);
    if (target === undefined) return undefined;
    if (target.startsWith("/")) current = "/";
    pending.push(...target.split("/").reverse());
  }
  return current;
}

function lstatOrMissing(path: string): "link" | "present" | "missing" | "error" {
  try {
    return lstatSync(path).isSymbolicLink() ? "link" : "present";
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    return code === "ENOENT" || code === "ENOTDIR" ? "missing" : "error";
  }
}

function readLink(path: string): string | undefined {
  try {
    return readlinkSync(path);
  } catch {
    return undefined;
  }
}

function inside(path: string, root: string): boolean {
  return root === "/" || path === root || path.startsWith(`${root}/`);
}
