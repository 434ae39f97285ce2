import type { AppliedChangeSet, ChangeSet } from "./changeset.js";
import type { Model } from "./model.js";

/** A change the pipeline refuses whoever sends it and however (a route, a plan applied by id, an approved request). */
export interface ChangeRefusal {
  readonly code: "slot.pinned";
  readonly message: string;
  readonly details: Record<string, unknown>;
}

/**
 * The rules that used to live in routes, as checks on the compiled change
 * (pure): a pinned slot is not stopped — its file deleted, or `enabled`
 * turned off — unless the change set says `force`. A rename is a move, not a
 * stop: the slot runs on under its new name.
 */
export function checkChange(before: Model | undefined, after: Model | undefined, applied: AppliedChangeSet, changes: ChangeSet): ChangeRefusal[] {
  if (!before || changes.force) return [];
  const renamedFrom = new Set(changes.edits.flatMap((e) => (e.op === "rename" ? [e.file] : [])));
  const out: ChangeRefusal[] = [];
  for (const f of applied.files) {
    const name = /^slots\/([^/]+)\.toml$/.exec(f.file)?.[1];
    if (name === undefined) continue;
    const was = before.slots[name];
    if (!was?.pinned || renamedFrom.has(f.file)) continue;
    // Without the compiled tree after (checked first, before compiling it), only deletions can be judged.
    const now = after?.slots[name];
    if (f.after === null) out.push({ code: "slot.pinned", message: `slot \`${name}\` is pinned; delete it with ?force=true`, details: { name } });
    else if (was.enabled && now && !now.enabled && now.pinned) out.push({ code: "slot.pinned", message: `slot \`${name}\` is pinned; unload it with ?force=true`, details: { name } });
    else if (was.enabled && now && !now.enabled) out.push({ code: "slot.pinned", message: `slot \`${name}\` is pinned; unpinning and disabling it at once needs ?force=true`, details: { name } });
  }
  return out;
}
