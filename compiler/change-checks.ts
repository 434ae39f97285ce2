import type { AppliedChangeSet, ChangeSet } from "./changeset.js";
import { slotOfFile } from "../schema/index.js";
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
 * stop: the slot runs on under its new name, and is judged there (moved and
 * then deleted, disabled, or out of slots/ is a stop all the same).
 */
export function checkChange(before: Model | undefined, after: Model | undefined, applied: AppliedChangeSet, changes: ChangeSet): ChangeRefusal[] {
  if (!before || changes.force) return [];
  const moves = movesOf(changes);
  const out: ChangeRefusal[] = [];
  for (const f of applied.files) {
    const name = slotOfFile(f.file);
    if (name === undefined) continue;
    const was = before.slots[name];
    if (!was?.pinned) continue;
    const to = moves.get(f.file);
    const end = to === undefined ? name : slotOfFile(to);
    const gone = to === undefined ? f.after === null : end === undefined || !applied.tree.files.has(to);
    // Without the compiled tree after (checked first, before compiling it), only deletions can be judged.
    const now = end === undefined ? undefined : after?.slots[end];
    if (gone) out.push({ code: "slot.pinned", message: `slot \`${name}\` is pinned; delete it with ?force=true`, details: { name } });
    else if (was.enabled && now && !now.enabled && now.pinned) out.push({ code: "slot.pinned", message: `slot \`${name}\` is pinned; unload it with ?force=true`, details: { name } });
    else if (was.enabled && now && !now.enabled) out.push({ code: "slot.pinned", message: `slot \`${name}\` is pinned; unpinning and disabling it at once needs ?force=true`, details: { name } });
  }
  return out;
}


/** Where each renamed file ends, renames followed in order (`a → b`, then `b → c`: `a → c`). */
function movesOf(changes: ChangeSet): Map<string, string> {
  const moves = new Map<string, string>();
  for (const edit of changes.edits) {
    if (edit.op !== "rename") continue;
    for (const [from, to] of moves) if (to === edit.file) moves.set(from, edit.to);
    if (!moves.has(edit.file)) moves.set(edit.file, edit.to);
  }
  return moves;
}
