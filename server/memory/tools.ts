import { z } from "zod";
import { FACT_TYPES, MENTAL_MODEL_DETAILS, OPERATION_KINDS, OPERATION_STATUSES, UNIT_STATES } from "../../memory/engine.js";

/**
 * The 26 hal0-memory tools (seed 001 "hal0-memory", signatures from seeds
 * 003/004): name, tier, description and the typed input schema that both
 * `tools/list` advertises and the server validates with. Data only; what
 * each tool does is `run.ts`.
 */

/** `shared`, `private:<client_id>`, or any other name of letters, digits, `-` and `_` (≤ 64). */
export const DATASET_RE = /^(private:)?[A-Za-z0-9_-]{1,64}$/;
const Dataset = z.string().regex(DATASET_RE, "a dataset is `shared`, `private:<client_id>` or a name of letters, digits, - and _ (at most 64)");
const Datasets = z.union([Dataset, z.array(Dataset).min(1).max(16)]).describe("one dataset or a list (default `shared`, or `private:<you>` with X-hal0-Private)");
/** A tag: printable text with something besides spaces in it (a blank or a control character is no tag anyone can ask for). */
const Tag = z.string().min(1).max(64).regex(/^(?=.*\S)[^\u0000-\u001f\u007f]+$/, "a tag is printable text that is not blank (no control characters)");
const Tags = z.array(Tag).max(32);
const Id = z.string().min(1).max(128);
const Iso = z.iso.datetime({ offset: true });
const Query = z.string().trim().min(1).max(4000);
const MaxTokens = z.int().min(1).max(32_768);
const TagsMatch = z.enum(["any", "all"]).describe("`any` (default): a unit with any of the tags; `all`: with every one");
const Types = z.array(z.enum(FACT_TYPES)).min(1).describe("fact types to include");
/** The identity grammar: letters, digits, `-`, `_`, at most 64. */
const DocumentId = z.string().regex(/^[A-Za-z0-9_-]{1,64}$/, "document_id is letters, digits, - and _ (at most 64)");
const Trigger = z.strictObject({ refresh_after_consolidation: z.boolean().optional() });

export type MemoryTier = "read" | "write" | "gated";

export interface MemoryToolDef {
  readonly name: string;
  readonly tier: MemoryTier;
  readonly description: string;
  readonly input: z.ZodObject;
  /** Fields of which at least one must be given besides `id` (an update with nothing to change is a schema error); an empty object (`trigger: {}`) changes nothing. */
  readonly needsOneOf?: readonly string[];
  /** A rule across fields, after the schema: the problem with the call, or undefined. */
  readonly check?: (input: Record<string, unknown>) => { path: string; message: string } | undefined;
}

const byId = (what: string) => z.strictObject({ id: Id.describe(`the ${what}'s id`) });

const CURATE_FIELDS = ["text", "context", "occurred_start", "occurred_end", "fact_type", "entities", "state"] as const;
const MM_FIELDS = ["name", "source_query", "max_tokens", "tags", "trigger"] as const;
const DIRECTIVE_FIELDS = ["name", "content", "priority", "is_active", "tags"] as const;

export const MEMORY_TOOLS: readonly MemoryToolDef[] = [
  // ── autonomous read ─────────────────────────────────────────────────
  {
    name: "memory_search", tier: "read",
    description: "Search long-term memory: full-text ranking plus tag and time-window filters → {results: [{id, text, score, timestamp, dataset, tags, source, metadata}]}.",
    input: z.strictObject({
      query: Query, limit: z.int().min(1).max(100).default(10), dataset: Datasets.optional(),
      tags: Tags.optional(), tags_match: TagsMatch.optional(), types: Types.optional(),
      before: Iso.optional().describe("recorded before this instant"), after: Iso.optional().describe("recorded at or after this instant"),
    }),
  },
  {
    name: "memory_list", tier: "read",
    description: "Page through memory in the order it was recorded → {items, next_cursor}; pass next_cursor back for the next page (null on the last).",
    input: z.strictObject({ dataset: Datasets.optional(), cursor: z.string().max(512).optional(), limit: z.int().min(1).max(200).default(50), tags: Tags.optional(), include_invalid: z.boolean().default(false) }),
  },
  {
    name: "memory_recall", tier: "read",
    description: "Token-budgeted, consolidated memory for a query (duplicates dropped, best first, within max_tokens) → {results, tokens_used, max_tokens, truncated}.",
    input: z.strictObject({ query: Query, max_tokens: MaxTokens.default(4096), types: Types.optional(), dataset: Datasets.optional(), tags: Tags.optional(), tags_match: TagsMatch.optional() }),
  },
  {
    name: "memory_reflect", tier: "read",
    description: "An answer synthesised from recalled facts by the engine's language model; {status: \"unsupported\"} on engines without one (the embedded engine).",
    input: z.strictObject({ query: Query, max_tokens: MaxTokens.optional(), dataset: Datasets.optional() }),
  },
  { name: "memory_history", tier: "read", description: "The curation history of one memory unit, oldest first.", input: byId("memory unit") },
  {
    name: "memory_mental_model_list", tier: "read",
    description: "The bank's mental models (stored reflect answers kept refreshed): metadata (id, name, tags, staleness) unless detail is `content` or `full`.",
    input: z.strictObject({ detail: z.enum(MENTAL_MODEL_DETAILS).default("metadata"), tags: Tags.optional() }),
  },
  { name: "memory_mental_model_get", tier: "read", description: "One mental model, with its content.", input: byId("mental model") },
  {
    name: "memory_directive_list", tier: "read",
    description: "The bank's directives (standing instructions injected into prompts), highest priority first.",
    input: z.strictObject({ active_only: z.boolean().default(false), tags: Tags.optional() }),
  },
  { name: "memory_directive_get", tier: "read", description: "One directive.", input: byId("directive") },
  {
    name: "memory_operation_list", tier: "read",
    description: "Async operations (retain, refresh, consolidate), newest first.",
    input: z.strictObject({ status: z.enum(OPERATION_STATUSES).optional(), kind: z.enum(OPERATION_KINDS).optional(), limit: z.int().min(1).max(200).default(50) }),
  },
  {
    name: "memory_operation_get", tier: "read",
    description: "One async operation's status: the poll target for memory_add's operation_id, memory_mental_model_refresh and memory_bank_consolidate. A completed retain reports facts_extracted (nothing_learned and a notice on zero yield; document_fact_count and \"content was already known\" for content already extracted).",
    input: byId("operation"),
  },
  { name: "memory_tags_list", tier: "read", description: "Tags in use, with usage counts.", input: z.strictObject({ dataset: Datasets.optional() }) },
  { name: "memory_bank_stats", tier: "read", description: "Node, link, observation, document and operation counts for the bank, and units per dataset you can see.", input: z.strictObject({ dataset: Datasets.optional() }) },
  // ── autonomous write ────────────────────────────────────────────────
  {
    name: "memory_add", tier: "write",
    description: "Remember one item → {id, timestamp} (+ operation_id when extraction runs async: always with document_id, which upserts one logical document). `source` is set from your identity; do not pass it.",
    input: z.strictObject({
      text: z.string().max(200_000).refine((t) => t.trim().length > 0, "text must not be empty"),
      dataset: Dataset.optional(), tags: Tags.optional(), metadata: z.record(z.string(), z.unknown()).optional(),
      document_id: DocumentId.optional(), context: z.string().max(2000).optional(),
    }),
  },
  {
    name: "memory_curate", tier: "write",
    description: "Correct a memory unit without deleting it: edit text/context/occurred range/fact_type/entities, or soft-invalidate it with state `invalid` (and restore with `active`). `id` alone is a schema error.",
    input: z.strictObject({
      id: Id, text: z.string().trim().min(1).max(200_000).optional(), context: z.string().max(2000).nullable().optional(),
      occurred_start: Iso.nullable().optional(), occurred_end: Iso.nullable().optional(), fact_type: z.enum(FACT_TYPES).optional(),
      entities: z.array(z.string().min(1).max(128)).max(64).optional(), state: z.enum(UNIT_STATES).optional(),
    }),
    needsOneOf: CURATE_FIELDS,
    check: (a) => typeof a.occurred_start === "string" && typeof a.occurred_end === "string" && Date.parse(a.occurred_start) > Date.parse(a.occurred_end)
      ? { path: "occurred_end", message: "occurred_end is before occurred_start" } : undefined,
  },
  {
    name: "memory_mental_model_create", tier: "write",
    description: "Create a mental model → {mental_model_id, operation_id}; its content is generated by an async refresh.",
    input: z.strictObject({ name: z.string().min(1).max(128), source_query: Query, max_tokens: MaxTokens.optional(), tags: Tags.optional(), trigger: Trigger.optional() }),
  },
  {
    name: "memory_mental_model_update", tier: "write",
    description: "Update a mental model's name, source_query, max_tokens, tags or trigger.",
    input: z.strictObject({ id: Id, name: z.string().min(1).max(128).optional(), source_query: Query.optional(), max_tokens: MaxTokens.optional(), tags: Tags.optional(), trigger: Trigger.optional() }),
    needsOneOf: MM_FIELDS,
  },
  { name: "memory_mental_model_refresh", tier: "write", description: "Refresh a mental model now (async) → {operation_id, ...}.", input: byId("mental model") },
  {
    name: "memory_directive_create", tier: "write",
    description: "Create a directive (a standing instruction).",
    input: z.strictObject({ name: z.string().min(1).max(128), content: z.string().trim().min(1).max(8000), priority: z.int().min(-1000).max(1000).optional(), is_active: z.boolean().optional(), tags: Tags.optional() }),
  },
  {
    name: "memory_directive_update", tier: "write",
    description: "Update a directive's name, content, priority, is_active or tags.",
    input: z.strictObject({ id: Id, name: z.string().min(1).max(128).optional(), content: z.string().trim().min(1).max(8000).optional(), priority: z.int().min(-1000).max(1000).optional(), is_active: z.boolean().optional(), tags: Tags.optional() }),
    needsOneOf: DIRECTIVE_FIELDS,
  },
  { name: "memory_operation_cancel", tier: "write", description: "Abort a pending or processing operation.", input: byId("operation") },
  { name: "memory_operation_retry", tier: "write", description: "Re-queue a failed (or cancelled) operation.", input: byId("operation") },
  {
    name: "memory_bank_consolidate", tier: "write",
    description: "Run consolidation now: duplicate facts merged (→ deduplicated) and mental models that ask for it refreshed → {operation_id, deduplicated}.",
    input: z.strictObject({ dataset: Datasets.optional() }),
  },
  {
    name: "memory_delete", tier: "write",
    description: "Delete memory units (or documents, with their facts) by id → {deleted}. One id in your own dataset runs at once; more than one id, a list of datasets or another caller's dataset waits for a person's approval → {status: \"pending_approval\", approval_id, detail}.",
    input: z.strictObject({ ids: z.array(Id).min(1).max(1000), dataset: Datasets.optional() }),
  },
  // ── gated ───────────────────────────────────────────────────────────
  { name: "memory_mental_model_delete", tier: "gated", description: "Delete a mental model (destructive: waits for a person's approval).", input: byId("mental model") },
  { name: "memory_directive_delete", tier: "gated", description: "Delete a directive (destructive: waits for a person's approval).", input: byId("directive") },
];

export const MEMORY_TOOL_BY_NAME: ReadonlyMap<string, MemoryToolDef> = new Map(MEMORY_TOOLS.map((t) => [t.name, t]));

/** The standalone mount's own list of tools it always gates, checked before the policy (seed 001: "belt and braces"). */
export const HARD_GATED_MEMORY_TOOLS: ReadonlySet<string> = new Set(["memory_mental_model_delete", "memory_directive_delete"]);

/** The JSON Schema `tools/list` advertises for a tool: exactly the schema calls are validated with. */
export function advertisedSchema(tool: MemoryToolDef): Record<string, unknown> {
  const { $schema: _drop, ...schema } = z.toJSONSchema(tool.input, { target: "draft-7", io: "input" }) as Record<string, unknown>;
  return schema;
}

/**
 * Writes that only add: a new item, mental model or directive, a failed
 * operation queued again. Every other write may change or remove what is
 * there (a curation edits or invalidates a fact, an update or a refresh
 * rewrites a mental model or a directive, consolidation merges duplicates
 * away, a cancel aborts work, a delete deletes), which MCP clients read from
 * `destructiveHint: true`, as on hal0-admin's own tools.
 */
const ADDITIVE_MEMORY_WRITES: ReadonlySet<string> = new Set(["memory_add", "memory_mental_model_create", "memory_directive_create", "memory_operation_retry"]);

/** MCP annotations: reads are read-only; a write is destructive unless it only adds; nothing reaches outside the box's memory. */
export function memoryAnnotations(tool: MemoryToolDef): { readOnlyHint: boolean; destructiveHint?: boolean; openWorldHint: boolean } {
  if (tool.tier === "read") return { readOnlyHint: true, openWorldHint: false };
  return { readOnlyHint: false, destructiveHint: !ADDITIVE_MEMORY_WRITES.has(tool.name), openWorldHint: false };
}
