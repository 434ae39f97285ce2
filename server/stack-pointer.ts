import type { ChangeSet } from "../compiler/changeset.js";
import { holdsStack } from "../compiler/edits/stack.js";
import type { Model, SourceTree } from "../compiler/index.js";
import { stackContentHash, stackHash, writePointer, type StackPointer } from "../reconciler/stack-drift.js";

/**
 * The commit observer that keeps the stack pointer (`<state>/stacks-state.json`,
 * reconciler/stack-drift.ts): a change set that says it applies stack `<slug>`
 * (`ChangeSet.stack`, set by the stack-apply builder and saved with a plan)
 * moves the pointer to that stack when the committed tree holds exactly its
 * projection — so the route and a plan of its change set applied by id set
 * the same pointer, and a plan whose stack file moved since sets none. A
 * change without the mark (a slot edit, a hand edit through a plan) never
 * moves it; drift reports what those do. Returns the pointer written, the
 * commit's `observed.stack_pointer`.
 */
export function stackPointerObserver(stateDir: string, now: () => number): (proposal: { changes: ChangeSet; applied: { tree: SourceTree }; model: Model }) => Promise<StackPointer | undefined> {
  return async ({ changes, applied, model }) => {
    const slug = changes.stack?.slug;
    if (slug === undefined || !holdsStack(slug, model, applied.tree)) return undefined;
    const stack = model.stacks[slug]!;
    const pointer: StackPointer = { active_slug: slug, content_hash: stackContentHash(stack, model), stack_hash: stackHash(stack), applied_at: new Date(now()).toISOString() };
    await writePointer(stateDir, pointer);
    return pointer;
  };
}
