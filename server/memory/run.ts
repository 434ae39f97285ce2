import { ApiError, refusing } from "../errors.js";
import type { Caller } from "../route.js";
import type { MemoryEngine, OperationScope, Scope, SearchHit } from "../../memory/engine.js";
import { MEMORY_TOOL_BY_NAME, type MemoryToolDef } from "./tools.js";

/**
 * What each hal0-memory tool does: its arguments parsed, its namespace
 * resolved from the caller, one engine call, the reply shaped. The same
 * handlers serve `/mcp/memory`, the admin server's memory_* tools and an
 * approved request (seed 003: "the exact same handlers").
 *
 * Namespaces (seed 001): `dataset` defaults to `shared`; `X-hal0-Private`
 * promotes it to `private:<client_id>`. Another caller's `private:<id>` is
 * refused (`memory.dataset_forbidden`) except for an approved request, and
 * bank-wide reads (tags, stats, history by id) see every dataset but other
 * callers' private ones.
 */

/** Parses a call's arguments against the tool's schema: `mcp.memory_schema` with every problem in `detail`. */
export function parseMemoryArgs(name: string, args: unknown): { tool: MemoryToolDef; input: Record<string, unknown> } {
  const tool = MEMORY_TOOL_BY_NAME.get(name);
  if (!tool) throw new ApiError("mcp.unknown_tool", `hal0-memory has no tool ${name}`, { tool: name });
  const raw = args === undefined || args === null ? {} : args;
  if (typeof raw !== "object" || Array.isArray(raw)) throw schemaError(name, [{ path: "", message: "arguments must be an object" }]);
  if (Object.hasOwn(raw, "source")) {
    throw schemaError(name, [{ path: "source", message: "source is set by the server from the caller's identity (its token) and cannot be passed" }]);
  }
  const parsed = tool.input.safeParse(raw);
  if (!parsed.success) throw schemaError(name, parsed.error.issues.map((i) => ({ path: i.path.map(String).join("."), message: i.message })));
  const input = parsed.data as Record<string, unknown>;
  if (tool.needsOneOf && !tool.needsOneOf.some((f) => input[f] !== undefined && !isEmptyObject(input[f]))) {
    throw schemaError(name, [{ path: "", message: `give id and at least one field to change: ${tool.needsOneOf.join(", ")}` }]);
  }
  const problem = tool.check?.(input);
  if (problem) throw schemaError(name, [problem]);
  return { tool, input };
}

function isEmptyObject(v: unknown): boolean {
  return typeof v === "object" && v !== null && !Array.isArray(v) && Object.keys(v).length === 0;
}

function schemaError(tool: string, detail: Array<{ path: string; message: string }>): ApiError {
  return new ApiError("mcp.memory_schema", `invalid arguments for ${tool}: ${detail.map((d) => (d.path ? `${d.path}: ${d.message}` : d.message)).join("; ")}`, { tool, detail });
}

/**
 * The caller's default dataset: `private:<agent>` when it asked for privacy
 * (only an authenticated agent has a private namespace: anyone else gets
 * `memory.identity_required`), else `shared`.
 */
export function defaultDataset(caller: Caller): string {
  if (!caller.private) return "shared";
  if (caller.kind !== "agent") throw new ApiError("memory.identity_required", `a private memory namespace needs an agent token; ${caller.kind === "anonymous" ? "an anonymous caller" : `operator ${caller.agent}`} has none`, { kind: caller.kind });
  return `private:${caller.agent}`;
}

/** Another caller's private namespace (for anyone but an agent, every private one). */
export function isForeignDataset(dataset: string, caller: Caller): boolean {
  return dataset.startsWith("private:") && (caller.kind !== "agent" || dataset !== `private:${caller.agent}`);
}

/**
 * Whose private namespace the engine shows besides `shared`: an agent's own;
 * for anyone else a name no agent can have (names hold no `:`), so none.
 */
export function ownerOf(caller: Caller): string {
  return caller.kind === "agent" ? caller.agent : `${caller.kind}:${caller.agent}`;
}

/**
 * The datasets a call names (or the default), refused when one is another
 * caller's private one — unless an operator (a person) names it, or the call
 * is a request an operator approved.
 */
export function scopeOf(dataset: unknown, caller: Caller): Scope {
  const datasets = dataset === undefined ? [defaultDataset(caller)] : [dataset as string | string[]].flat();
  const foreign = datasets.filter((d) => isForeignDataset(d, caller));
  if (foreign.length > 0 && caller.via !== "approval" && caller.kind !== "operator") {
    if (caller.kind === "anonymous") throw new ApiError("memory.identity_required", `${foreign.join(", ")} is a private namespace; an anonymous caller may not use one`, { datasets: foreign });
    throw new ApiError("memory.dataset_forbidden", `${foreign.join(", ")} is another caller's private memory`, { datasets: foreign, caller: caller.agent });
  }
  return { datasets: [...new Set(datasets)].sort(), owner: ownerOf(caller) };
}

/** Bank-wide reads: every dataset the caller may see, or the ones it names. */
function visibleScope(dataset: unknown, caller: Caller): Scope {
  return dataset === undefined ? { owner: ownerOf(caller) } : scopeOf(dataset, caller);
}

/**
 * Which operations a caller sees and acts on: an operator (or a request an
 * operator approved) every one; anyone else those of the datasets it may see
 * (engine.ts OperationScope), so another agent's private retain is not found.
 */
export function operationScopeOf(caller: Caller): OperationScope {
  return caller.kind === "operator" || caller.via === "approval" ? "all" : { owner: ownerOf(caller) };
}

/**
 * Why a memory_delete call needs a person (seed 001): more than one id, a list
 * of datasets, or another caller's dataset. Undefined = it runs at once.
 */
export function deleteNeedsApproval(input: Record<string, unknown>, caller: Caller): string | undefined {
  const ids = new Set(input.ids as string[]);
  if (ids.size > 1) return `deletes ${ids.size} memory ids`;
  if (Array.isArray(input.dataset)) return `deletes across datasets ${input.dataset.join(", ")}`;
  if (typeof input.dataset === "string" && isForeignDataset(input.dataset, caller)) return `deletes in another caller's dataset ${input.dataset}`;
  return undefined;
}

/**
 * Runs one parsed call against the engine. This and `precheckMemoryTool` are
 * the only doors to an engine, so they are where an engine's `MemoryError`
 * becomes the `ApiError` of the same code, message and details.
 */
export function runMemoryTool(engine: MemoryEngine, name: string, a: Record<string, any>, caller: Caller): Promise<unknown> {
  return refusing(() => runTool(engine, name, a, caller));
}

async function runTool(engine: MemoryEngine, name: string, a: Record<string, any>, caller: Caller): Promise<unknown> {
  const all: Scope = { owner: ownerOf(caller) };
  switch (name) {
    case "memory_search": {
      const { results } = await engine.search({ query: a.query, limit: a.limit, scope: scopeOf(a.dataset, caller), tags: a.tags, tags_match: a.tags_match, before: a.before, after: a.after, types: a.types });
      return { results: results.map(hitView) };
    }
    case "memory_list": {
      const page = await engine.list({ scope: scopeOf(a.dataset, caller), cursor: a.cursor, limit: a.limit, tags: a.tags, include_invalid: a.include_invalid });
      return { items: page.items, next_cursor: page.next_cursor };
    }
    case "memory_recall": {
      const r = await engine.recall({ query: a.query, max_tokens: a.max_tokens, scope: scopeOf(a.dataset, caller), types: a.types, tags: a.tags, tags_match: a.tags_match });
      return { ...r, results: r.results.map(hitView) };
    }
    case "memory_reflect":
      return engine.reflect({ query: a.query, scope: scopeOf(a.dataset, caller), max_tokens: a.max_tokens });
    case "memory_history":
      return engine.history(a.id, all);
    case "memory_mental_model_list":
      return engine.mentalModelList({ detail: a.detail, tags: a.tags });
    case "memory_mental_model_get":
      return engine.mentalModelGet(a.id);
    case "memory_directive_list":
      return engine.directiveList({ active_only: a.active_only, tags: a.tags });
    case "memory_directive_get":
      return engine.directiveGet(a.id);
    case "memory_operation_list":
      return engine.operationList({ status: a.status, kind: a.kind, limit: a.limit, scope: operationScopeOf(caller) });
    case "memory_operation_get":
      return engine.operationGet(a.id, operationScopeOf(caller));
    case "memory_tags_list":
      return engine.tags(visibleScope(a.dataset, caller));
    case "memory_bank_stats":
      return engine.stats(visibleScope(a.dataset, caller));
    case "memory_add": {
      const dataset = scopeOf(a.dataset, caller).datasets![0]!;
      return engine.add({ text: a.text, dataset, tags: a.tags ?? [], metadata: a.metadata ?? {}, document_id: a.document_id, context: a.context, source: caller.agent });
    }
    case "memory_curate": {
      const { id, ...change } = a;
      return engine.curate(id, change, all, caller.agent);
    }
    case "memory_mental_model_create":
      return engine.mentalModelCreate({ name: a.name, source_query: a.source_query, max_tokens: a.max_tokens, tags: a.tags, trigger: a.trigger }, caller.agent);
    case "memory_mental_model_update": {
      const { id, ...change } = a;
      return engine.mentalModelUpdate(id, change);
    }
    case "memory_mental_model_refresh":
      return engine.mentalModelRefresh(a.id);
    case "memory_directive_create":
      return engine.directiveCreate({ name: a.name, content: a.content, priority: a.priority, is_active: a.is_active, tags: a.tags });
    case "memory_directive_update": {
      const { id, ...change } = a;
      return engine.directiveUpdate(id, change);
    }
    case "memory_operation_cancel":
      return engine.operationCancel(a.id, operationScopeOf(caller));
    case "memory_operation_retry":
      return engine.operationRetry(a.id, operationScopeOf(caller));
    case "memory_bank_consolidate":
      return engine.consolidate(visibleScope(a.dataset, caller));
    case "memory_delete": {
      const ids = [...new Set(a.ids as string[])];
      const scope = scopeOf(a.dataset, caller);
      const result = await engine.delete(ids, scope);
      if (result.deleted === 0 && result.not_found.length === ids.length) throw noneFound(ids, scope);
      return result;
    }
    case "memory_mental_model_delete":
      return engine.mentalModelDelete(a.id);
    case "memory_directive_delete":
      return engine.directiveDelete(a.id);
    default:
      throw new ApiError("mcp.unknown_tool", `hal0-memory has no tool ${name}`, { tool: name });
  }
}

/**
 * Refuses a gated call that could not run, before it is queued and again
 * when it is approved: its arguments, its namespace, and that the thing it
 * deletes exists.
 */
export function precheckMemoryTool(engine: MemoryEngine, name: string, a: Record<string, any>, caller: Caller): Promise<void> {
  return refusing(() => precheck(engine, name, a, caller));
}

async function precheck(engine: MemoryEngine, name: string, a: Record<string, any>, caller: Caller): Promise<void> {
  if (name === "memory_mental_model_delete") await engine.mentalModelGet(a.id);
  else if (name === "memory_directive_delete") await engine.directiveGet(a.id);
  else if (name === "memory_delete") {
    const scope = scopeOf(a.dataset, { ...caller, via: "approval" });
    // An agent learns nothing of another's private dataset, not even whether an id (a doc_ id is
    // its document_id's hash) is there: its request is queued unlooked-at, and checked when approved.
    if (caller.via !== "approval" && caller.kind !== "operator" && scope.datasets!.some((d) => isForeignDataset(d, caller))) return;
    const ids = [...new Set(a.ids as string[])];
    if ((await engine.deletable(ids, scope)).length === 0) throw noneFound(ids, scope);
  }
}

/** memory_delete's one rule for missing ids: none of them found is memory.not_found; some found is a reply listing the others in `not_found`. */
function noneFound(ids: readonly string[], scope: Scope): ApiError {
  return new ApiError("memory.not_found", `none of ${ids.join(", ")} is in ${scope.datasets!.join(", ")}`, { ids, datasets: scope.datasets });
}

/** A search hit as seed 001 returns it. */
function hitView(h: SearchHit) {
  return { id: h.id, text: h.text, score: h.score, timestamp: h.timestamp, dataset: h.dataset, tags: h.tags, source: h.source, metadata: h.metadata, fact_type: h.fact_type, ...(h.document_id ? { document_id: h.document_id } : {}) };
}
