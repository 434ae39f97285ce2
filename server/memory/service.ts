import { randomUUID } from "node:crypto";
import type { Settings } from "../../schema/index.js";
import { invoke, type Call, type Dispatcher } from "../dispatch.js";
import { ApiError } from "../errors.js";
import { auditRefusal } from "../audit.js";
import { toolTier } from "../identity/access.js";
import { queueForPerson } from "../verdict.js";
import type { Caller, Route, RouteContext } from "../route.js";

type Ctx = RouteContext<unknown, unknown, unknown>;
import { EmbeddedEngine } from "../../memory/embedded.js";
import type { MemoryEngine } from "../../memory/engine.js";
import { HindsightEngine } from "../../memory/hindsight.js";
import { deleteNeedsApproval, parseMemoryArgs, precheckMemoryTool, runMemoryTool } from "./run.js";
import { HARD_GATED_MEMORY_TOOLS, MEMORY_TOOLS } from "./tools.js";

type MemorySettings = Settings["memory"];

export interface MemoryServiceOptions {
  readonly stateDir: string;
  /** `[memory]` of the last tree that compiled (undefined before the first: the defaults). */
  readonly settings: () => MemorySettings | undefined;
  /** Makes an engine; default: embedded in `<state>/memory.db` or a Hindsight client at `[memory] url`. */
  readonly engineFor?: (settings: MemorySettings, stateDir: string) => MemoryEngine;
}

/**
 * hal0-memory's engine, chosen by `[memory]` and swapped when `engine` or
 * `url` change (the old one closed). `[memory] enabled = false` answers
 * every tool with `mcp.memory_unconfigured`.
 */
export class MemoryService {
  private current?: { readonly key: string; readonly engine: MemoryEngine; readonly since: string };
  /** The last failure to open or close an engine (service_list's `last_error`). */
  private lastError?: { readonly message: string; readonly at: string };

  constructor(private readonly options: MemoryServiceOptions) {}

  /** The engine for the current settings. */
  engine(): MemoryEngine {
    const s = this.options.settings() ?? { enabled: true, engine: "embedded", url: "" };
    if (!s.enabled) throw new ApiError("mcp.memory_unconfigured", "hal0-memory is disabled ([memory] enabled = false in hal0.toml)");
    const key = s.engine === "embedded" ? "embedded" : `hindsight ${s.url}`;
    if (this.current?.key !== key) {
      const before = this.current;
      try {
        this.current = { key, engine: (this.options.engineFor ?? defaultEngine)(s, this.options.stateDir), since: new Date().toISOString() };
      } catch (err) {
        this.lastError = { message: (err as Error).message, at: new Date().toISOString() };
        throw err;
      }
      void before?.engine.close();
    }
    return this.current.engine;
  }

  /**
   * Closes the engine (its queued operations settle first) and opens it
   * again from the current `[memory]` settings: embedded reopens memory.db,
   * Hindsight gets a new client. What service_action restart runs.
   */
  async restart(): Promise<void> {
    const before = this.current;
    this.current = undefined;
    try {
      await before?.engine.idle();
      await before?.engine.close();
    } catch (err) {
      this.lastError = { message: (err as Error).message, at: new Date().toISOString() };
    }
    this.engine();
  }

  /** What service_list shows: disabled, running (an engine is open) or idle (it opens on first use), since when, the last error. */
  status(): { state: "disabled" | "running" | "idle"; engine: string; since?: string; last_error?: { message: string; at: string } } {
    const s = this.options.settings() ?? { enabled: true, engine: "embedded", url: "" };
    const state = !s.enabled ? "disabled" : this.current ? "running" : "idle";
    return { state, engine: s.engine, since: this.current?.since, last_error: this.lastError };
  }

  /** The engine if one was opened (for shutdown and tests), without opening one. */
  opened(): MemoryEngine | undefined {
    return this.current?.engine;
  }

  async close(): Promise<void> {
    const engine = this.current?.engine;
    this.current = undefined;
    await engine?.close();
  }
}

function defaultEngine(s: MemorySettings, stateDir: string): MemoryEngine {
  return s.engine === "embedded" ? new EmbeddedEngine({ stateDir }) : new HindsightEngine({ url: s.url });
}

/**
 * One internal route per memory tool, so an approved request runs through
 * the same door as every call (`invoke`: validated, audited). They are not
 * mounted over HTTP: hal0-memory is reached over MCP only.
 */
export const MEMORY_ROUTES: readonly Route[] = MEMORY_TOOLS.map((tool): Route => ({
  kind: tool.tier === "read" ? "read" : "action",
  method: "POST",
  path: `/mcp/memory/${tool.name}`,
  summary: tool.description,
  auditBody: memoryAuditBody,
  handle: ({ body, services, caller }: Ctx) => {
    const { input } = parseMemoryArgs(tool.name, body);
    return runMemoryTool(memoryOf(services).engine(), tool.name, input, caller);
  },
  precheck: async ({ body, services, caller }: Ctx) => {
    const { input } = parseMemoryArgs(tool.name, body);
    await precheckMemoryTool(memoryOf(services).engine(), tool.name, input, caller);
  },
}));

/** The arguments of a memory tool that carry memory itself: what was remembered, asked or instructed. */
const MEMORY_CONTENT = new Set(["text", "context", "query", "source_query", "content", "metadata", "entities"]);

/**
 * A memory call's arguments as its audit row keeps them: ids, datasets,
 * tags, names and limits as sent, and each field that carries memory
 * (MEMORY_CONTENT) as its size (`[212 chars]`, `[3 items]`). Audit rows are
 * read by any caller (`GET /api/activity`, activity_list), and the text of an
 * agent's private dataset is never readable by another; a 200 KB document
 * does not belong in the log either.
 */
export function memoryAuditBody(body: unknown): unknown {
  if (body === null || typeof body !== "object" || Array.isArray(body)) return body;
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(body)) {
    let kept: unknown = v;
    if (MEMORY_CONTENT.has(k) && typeof v === "string") kept = `[${v.length} chars]`;
    else if (MEMORY_CONTENT.has(k) && Array.isArray(v)) kept = `[${v.length} items]`;
    else if (MEMORY_CONTENT.has(k) && v !== null && typeof v === "object") kept = `[${Object.keys(v).length} keys]`;
    // A key is data here, `__proto__` too (never set as a prototype).
    Object.defineProperty(out, k, { value: kept, enumerable: true, writable: true, configurable: true });
  }
  return out;
}

/** The dispatcher's memory service; a server built without one answers mcp.memory_unconfigured. */
function memoryOf(d: Dispatcher): MemoryService {
  if (!d.memory) throw new ApiError("mcp.memory_unconfigured", "this server does not serve hal0-memory");
  return d.memory;
}

const ROUTE_BY_TOOL = new Map(MEMORY_ROUTES.map((r) => [r.path.slice("/mcp/memory/".length), r]));

/**
 * One memory tool call, from `/mcp/memory` or hal0-admin: arguments checked,
 * the caller's tier looked up, then run (audited) or queued for a person —
 * a gated tool, memory_delete beyond one id in the caller's own dataset, or
 * (on the standalone mount, checked first) one of its two delete tools.
 */
export async function callMemoryTool(d: Dispatcher, name: string, args: unknown, caller: Caller, mount: "memory" | "admin"): Promise<unknown> {
  const started = performance.now();
  const { input } = parseMemoryArgs(name, args);
  const route = ROUTE_BY_TOOL.get(name)!;
  const call: Call = { params: {}, query: {}, body: args ?? {}, caller: { ...caller, via: "mcp" }, requestId: randomUUID(), tool: name };
  const tier = await tierOf(d, name, route, call.caller);
  // A person's own call runs (through the same door); an agent's meets the gates.
  const gatedBy = call.caller.kind === "operator" ? undefined
    : (mount === "memory" && HARD_GATED_MEMORY_TOOLS.has(name) ? "hal0-memory always gates it" : undefined)
      ?? (tier === "gated" ? "its tier is gated" : undefined)
      ?? (name === "memory_delete" ? deleteNeedsApproval(input, call.caller) : undefined);
  if (gatedBy === undefined) return invoke(d, route, call);
  // Queued with one audit row, or refused before it could be (too many waiting, a delete of nothing) with one too.
  return queueForPerson(d, route, name, call, started, gatedBy);
}

async function tierOf(d: Dispatcher, name: string, route: Route, caller: Caller): Promise<string> {
  try {
    return toolTier((await d.box.model()).policy, route, name, caller);
  } catch (err) {
    if (err instanceof ApiError) auditRefusal(d, name, caller, err, route);
    throw err;
  }
}
