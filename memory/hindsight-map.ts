import { MemoryError } from "./errors.js";
import {
  FACT_TYPES,
  type AddInput,
  type Directive,
  type FactType,
  type HistoryEntry,
  type MemoryUnit,
  type MentalModel,
  type Operation,
  type OperationKind,
  type OperationStatus,
  type Scope,
} from "./engine.js";

/**
 * Pure mapping between Hindsight's JSON (REST API under
 * `/v1/default/banks/{bank_id}`) and engine.ts types. hal0 keeps every
 * dataset in ONE Hindsight bank; a unit's namespace travels as tags:
 *
 * - `dataset:<name>` — its dataset (scope filters become tag filters);
 * - `source:<id>` — who added it;
 * - `hal0:private` — on every unit of a `private:<id>` dataset, so
 *   bank-level readers (mental model refreshes) can exclude them all;
 * - a user tag that itself starts with `dataset:`, `source:`, `hal0:` or
 *   `tag:` is stored as `tag:<tag>`, so no user tag is ever mistaken for a
 *   namespace tag. Decoding strips exactly that.
 *
 * Hindsight metadata is string → string: the caller's metadata rides along
 * as JSON in `hal0_metadata` (lossless), next to `hal0_document_id` (the
 * caller's document_id) and `hal0_recorded_at` (when hal0 recorded it).
 * A unit without a `dataset:` tag was not written by hal0 and is never shown.
 */

export const DATASET_TAG = "dataset:";
export const SOURCE_TAG = "source:";
export const PRIVATE_TAG = "hal0:private";
const ESCAPE = "tag:";
const RESERVED = [DATASET_TAG, SOURCE_TAG, "hal0:", ESCAPE];

type Rec = Record<string, unknown>;

/** A JSON object from the engine, or memory.engine_error naming what was expected. */
export function rec(value: unknown, what: string): Rec {
  if (value !== null && typeof value === "object" && !Array.isArray(value)) return value as Rec;
  throw new MemoryError("memory.engine_error", `the memory engine's reply is not the expected ${what}`, { expected: what });
}

/** A JSON array of objects from the engine (memory.engine_error otherwise). */
export function recs(value: unknown, what: string): Rec[] {
  if (!Array.isArray(value)) throw new MemoryError("memory.engine_error", `the memory engine's reply has no ${what} list`, { expected: what });
  return value.map((v) => rec(v, what));
}

/** A number from the engine, 0 when absent. */
export const num = (v: unknown): number => (typeof v === "number" ? v : 0);
const str = (v: unknown): string | undefined => (typeof v === "string" ? v : undefined);
const nonEmpty = (v: unknown): string | undefined => (typeof v === "string" && v !== "" ? v : undefined);
const strings = (v: unknown): string[] => (Array.isArray(v) ? v.filter((x): x is string => typeof x === "string") : []);

export function datasetTag(dataset: string): string {
  return DATASET_TAG + dataset;
}

/** A user tag as stored in Hindsight (escaped when it starts with a reserved prefix). */
export function encodeTag(tag: string): string {
  return RESERVED.some((p) => tag.startsWith(p)) ? ESCAPE + tag : tag;
}

/** Every tag a retained item carries: namespace tags first, then the user's (escaped). */
export function itemTags(dataset: string, source: string, tags: readonly string[]): string[] {
  const own = [datasetTag(dataset), SOURCE_TAG + source, ...(dataset.startsWith("private:") ? [PRIVATE_TAG] : [])];
  return [...new Set([...own, ...tags.map(encodeTag)])];
}

/** Splits stored tags into the namespace (first dataset/source tag) and the user's tags, unescaped. */
export function decodeTags(tags: readonly string[]): { dataset?: string; source?: string; tags: string[] } {
  let dataset: string | undefined;
  let source: string | undefined;
  const user: string[] = [];
  for (const tag of tags) {
    if (tag.startsWith(DATASET_TAG)) dataset ??= tag.slice(DATASET_TAG.length);
    else if (tag.startsWith(SOURCE_TAG)) source ??= tag.slice(SOURCE_TAG.length);
    else if (tag.startsWith(ESCAPE)) user.push(tag.slice(ESCAPE.length));
    else if (!tag.startsWith("hal0:")) user.push(tag);
  }
  return { dataset, source, tags: user };
}

/** Hindsight item metadata (string values): the caller's metadata as JSON plus hal0's bookkeeping. */
export function itemMetadata(input: AddInput, recordedAt: string): Record<string, string> {
  const meta: Record<string, string> = { hal0_metadata: JSON.stringify(input.metadata), hal0_recorded_at: recordedAt, hal0_source: input.source, hal0_dataset: input.dataset };
  if (input.document_id !== undefined) meta.hal0_document_id = input.document_id;
  return meta;
}

/** The caller's metadata back: `hal0_metadata` when it parses, else the other string entries. */
function userMetadata(meta: Rec): Record<string, unknown> {
  try {
    const parsed: unknown = JSON.parse(str(meta.hal0_metadata) ?? "");
    if (parsed !== null && typeof parsed === "object" && !Array.isArray(parsed)) return parsed as Record<string, unknown>;
  } catch {
    // not hal0's JSON: fall back to the plain entries
  }
  return Object.fromEntries(Object.entries(meta).filter(([k]) => !k.startsWith("hal0_")));
}

function factType(value: unknown): FactType {
  return (FACT_TYPES as readonly unknown[]).includes(value) ? (value as FactType) : "world";
}

/** Entities come as a list (get, recall) or as one ", "-joined string (list). */
function entitiesOf(value: unknown): string[] {
  if (typeof value === "string") return value === "" ? [] : value.split(", ");
  return strings(value);
}

/**
 * A Hindsight memory unit (list item, get, recall result) as a MemoryUnit,
 * or undefined when it has no id or no `dataset:` tag (not hal0's). Its
 * timestamp is when hal0 recorded it (metadata), else mentioned_at.
 */
export function unitOf(raw: Rec): MemoryUnit | undefined {
  const { dataset, source, tags } = decodeTags(strings(raw.tags));
  if (dataset === undefined || typeof raw.id !== "string") return undefined;
  const meta = raw.metadata !== null && typeof raw.metadata === "object" ? (raw.metadata as Rec) : {};
  const recorded = nonEmpty(meta.hal0_recorded_at) ?? nonEmpty(raw.mentioned_at) ?? nonEmpty(raw.date) ?? "";
  return {
    id: raw.id,
    text: str(raw.text) ?? "",
    context: nonEmpty(raw.context) ?? null,
    dataset,
    tags,
    source: source ?? "engine",
    metadata: userMetadata(meta),
    fact_type: factType(raw.fact_type ?? raw.type),
    entities: entitiesOf(raw.entities),
    document_id: nonEmpty(meta.hal0_document_id) ?? null,
    occurred_start: nonEmpty(raw.occurred_start) ?? null,
    occurred_end: nonEmpty(raw.occurred_end) ?? null,
    state: raw.state === "invalidated" ? "invalid" : "active",
    timestamp: recorded,
    updated_at: nonEmpty(raw.invalidated_at) ?? nonEmpty(raw.edited_at) ?? recorded,
  };
}

/** Whether `scope` may see a dataset: the listed ones, else all but other callers' `private:<id>`. */
export function visible(dataset: string, scope: Scope): boolean {
  if (scope.datasets) return scope.datasets.includes(dataset);
  return !dataset.startsWith("private:") || dataset === `private:${scope.owner}`;
}

/** Whether a unit carries any (or, with "all", every) of `tags`; no tags = no filter. */
export function hasTags(unit: MemoryUnit, tags: readonly string[] | undefined, match: "any" | "all" = "any"): boolean {
  if (!tags || tags.length === 0) return true;
  return match === "all" ? tags.every((t) => unit.tags.includes(t)) : tags.some((t) => unit.tags.includes(t));
}

/** Hindsight's `tag_groups` (AND-ed): the scope's dataset tags, then the caller's tags. */
export function tagGroups(datasets: readonly string[], tags?: readonly string[], match: "any" | "all" = "any"): Rec[] {
  const groups: Rec[] = [{ tags: datasets.map(datasetTag), match: "any_strict" }];
  if (tags && tags.length > 0) groups.push({ tags: tags.map(encodeTag), match: match === "all" ? "all_strict" : "any_strict" });
  return groups;
}

/** The reason hal0 records when it invalidates a unit, naming who did. */
export function invalidationReason(by: string, why: string): string {
  return `hal0:${by}: ${why}`;
}

/**
 * A unit's history from what Hindsight keeps on it: created (by its
 * source), edited (`edited_at`; Hindsight does not record by whom:
 * `unknown`), invalidated (`invalidated_at`, by the caller hal0 named in the
 * reason). Oldest first.
 */
export function historyOf(raw: Rec, unit: MemoryUnit): HistoryEntry[] {
  const entries: HistoryEntry[] = [{ at: unit.timestamp, by: unit.source, action: "created", changes: {} }];
  const edited = nonEmpty(raw.edited_at);
  if (edited) entries.push({ at: edited, by: "unknown", action: "curated", changes: {} });
  if (unit.state === "invalid") {
    const by = /^hal0:([^:]+):/.exec(str(raw.invalidation_reason) ?? "")?.[1] ?? "unknown";
    entries.push({ at: nonEmpty(raw.invalidated_at) ?? unit.updated_at, by, action: "invalidated", changes: { state: { before: "active", after: "invalid" } } });
  }
  return entries.sort((a, b) => (a.at < b.at ? -1 : a.at > b.at ? 1 : 0));
}

/** A mental model; Hindsight keeps no updated_at, so it is the last refresh (or creation). */
export function mentalModelOf(raw: Rec): MentalModel {
  const trigger = raw.trigger !== null && typeof raw.trigger === "object" ? (raw.trigger as Rec) : {};
  const refreshed = nonEmpty(raw.last_refreshed_at) ?? null;
  const created = nonEmpty(raw.created_at) ?? "";
  return {
    id: String(raw.id),
    name: str(raw.name) ?? "",
    source_query: str(raw.source_query) ?? "",
    max_tokens: typeof raw.max_tokens === "number" ? raw.max_tokens : 2048,
    tags: strings(raw.tags),
    trigger: { refresh_after_consolidation: trigger.refresh_after_consolidation === true },
    content: str(raw.content) ?? null,
    refreshed_at: refreshed,
    stale: typeof raw.is_stale === "boolean" ? raw.is_stale : refreshed === null,
    created_at: created,
    updated_at: refreshed ?? created,
  };
}

/** A mental model's trigger: its refreshes read every unit but private datasets' (tagged `hal0:private`). */
export function modelTrigger(refreshAfterConsolidation: boolean): Rec {
  return { refresh_after_consolidation: refreshAfterConsolidation, tag_groups: [{ not: { tags: [PRIVATE_TAG], match: "any_strict" } }] };
}

export function directiveOf(raw: Rec): Directive {
  const created = nonEmpty(raw.created_at) ?? "";
  return {
    id: String(raw.id),
    name: str(raw.name) ?? "",
    content: str(raw.content) ?? "",
    priority: typeof raw.priority === "number" ? raw.priority : 0,
    is_active: raw.is_active !== false,
    tags: strings(raw.tags),
    created_at: created,
    updated_at: nonEmpty(raw.updated_at) ?? created,
  };
}

/** Directives highest priority first, then name, then id. */
export function byPriority(a: Directive, b: Directive): number {
  return b.priority - a.priority || a.name.localeCompare(b.name) || a.id.localeCompare(b.id);
}

/** Hindsight operation types per hal0 kind (the list filter). */
export const HINDSIGHT_OPERATION_TYPE: Record<OperationKind, string> = { retain: "retain", refresh: "refresh_mental_model", consolidate: "consolidation" };

const KIND_OF: Record<string, OperationKind> = {
  retain: "retain",
  retain_batch: "retain",
  file_convert_retain: "retain",
  refresh_mental_model: "refresh",
  refresh_mental_models: "refresh",
  consolidation: "consolidate",
};

/** Hindsight's status words; `queued` is its submit reply for pending. */
export function statusOf(value: unknown): OperationStatus | undefined {
  if (value === "queued") return "pending";
  return (["pending", "processing", "completed", "failed", "cancelled"] as const).find((s) => s === value);
}

/**
 * An operation from a list row (`id`, `task_type`) or a status reply
 * (`operation_id`, `operation_type`, `result_metadata`); undefined for
 * Hindsight's own kinds hal0 has none for (graph maintenance, webhooks) or
 * an unknown status. `attempts`: retries plus the run under way or done.
 */
export function operationOf(raw: Rec): Operation | undefined {
  const kind = KIND_OF[str(raw.task_type) ?? str(raw.operation_type) ?? ""];
  const status = statusOf(raw.status);
  if (!kind || !status) return undefined;
  const retries = typeof raw.retry_count === "number" ? raw.retry_count : 0;
  const result = raw.result_metadata !== null && typeof raw.result_metadata === "object" ? (raw.result_metadata as Rec) : null;
  const created = nonEmpty(raw.created_at) ?? "";
  return {
    id: String(raw.id ?? raw.operation_id),
    kind,
    status,
    target: nonEmpty(raw.document_id) ?? nonEmpty(result?.document_id) ?? null,
    result: status === "completed" ? (result ?? {}) : null,
    error: nonEmpty(raw.error_message) ?? null,
    attempts: retries + (status === "pending" ? 0 : 1),
    created_at: created,
    updated_at: nonEmpty(raw.updated_at) ?? nonEmpty(raw.completed_at) ?? created,
  };
}

const UUID_RE = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** Hindsight memory unit ids are UUIDs; anything else names no unit. */
export function isUnitId(id: string): boolean {
  return UUID_RE.test(id);
}

/** A list cursor: base64url of JSON {n}, the units consumed from the oldest end. */
export function encodeCursor(consumed: number): string {
  return Buffer.from(JSON.stringify({ n: consumed })).toString("base64url");
}

export function decodeCursor(cursor: string | undefined): number {
  if (cursor === undefined) return 0;
  try {
    const value = JSON.parse(Buffer.from(cursor, "base64url").toString("utf8")) as { n?: unknown };
    if (Number.isSafeInteger(value.n) && (value.n as number) >= 0) return value.n as number;
  } catch {
    // not JSON: refused below like any other cursor this engine did not issue
  }
  throw new MemoryError("mcp.memory_schema", "cursor is not one memory_list returned", { tool: "memory_list", detail: [{ path: "cursor", message: "not a cursor memory_list returned" }] });
}
