import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { z } from "zod";
import { projectStack } from "../compiler/edits/stack.js";
import { hashOf, type Model } from "../compiler/index.js";
import { writeFileAtomic } from "./atomic.js";
import { ensureStateFolder } from "./state-folder.js";

/**
 * Which stack was applied last, and whether the live slot files still hold
 * what that apply projected onto them. The pointer lives in the state folder
 * (`stacks-state.json`), written only after a committed, non-dry-run apply.
 *
 * - `none`: no pointer, or one that does not parse.
 * - `clean`: the hash of the live view equals the pointer's `content_hash`.
 * - `modified`: a slot file was edited since (model, profile, tune, enabled of
 *   a stack slot; for `replace`, a slot outside the stack enabled), or the
 *   active stack was deleted, or edited so that applying it again would change
 *   a slot file (which the reason says: the pointer keeps a hash of what the
 *   stack said when applied, `stack_hash`).
 */

export const POINTER_FILE = "stacks-state.json";

export type Drift = "none" | "clean" | "modified";

const Pointer = z.object({
  active_slug: z.string().min(1),
  content_hash: z.string().min(1),
  /** What the stack said when applied (its mode and entries): absent in a pointer an older hal0 wrote. */
  stack_hash: z.string().min(1).optional(),
  applied_at: z.string().min(1),
});
export type StackPointer = z.infer<typeof Pointer>;

type CompiledStack = Model["stacks"][string];

/**
 * What an apply of `stack` leaves on the slots, read from a compiled tree:
 * per stack slot its model, profile, sparse tune and enabled flag (absent
 * slot = null); for `replace`, the enabled slots outside the stack (pinned
 * ones the apply kept). A hand edit of any of these moves the hash.
 */
export function stackView(stack: CompiledStack, model: Model): Record<string, unknown> {
  const named = new Set(stack.slot.map((e) => e.slot));
  const slots: Record<string, unknown> = {};
  for (const entry of stack.slot) {
    const s = model.slots[entry.slot];
    slots[entry.slot] = s ? { model: s.model ?? null, profile: s.profile, tune: s.tune, enabled: s.enabled } : null;
  }
  const othersEnabled = stack.mode === "replace"
    ? Object.values(model.slots).filter((s) => !named.has(s.name) && s.enabled).map((s) => s.name).sort()
    : [];
  return { mode: stack.mode, slots, others_enabled: othersEnabled };
}

export function stackContentHash(stack: CompiledStack, model: Model): string {
  return hashOf(stackView(stack, model));
}

/** What a stack says about the slots (its mode and entries), not its name or description: whether it was edited since it was applied. */
export function stackHash(stack: CompiledStack): string {
  return hashOf({ mode: stack.mode, slot: stack.slot });
}

export async function readPointer(stateDir: string): Promise<StackPointer | undefined> {
  const text = await readFile(join(stateDir, POINTER_FILE), "utf8").catch(() => undefined);
  if (text === undefined) return undefined;
  try {
    const r = Pointer.safeParse(JSON.parse(text));
    return r.success ? r.data : undefined;
  } catch {
    return undefined;
  }
}

export async function writePointer(stateDir: string, pointer: StackPointer): Promise<void> {
  await ensureStateFolder(stateDir);
  await writeFileAtomic(join(stateDir, POINTER_FILE), `${JSON.stringify(pointer, null, 2)}\n`);
}

export interface DriftReport {
  readonly active: string | null;
  readonly drift: Drift;
  readonly applied_at?: string;
  /** Why `modified`, for a person. */
  readonly reason?: string;
}

export function driftOf(pointer: StackPointer | undefined, model: Model): DriftReport {
  if (!pointer) return { active: null, drift: "none" };
  const stack = model.stacks[pointer.active_slug];
  const base = { active: pointer.active_slug, applied_at: pointer.applied_at };
  if (!stack) return { ...base, drift: "modified", reason: `stack ${pointer.active_slug} was deleted after it was applied` };
  const edited = { ...base, drift: "modified" as const, reason: `stack ${pointer.active_slug} was edited after it was applied: applying it again would change slot files` };
  const holds = projectStack(stack.slug, stack, model).edits.length === 0;
  // A stack edited since (another slot named, another mode) is judged as it is now: the box holds it only if applying it
  // again changes nothing. Its view of the slots is another, so comparing it with the pointer's would blame the slot files.
  if (pointer.stack_hash !== undefined && stackHash(stack) !== pointer.stack_hash) return holds ? { ...base, drift: "clean" } : edited;
  if (stackContentHash(stack, model) !== pointer.content_hash) return { ...base, drift: "modified", reason: `slot files changed since stack ${pointer.active_slug} was applied` };
  // The slots are as the apply left them, but the stack file may have moved on since: the box holds it only if applying it again changes nothing.
  return holds ? { ...base, drift: "clean" } : edited;
}

/** The drift of the box now: the pointer against the compiled tree. */
export async function currentDrift(stateDir: string, model: Model): Promise<DriftReport> {
  return driftOf(await readPointer(stateDir), model);
}
