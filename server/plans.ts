import { randomBytes } from "node:crypto";
import type { ChangeSet } from "../compiler/changeset.js";
import type { Diagnostic, Plan } from "../schema/index.js";
import type { Proposal } from "./box.js";
import type { Db } from "./db.js";
import { MASK, maskAll, readsWhole } from "./redact.js";
import type { Caller } from "./route.js";

export interface PlanRecord {
  readonly id: string;
  readonly created_at: string;
  readonly actor: string;
  /** The kind of identity that proposed it; null for a plan saved before hal0 recorded it. */
  readonly actor_kind: Caller["kind"] | null;
  readonly summary: string;
  readonly changes: ChangeSet;
  readonly base_revision: string;
  /** Hash per touched file as it was when planned ("absent" for a file the change set creates). */
  readonly base_files: Record<string, string>;
  readonly plan: Plan | null;
  readonly diagnostics: readonly Diagnostic[];
  readonly valid: boolean;
  readonly state: "proposed" | "applied" | "stale";
  readonly applied_at: string | null;
  readonly stale_reason: string | null;
}

/** One thing a saved plan's change does: where (a file, `slot.<name>`) and in words (compiler/effects.ts). */
export interface PlanEffect {
  readonly where: string;
  readonly line: string;
}

/**
 * Unapplied plans (proposed or stale, valid or not) one caller keeps: its
 * 51st drops its oldest. A refusal instead would shut a caller proposing in a
 * loop out of planning for good, since nothing else ever removes a plan.
 */
export const UNAPPLIED_PLANS_PER_CALLER = 50;

/** The route that applies a saved plan: a request of it not yet ended keeps the plan it names. */
const APPLY_ROUTE = "POST /api/plans/{id}/apply";

/** Saved proposals (`POST /api/plans`): a change set, the plan made from it, and what it was based on. */
export class PlanStore {
  constructor(private readonly db: Db, private readonly now: () => number = Date.now) {}

  /**
   * Saves a valid proposal, or an invalid change set with its diagnostics
   * (plan null). The caller's unapplied plans beyond its newest
   * UNAPPLIED_PLANS_PER_CALLER are deleted in the same step, so a caller
   * proposing in a loop cannot grow the database without bound; applied plans
   * (each one a commit) and a plan a request waiting for a person or running
   * names (its apply, queued) are kept. "Oldest" is the order they were saved
   * in (rowid), not their `created_at`: after the clock was set back, the plan
   * just saved bears the earliest time of all, and would be the one deleted.
   */
  save(input: { actor: Pick<Caller, "kind" | "agent">; changes: ChangeSet; proposal?: Proposal; revision: string; baseFiles: Record<string, string>; diagnostics: readonly Diagnostic[]; effects?: readonly PlanEffect[] }): PlanRecord {
    const id = `pln_${randomBytes(8).toString("hex")}`;
    const plan = input.proposal?.plan ?? null;
    this.db.transaction(() => {
      this.db.prepare(`INSERT INTO plans (id, created_at, actor, actor_kind, summary, changes, base_revision, base_files, plan, diagnostics, valid, state, effects)
                       VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 'proposed', ?)`)
        .run(id, new Date(this.now()).toISOString(), input.actor.agent, input.actor.kind, input.changes.summary ?? "", JSON.stringify(input.changes), input.revision,
          JSON.stringify(input.baseFiles), JSON.stringify(plan), JSON.stringify(input.diagnostics), plan ? 1 : 0, input.effects === undefined ? null : JSON.stringify(input.effects));
      this.db.prepare(`DELETE FROM plans WHERE id IN (
                         SELECT id FROM plans WHERE actor = ? AND actor_kind = ? AND state != 'applied'
                           AND id NOT IN (SELECT json_extract(args, '$.params.id') FROM approvals WHERE route = ? AND state IN ('pending', 'approved', 'executing'))
                         ORDER BY rowid DESC LIMIT -1 OFFSET ?)`)
        .run(input.actor.agent, input.actor.kind, APPLY_ROUTE, UNAPPLIED_PLANS_PER_CALLER);
    })();
    return this.get(id)!;
  }

  /** What the plan's change did as it was planned (none for a plan saved before hal0 kept it, or an invalid one). */
  effectsOf(id: string): PlanEffect[] | undefined {
    const row = this.db.prepare("SELECT effects FROM plans WHERE id = ?").get(id) as { effects: string | null } | undefined;
    return row?.effects == null ? undefined : (JSON.parse(row.effects) as PlanEffect[]);
  }

  get(id: string): PlanRecord | undefined {
    const row = this.db.prepare("SELECT * FROM plans WHERE id = ?").get(id) as Row | undefined;
    return row ? fromRow(row) : undefined;
  }

  list(limit: number, offset: number): { items: PlanRecord[]; total: number } {
    const total = (this.db.prepare("SELECT count(*) AS n FROM plans").get() as { n: number }).n;
    const rows = this.db.prepare("SELECT * FROM plans ORDER BY created_at DESC, id LIMIT ? OFFSET ?").all(limit, offset) as Row[];
    return { items: rows.map(fromRow), total };
  }

  /**
   * Records that `record` was applied (committed). A plan its proposer's
   * newer plans dropped while it was being applied (UNAPPLIED_PLANS_PER_CALLER)
   * is saved again, as applied: applied plans are the history of commits.
   */
  markApplied(record: PlanRecord): void {
    const at = new Date(this.now()).toISOString();
    this.db.transaction(() => {
      this.mark(record.id, "applied");
      if (this.get(record.id) !== undefined) return;
      this.db.prepare(`INSERT INTO plans (id, created_at, actor, actor_kind, summary, changes, base_revision, base_files, plan, diagnostics, valid, state, applied_at, stale_reason)
                       VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 'applied', ?, NULL)`)
        .run(record.id, record.created_at, record.actor, record.actor_kind, record.summary, JSON.stringify(record.changes), record.base_revision,
          JSON.stringify(record.base_files), JSON.stringify(record.plan), JSON.stringify(record.diagnostics), record.valid ? 1 : 0, at);
    })();
  }

  /**
   * Records an apply, or that the plan is stale. An applied plan stays
   * applied: an apply that lost a race with another of the same plan (which
   * committed it, so its files moved) marks nothing.
   */
  mark(id: string, state: "applied" | "stale", reason?: string): void {
    this.db.prepare("UPDATE plans SET state = ?, applied_at = ?, stale_reason = ? WHERE id = ? AND state != 'applied'")
      .run(state, state === "applied" ? new Date(this.now()).toISOString() : null, reason ?? null, id);
  }
}

/**
 * A saved plan as `reader` sees it: an operator whole, and so does the
 * identity that proposed it; anyone else (another agent, an anonymous
 * caller) sees what it is (its id, who proposed it, summary, state, the
 * files and key paths its edits touch, each change's address, action,
 * reason, changed paths and apply class, the counts) with every value
 * masked: what an edit sets (a `text` edit's whole TOML), each change's
 * before and after (keys kept), and the words of its diagnostics and
 * warnings, which quote values. The approval queue and the audit log read
 * the same way (server/routes/approvals.ts asReadBy, server/audit.ts).
 */
export function planReadBy(record: PlanRecord, reader: Pick<Caller, "kind" | "agent">): PlanRecord {
  if (readsWhole(reader, { kind: record.actor_kind, agent: record.actor })) return record;
  const plan = record.plan === null ? null : {
    ...record.plan,
    changes: record.plan.changes.map((c) => ({ ...c, before: maskAll(c.before), after: maskAll(c.after) })),
    warnings: record.plan.warnings.map((w) => ({ ...w, message: MASK })),
  } as Plan;
  return {
    ...record,
    changes: { ...record.changes, edits: record.changes.edits.map(maskEdit) },
    plan,
    diagnostics: record.diagnostics.map((d) => ({ ...d, summary: MASK, detail: MASK, related: d.related.map((r) => ({ ...r, message: MASK })) })),
  };
}

/** An edit's file, op and key path (a rename's new name) kept; what it writes masked, keys kept. */
function maskEdit(e: ChangeSet["edits"][number]): ChangeSet["edits"][number] {
  if (e.op === "set") return { ...e, value: maskAll(e.value) };
  if (e.op === "put") return { ...e, doc: maskAll(e.doc) as Record<string, unknown> };
  if (e.op === "text") return { ...e, text: MASK };
  return e;
}

type Row = Omit<PlanRecord, "changes" | "base_files" | "plan" | "diagnostics" | "valid"> & { changes: string; base_files: string; plan: string; diagnostics: string; valid: number };

function fromRow(row: Row): PlanRecord {
  const { effects: _e, ...r } = row as Row & { effects?: string | null };
  return { ...r, changes: JSON.parse(r.changes), base_files: JSON.parse(r.base_files), plan: JSON.parse(r.plan), diagnostics: JSON.parse(r.diagnostics), valid: r.valid === 1 };
}
