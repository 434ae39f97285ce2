import { z } from "zod";
import { movedFiles, type ChangeSet } from "../../compiler/changeset.js";
import { ResourceId } from "../../schema/index.js";
import { ApiError } from "../errors.js";
import { defineRoute, type Caller } from "../route.js";
import { proposalEffects, type Dispatcher } from "../dispatch.js";
import type { Proposal } from "../box.js";
import { planReadBy, type PlanEffect, type PlanRecord } from "../plans.js";
import { queryInt } from "../query.js";

const FileEdit = z.discriminatedUnion("op", [
  z.strictObject({ file: z.string().min(1), op: z.literal("set"), path: z.array(z.string().min(1)).min(1), value: z.unknown() }),
  z.strictObject({ file: z.string().min(1), op: z.literal("put"), doc: z.record(z.string(), z.unknown()) }),
  z.strictObject({ file: z.string().min(1), op: z.literal("text"), text: z.string() }),
  z.strictObject({ file: z.string().min(1), op: z.literal("delete") }),
  z.strictObject({ file: z.string().min(1), op: z.literal("rename"), to: z.string().min(1) }),
]);
export const ChangeSetBody = z.strictObject({
  edits: z.array(FileEdit).min(1).max(500),
  summary: z.string().max(500).optional(),
  force: z.boolean().optional(),
  /** The stack-apply builder's mark (compiler/changeset.ts): kept with the plan, so applying it by id moves the stack pointer as the route does. */
  stack: z.strictObject({ slug: ResourceId }).optional(),
});

const Id = z.strictObject({ id: z.string().min(1).max(64) });
const Paging = z.strictObject({ limit: queryInt(1, 500, 50), offset: queryInt(0, Number.MAX_SAFE_INTEGER, 0) });

/**
 * Plans over REST: a ChangeSet in, diagnostics and a plan out, nothing
 * written (`POST /api/plans`); applying one later re-checks the files it
 * edits and refuses it when they moved (`plan.stale`, naming them).
 */
export const planRoutes = [
  defineRoute({
    method: "POST", path: "/api/plans", kind: "action", status: 201, body: ChangeSetBody, tools: ["plan_propose"],
    summary: "Plan a change set: diagnostics and the plan; nothing is written",
    handle: async ({ body, box, services, caller, base }) => {
      const changes = body as ChangeSet;
      const snapshot = await box.snapshot();
      try {
        const proposal = await box.propose(changes, base);
        // Every file it names, not only those it changes: an edit that sets what a file already holds would,
        // once the file moved, change it at apply, a change the plan never showed. Hashed as planned.
        const baseFiles = pick(proposal.snapshot.files, [...proposal.applied.files.map((f) => f.file), ...namedFiles(changes)]);
        const record = services.plans.save({ actor: caller, changes, proposal, revision: proposal.snapshot.revision, baseFiles, diagnostics: proposal.warnings, effects: effectsOf(proposal) });
        return { id: record.id, valid: true, revision: proposal.snapshot.revision, files: proposal.applied.files.map((f) => f.file), diagnostics: proposal.warnings, plan: proposal.plan };
      } catch (err) {
        if (!(err instanceof ApiError) || err.code !== "config.invalid") throw err;
        const diagnostics = (err.details.diagnostics ?? []) as never[];
        const record = services.plans.save({ actor: caller, changes, revision: snapshot.revision, baseFiles: pick(snapshot.files, namedFiles(changes)), diagnostics });
        return { id: record.id, valid: false, revision: snapshot.revision, files: [], diagnostics, plan: null };
      }
    },
  }),
  defineRoute({
    method: "GET", path: "/api/plans", kind: "read", query: Paging, listKey: "plans", tools: ["plan_list"],
    summary: "Saved plans, newest first; their values only to an operator and to whoever proposed them",
    handle: ({ query, services, caller }) => {
      const { items, total } = services.plans.list(query.limit, query.offset);
      return { plans: items.map((r) => planReadBy(r, caller)).map(({ plan, changes, ...rest }) => ({ ...rest, has_changes: plan?.has_changes ?? false, summary_counts: plan?.summary ?? null, edits: changes.edits.length })), total };
    },
  }),
  defineRoute({
    method: "GET", path: "/api/plans/{id}", kind: "read", params: Id, tools: ["plan_show"],
    summary: "One saved plan with its change set and diagnostics; its values only to an operator and to whoever proposed it",
    handle: ({ params, services, caller }) => planReadBy(services.plans.get(params.id) ?? notFound(params.id), caller),
  }),
  defineRoute({
    // A write like any other: the saved change set goes through the one pipeline (compile, plan, the change's own
    // checks, the agent's verdict by effect, commit, the commit observers, the audit row), as the same edit made
    // through its route does. Refused when a file it edits moved since it was made (plan.stale).
    method: "POST", path: "/api/plans/{id}/apply", kind: "write", params: Id, tools: ["plan_submit"],
    summary: "Commit a saved plan's change set; refused when a file it edits moved since (plan.stale)",
    handle: ({ params, services, caller }) => {
      const record = checkApplicable(services, params.id, caller);
      return {
        changes: record.changes,
        // Judged on the very tree the change is planned from, not one read before it: a hand edit landing between two
        // reads, to a file the plan names but leaves as it was, would otherwise commit a change the plan never showed.
        stillHolds: (proposal) => {
          refuseMoved(services, record, proposal.snapshot.files);
          refuseDoesOtherwise(services, record, proposal);
        },
        after: async () => services.plans.markApplied(record),
        // Applied as the plan now reads, also when the tree already held its change (files empty: nothing was written).
        reply: (o) => ({ id: params.id, applied: true, revision: o.revision, files: o.files, plan: o.plan }),
      };
    },
  }),
];

/**
 * A saved plan that can still apply: it exists, is valid and was not applied (that no file it names moved: refuseMoved).
 * An invalid plan's refusal carries its diagnostics as `caller` reads the plan (their words masked but for an operator and its proposer).
 */
function checkApplicable(services: Dispatcher, id: string, caller: Pick<Caller, "kind" | "agent">): PlanRecord {
  const record = services.plans.get(id) ?? notFound(id);
  if (!record.valid) throw new ApiError("config.invalid", `plan ${id} was made from an invalid change set and cannot be applied`, { diagnostics: planReadBy(record, caller).diagnostics });
  refuseApplied(record);
  return record;
}

function refuseApplied(record: PlanRecord): void {
  if (record.state === "applied") throw new ApiError("plan.stale", `plan ${record.id} was already applied at ${record.applied_at}`, { id: record.id, moved: [] });
}

/**
 * plan.stale (and the plan marked so) when a file the plan names is not as it was when the plan was made.
 * Its files moved because another apply of the same plan committed it meanwhile: refused as already applied, and it stays so.
 */
function refuseMoved(services: Dispatcher, record: PlanRecord, files: Readonly<Record<string, string>>): void {
  const moved = movedFiles(record.base_files, files, Object.keys(record.base_files));
  if (moved.length === 0) return;
  refuseApplied(services.plans.get(record.id) ?? notFound(record.id));
  services.plans.mark(record.id, "stale", `moved: ${moved.join(", ")}`);
  throw new ApiError("plan.stale", `plan ${record.id} is stale; these files changed since it was made: ${moved.join(", ")}`, { id: record.id, moved });
}


/** What a proposal's change does, one entry per effect (compiler/effects.ts), in order. */
function effectsOf(proposal: Proposal): PlanEffect[] {
  return proposalEffects(proposal).map((e) => ({ where: e.where, line: e.line }));
}

/**
 * plan.stale (and the plan marked so) when its change would now do otherwise than when it was made, though no file it
 * names moved: one it reads did (the profile it switches a slot to got other flags, a model it assigns another file), so
 * committing it would run what the plan never showed. Names each resource whose effects differ, and says what it would do now.
 */
function refuseDoesOtherwise(services: Dispatcher, record: PlanRecord, proposal: Proposal): void {
  const then = services.plans.effectsOf(record.id);
  if (then === undefined) return; // saved before hal0 kept what a plan does
  const now = effectsOf(proposal);
  const key = (e: PlanEffect) => `${e.where}\u0000${e.line}`;
  const was = new Set(then.map(key));
  const is = new Set(now.map(key));
  const differ = [...then.filter((e) => !is.has(key(e))), ...now.filter((e) => !was.has(key(e)))];
  if (differ.length === 0) return;
  const moved = [...new Set(differ.map((e) => e.where))].sort();
  refuseApplied(services.plans.get(record.id) ?? notFound(record.id));
  services.plans.mark(record.id, "stale", `does otherwise: ${moved.join(", ")}`);
  const lines = now.filter((e) => !was.has(key(e))).map((e) => e.line);
  throw new ApiError("plan.stale", `plan ${record.id} is stale; what it does changed since it was made (a file it reads moved): ${moved.join(", ")}${lines.length > 0 ? `; it would now: ${lines.join("; ")}` : ""}`, { id: record.id, moved, effects: lines.slice(0, 20) });
}

/** The files a change set's edits name: each edit's file, and a rename's new name. */
function namedFiles(changes: ChangeSet): string[] {
  return changes.edits.flatMap((e) => (e.op === "rename" ? [e.file, e.to] : [e.file]));
}

function pick(files: Readonly<Record<string, string>>, names: readonly string[]): Record<string, string> {
  return Object.fromEntries([...new Set(names)].sort().map((f) => [f, files[f] ?? "absent"]));
}

function notFound(id: string): never {
  throw new ApiError("plan.not_found", `no plan ${id}`, { id });
}
