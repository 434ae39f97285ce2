import { closest } from "../compiler/suggest.js";
import type { Model, ResolvedSlot } from "../compiler/index.js";
import { healthOf, httpStatus } from "../reconciler/drivers/proc.js";
import type { ObservedSlot, SlotHealth, SlotOutcome } from "../reconciler/index.js";
import type { SlotStep } from "../reconciler/state.js";
import type { SlotDriver } from "../reconciler/drivers/driver.js";
import { treeFileText, type BoxService, type Liveness, type Snapshot } from "./box.js";
import { ApiError } from "./errors.js";
import { freezeReply } from "./frozen-reply.js";
import { slotIds } from "./slot-ids.js";
import { slotReach } from "./slot-reach.js";

/** running: our runner is alive; stopped: enabled but not running; disabled: `enabled = false` and not running. */
export type SlotStatus = "running" | "stopped" | "disabled";

/** One line of `GET /api/slots`: what the compiled slot says plus whether it runs. */
export interface RosterEntry {
  readonly name: string;
  readonly id: string;
  readonly profile: string;
  readonly model: string | null;
  readonly type: ResolvedSlot["type"];
  readonly port: number;
  readonly device: ResolvedSlot["device"];
  readonly enabled: boolean;
  readonly pinned: boolean;
  readonly priority: number;
  readonly status: SlotStatus;
  /** Why the last step hal0 took on an enabled slot failed (`slot.port_in_use`, …), until a step on it succeeds; else null. */
  readonly last_error: RosterError | null;
  readonly tune_effective: ResolvedSlot["tune_effective"];
  readonly tune_unavailable: ResolvedSlot["tune_unavailable"];
}

/** A failed step in the roster: its code, the first line of its message, when. */
export interface RosterError {
  readonly code: string;
  readonly message: string;
  readonly at: string;
}

/** The roster's word on the last outcome: only a failure, and only its first line (slot_status has it whole). */
export function rosterError(outcome: SlotOutcome | undefined): RosterError | null {
  if (outcome === undefined || outcome.ok) return null;
  const line = (outcome.error ?? "").split("\n", 1)[0]!;
  return { code: outcome.code ?? "slot.failed", message: line.length > 200 ? `${line.slice(0, 199)}…` : line, at: outcome.at };
}

const HEALTH_TIMEOUT_MS = 1000;

/** The slot named `name`, or 404 `slot.not_found` with the known names and a did-you-mean. */
export function findSlot(model: Model, name: string): ResolvedSlot {
  const slot = Object.hasOwn(model.slots, name) ? model.slots[name] : undefined;
  if (slot) return slot;
  throw slotNotFound(name, Object.keys(model.slots));
}

/**
 * The text of slot `name`'s file in `snap`'s tree; 404 `slot.not_found` (the
 * known names) only when the tree is known to have no such file. One hal0
 * could not read — the file, the slots folder or the config folder
 * (`config.read_error`) — is unknown, not absent: 422 `config.invalid`
 * naming the read error, as any write on a tree with it is refused.
 */
export function slotFileText(snap: Snapshot, name: string): string {
  const text = treeFileText(snap, `slots/${name}.toml`);
  if (text !== undefined) return text;
  throw slotNotFound(name, [...snap.tree.files.keys()].filter((f) => f.startsWith("slots/")).map((f) => f.slice("slots/".length, -".toml".length)));
}

export function slotNotFound(name: string, known: readonly string[]): ApiError {
  const hint = closest(name, known);
  return new ApiError("slot.not_found", `no slot \`${name}\`${hint ? `; did you mean \`${hint}\`?` : ""}`, {
    name, known: [...known].sort(), ...(hint ? { did_you_mean: hint } : {}),
  });
}

/**
 * What the runtime has, by slot name: liveness only, never `/health` probes
 * and never port-holder scans (the roster is read often and must stay cheap).
 * Observed at most READ_WINDOW_MS before the read (BoxService.liveness).
 */
export function observeLiveness(box: BoxService, model: Model): Promise<Liveness> {
  return box.liveness(model);
}

export function statusOf(slot: ResolvedSlot, seen: ObservedSlot | undefined): SlotStatus {
  if (seen?.running) return "running";
  return slot.enabled ? "stopped" : "disabled";
}

export function rosterEntry(slot: ResolvedSlot, id: string, seen: ObservedSlot | undefined, outcome: SlotOutcome | undefined): RosterEntry {
  return {
    name: slot.name, id, profile: slot.profile, model: slot.model ?? null, type: slot.type, port: slot.port, device: slot.device,
    enabled: slot.enabled, pinned: slot.pinned, priority: slot.priority, status: statusOf(slot, seen), last_error: slot.enabled ? rosterError(outcome) : null,
    tune_effective: slot.tune_effective, tune_unavailable: slot.tune_unavailable,
  };
}

/** The whole roster, by name, with stable ids (new slots get theirs here) and each slot's last failure. */
export async function roster(box: BoxService, model: Model, observed?: Liveness): Promise<RosterEntry[]> {
  const [seen, outcomes] = await Promise.all([observed ?? observeLiveness(box, model), box.state.readOutcomes()]);
  const slots = Object.values(model.slots);
  const ids = slotIds(box.db).ensure(slots.map((s) => s.name));
  return slots.map((s) => rosterEntry(s, ids.get(s.name)!, seen.get(s.name), outcomes[s.name]));
}

export interface RosterReply {
  readonly slots: readonly RosterEntry[];
  readonly count: number;
}

/** The last roster reply of each liveness observation, with the model and slot ids it was made from. */
const rosterReplies = new WeakMap<Liveness, { model: Model; ids: number; reply: RosterReply }>();

/**
 * `GET /api/slots` (slot_list): the roster as a frozen reply, made again
 * only when the model, the liveness observation or a slot id moved; every
 * read in between is served the same object (its redacted copy and JSON
 * made once, server/frozen-reply.ts).
 */
export async function rosterReply(box: BoxService, model: Model): Promise<RosterReply> {
  const seen = await observeLiveness(box, model);
  // Costs no query while every slot's id is written; ids given while the disk was full are written now if they fit.
  const ids = slotIds(box.db);
  ids.ensure(Object.keys(model.slots));
  const known = rosterReplies.get(seen);
  if (known !== undefined && known.model === model && known.ids === ids.version) return known.reply;
  const slots = await roster(box, model, seen);
  const reply = freezeReply({ slots, count: slots.length });
  rosterReplies.set(seen, { model, ids: ids.version, reply });
  return reply;
}

/** `GET /health` of one running slot (1 s), as observe would report it: where `driver` says the slot is (slotReach: a swarm node's address, with the key). */
export async function probeHealth(seen: ObservedSlot | undefined, driver: Pick<SlotDriver, "reach"> | undefined): Promise<SlotHealth> {
  if (!seen?.running || !seen.record) return "unknown";
  const { spec } = seen.record.view;
  const at = slotReach(spec, seen, driver);
  return healthOf(await httpStatus(at.port, spec.health_path, HEALTH_TIMEOUT_MS, { host: at.host, headers: at.headers }));
}

/** One slot in full: the roster line, the compiled facts, what runs (with a health probe) and the last apply outcome. */
export async function slotDetail(box: BoxService, model: Model, slot: ResolvedSlot): Promise<Record<string, unknown>> {
  const seen = (await observeLiveness(box, model)).get(slot.name);
  const [health, outcomes] = await Promise.all([probeHealth(seen, await box.driver(model)), box.state.readOutcomes()]);
  const record = seen?.record;
  return {
    ...rosterEntry(slot, slotIds(box.db).idOf(slot.name), seen, outcomes[slot.name]),
    file: slot.file,
    drift: slot.drift,
    gpu_index: slot.gpu_index,
    tune: slot.tune,
    spec_hash: slot.spec_hash,
    runtime: {
      kind: slot.spec.runtime,
      running: seen?.running ?? false,
      health,
      pid: record?.pid ?? null,
      started_at: record?.started_at ?? null,
      spec_hash: record?.view.spec_hash ?? null,
      up_to_date: record ? record.view.spec_hash === slot.spec_hash : null,
      detail: seen?.detail ?? null,
    },
    last_outcome: outcomes[slot.name] ?? null,
  };
}

/**
 * Lifecycle state in the reference's words (offline, starting, warming,
 * ready, error) from one observation, and `stopping`. While an apply starts
 * the slot (`step`), a runner not launched or not answering yet is starting;
 * while it stops the slot's runner, that runner is stopping.
 */
export function lifecycleOf(slot: ResolvedSlot, seen: ObservedSlot | undefined, health: SlotHealth, outcomeOk: boolean | undefined, step?: SlotStep): string {
  const starting = step !== undefined && step.phase !== "stopping";
  // Swarm starts its task (again, after its runner exited): starting; one it keeps restarting is an error (Degraded CrashLoop).
  if (!seen?.running && !starting && seen?.starting !== undefined) return seen.starting.failed >= 2 ? "error" : "starting";
  if (!seen?.running) return starting ? "starting" : slot.enabled && outcomeOk === false ? "error" : "offline";
  if (step?.phase === "stopping") return "stopping";
  if (health === "ok") return "ready";
  if (health === "loading") return "warming";
  // No readable record: its port is unknown, so it cannot be asked; starting only while an apply starts it.
  if (health === "down" || seen.record === undefined) return starting ? "starting" : "error";
  return "starting";
}
