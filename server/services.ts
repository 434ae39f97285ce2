import type { Model, ResolvedSlot } from "../compiler/index.js";
import { planSlotChange, type Inventory, type Observed, type ObservedSlot } from "../reconciler/index.js";
import type { SlotOutcome } from "../reconciler/state.js";
import type { SlotDriver } from "../reconciler/drivers/driver.js";
import { slotAddress, type SlotChange } from "../schema/index.js";
import { invoke, proposalEffects, proposeOnly, type Call, type Dispatcher } from "./dispatch.js";
import { ApiError, apiErrorOf } from "./errors.js";
import { toolTier } from "./identity/access.js";
import { routeId, type Caller, type Route } from "./route.js";
import { observeLiveness, probeHealth, statusOf } from "./slot-view.js";
import { callTier, effectLines, effectVerdict, queueForPerson, withDryRunVerdict } from "./verdict.js";

/**
 * The box's services (seed 001's service_list / service_health /
 * service_action): the sweep loop and the memory engine (restarted in
 * process), each slot (started, stopped and restarted as the pipeline's
 * load, unload and restart: the slot routes themselves, through `invoke`),
 * and the API (no action: it is the caller's way in).
 */

export const SWEEP_LOOP = "sweep-loop";
export const MEMORY = "memory";
export const API = "api";
/** A slot's service id is its plan address. */
const SLOT_PREFIX = "slot.";

export type ServiceAction = "start" | "stop" | "restart";

/** What an action costs: for a slot, what the planner would do to it now (its `downtime` and `destructive`). */
export interface ActionCost {
  readonly downtime: boolean;
  readonly destructive: boolean;
  /** The slot route the action runs (slot_load, slot_unload, slot_restart). */
  readonly tool?: string;
  /** The planner's change for the slot, against one observation of the runtime. */
  readonly plan?: { readonly action: SlotChange["action"]; readonly reason: SlotChange["reason"] };
  readonly detail: string;
}

export interface Service {
  readonly id: string;
  readonly kind: "sweep_loop" | "memory" | "api" | "slot";
  readonly state: string;
  readonly since: string | null;
  readonly last_error: { readonly message: string; readonly at: string; readonly code?: string } | null;
  readonly actions: ReadonlyArray<{ readonly action: ServiceAction; readonly cost: ActionCost }>;
  readonly detail?: Readonly<Record<string, unknown>>;
}

/** When this process started: the API's `since` (it serves as long as the process runs). */
const PROCESS_STARTED = new Date(Date.now() - process.uptime() * 1000).toISOString();

/** Every service, the sweep loop first and the slots by name. */
export async function listServices(d: Dispatcher): Promise<Service[]> {
  const model = await d.box.model();
  const slots = Object.values(model.slots).sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  const [seen, outcomes] = await Promise.all([d.box.observe(model, false).catch(runtimeDown), d.box.state.readOutcomes()]);
  const slotServices = seen instanceof ApiError
    ? slots.map((s) => unknownSlotService(s, seen))
    : slots.map((s) => slotService(model, s, seen.observed, seen.inventory, outcomes[s.name]));
  return [sweepService(d), memoryService(d), apiService(), ...slotServices];
}

/**
 * The runtime does not answer (the docker engine is down): the services list
 * still answers — that is when it is wanted — with each slot's state
 * `unknown` and the refusal as its last error; it offers no action.
 */
function runtimeDown(err: unknown): ApiError {
  const refusal = apiErrorOf(err);
  if (refusal instanceof ApiError && refusal.code === "runtime.unavailable") return refusal;
  throw refusal;
}

function unknownSlotService(slot: ResolvedSlot, why: ApiError): Service {
  return {
    id: `${SLOT_PREFIX}${slot.name}`, kind: "slot", state: "unknown", since: null,
    last_error: { message: why.message, at: new Date().toISOString(), code: why.code },
    actions: [],
    detail: { name: slot.name, enabled: slot.enabled, pinned: slot.pinned, port: slot.port, pid: null },
  };
}

/** One service by id, or 404 `service.not_found` naming the known ones. */
export async function findService(d: Dispatcher, id: string): Promise<Service> {
  const all = await listServices(d);
  const found = all.find((s) => s.id === id);
  if (found) return found;
  throw new ApiError("service.not_found", `no service \`${id}\`; the box's services: ${all.map((s) => s.id).join(", ")}`, { id, known: all.map((s) => s.id) });
}

function sweepService(d: Dispatcher): Service {
  const s = d.loop?.status() ?? { state: "not_running" as const, restarts: 0, sweeps: 0 };
  const restart: ActionCost = { downtime: false, destructive: false, detail: "the sweep in flight is interrupted (no further step; a runner still loading is left for the next sweep), then a new loop starts and sweeps at once; slots keep running" };
  return {
    id: SWEEP_LOOP, kind: "sweep_loop", state: s.state, since: s.since ?? null, last_error: s.last_error ?? null,
    // A server without a loop (hal0 serve --no-reconcile, a test server), or one shutting down, has nothing to restart.
    actions: d.loop?.attached ? [{ action: "restart", cost: restart }] : [],
    detail: { restarts: s.restarts, sweeps: s.sweeps, last_sweep: s.last_sweep ?? null },
  };
}

function memoryService(d: Dispatcher): Service {
  const s = d.memory?.status();
  if (!s) return { id: MEMORY, kind: "memory", state: "not_served", since: null, last_error: null, actions: [] };
  const restart: ActionCost = { downtime: false, destructive: false, detail: "the engine's queued operations settle, it is closed and opened again; a memory call meanwhile opens the new one" };
  return {
    id: MEMORY, kind: "memory", state: s.state, since: s.since ?? null, last_error: s.last_error ?? null,
    actions: s.state === "disabled" ? [] : [{ action: "restart", cost: restart }],
    detail: { engine: s.engine },
  };
}

function apiService(): Service {
  return { id: API, kind: "api", state: "running", since: PROCESS_STARTED, last_error: null, actions: [], detail: { note: "the API is the caller's way in: it has no action (stop hal0 serve itself, or its systemd unit)" } };
}

/** The slot routes a slot's actions run, and the option of the plan each would make. */
const SLOT_ACTIONS: Readonly<Record<ServiceAction, { readonly tool: string; readonly route: string }>> = {
  start: { tool: "slot_load", route: "POST /api/slots/{name}/load" },
  stop: { tool: "slot_unload", route: "POST /api/slots/{name}/unload" },
  restart: { tool: "slot_restart", route: "POST /api/slots/{name}/restart" },
};

function slotService(model: Model, slot: ResolvedSlot, observed: Observed, inventory: Inventory, outcome: SlotOutcome | undefined): Service {
  const seen: ObservedSlot | undefined = Object.hasOwn(observed.slots, slot.name) ? observed.slots[slot.name] : undefined;
  // A disabled slot starts (load); an enabled one stops (unload) or restarts (a stopped one is started by its restart).
  const allowed: ServiceAction[] = slot.enabled ? ["stop", "restart"] : ["start"];
  const actions = allowed.map((action) => ({ action, cost: slotCost(model, slot, action, observed, inventory) }));
  const failed = outcome && !outcome.ok ? { message: outcome.error ?? `${outcome.action ?? "apply"} failed`, at: outcome.at, ...(outcome.code ? { code: outcome.code } : {}) } : null;
  return {
    id: `${SLOT_PREFIX}${slot.name}`, kind: "slot", state: statusOf(slot, seen),
    since: seen?.running ? (seen.record?.started_at ?? null) : (outcome?.at ?? null),
    last_error: failed,
    actions,
    detail: { name: slot.name, enabled: slot.enabled, pinned: slot.pinned, port: slot.port, pid: seen?.record?.pid ?? null },
  };
}

/**
 * What the planner would do to this slot if the action ran now: the same
 * pure planner over one observation, given the slot's desired state after
 * the action (enabled for start, disabled for stop) or the restart option.
 * The action itself goes through the pipeline, which plans again.
 */
function slotCost(model: Model, slot: ResolvedSlot, action: ServiceAction, observed: Observed, inventory: Inventory): ActionCost {
  const address = slotAddress(slot.name);
  // The planner decides a slot from its own inputs alone: the desired model need only hold it (a copy of every slot per slot would cost the square of the box).
  const desired = action === "restart" ? model : { ...model, slots: { [slot.name]: { ...slot, enabled: action === "start" } } };
  const change = planSlotChange(desired, observed, inventory, slot.name, action === "restart" ? { replace: [address] } : {});
  const { tool } = SLOT_ACTIONS[action];
  if (!change) return { downtime: false, destructive: false, tool, detail: "the planner has nothing to do for this slot" };
  const words = change.action === "no-op" ? `nothing runs or stops (${change.reason})` : `${change.action} (${change.reason})${change.downtime ? ": the slot is unavailable while it runs" : ""}`;
  return { downtime: change.downtime, destructive: change.destructive, tool, plan: { action: change.action, reason: change.reason }, detail: words };
}

/** The service, if it allows `action` now: else `service.not_found`, `service.not_running` (no sweep loop here) or `service.action_not_allowed`. */
export async function checkAction(d: Dispatcher, id: string, action: ServiceAction): Promise<Service> {
  const service = await findService(d, id);
  if (service.actions.some((a) => a.action === action)) return service;
  const allowed = service.actions.map((a) => a.action);
  if (service.kind === "sweep_loop" && service.state !== "running") {
    throw new ApiError("service.not_running", "no sweep loop runs in this server (hal0 serve --no-reconcile, or a server built without one): there is nothing to restart", { id, state: service.state });
  }
  throw new ApiError("service.action_not_allowed", `service \`${id}\` (${service.state}) does not allow \`${action}\`; it allows: ${allowed.length > 0 ? allowed.join(", ") : "nothing"}`, { id, action, allowed, state: service.state });
}

/**
 * Runs one action. A slot's runs its slot route through `invoke` with the
 * caller as it came (compiled, planned, committed, audited like that tool);
 * an agent not running an approved request meets that tool's own tier and,
 * for a load or unload, the gate by effect, as if it had called the tool.
 */
export async function runServiceAction(d: Dispatcher, id: string, action: ServiceAction, force: boolean, caller: Caller, requestId: string): Promise<unknown> {
  const service = await checkAction(d, id, action);
  if (service.kind === "sweep_loop") {
    const before = d.loop!.status().since;
    await d.loop!.restart();
    return { id, action, state: d.loop!.status().state, since_before: before ?? null, since: d.loop!.status().since ?? null };
  }
  if (service.kind === "memory") {
    await d.memory!.restart();
    const s = d.memory!.status();
    return { id, action, state: s.state, since: s.since ?? null };
  }
  const { route, tool, call } = slotCall(d, id, action, force, caller, requestId);
  const result = await asTool(d, route, tool, call);
  return { id, action, tool, result };
}

/** A slot service's action as its slot route's call (a stop with force as ?force=true). */
function slotCall(d: Dispatcher, id: string, action: ServiceAction, force: boolean, caller: Caller, requestId: string): { route: Route; tool: string; call: Call } {
  const { tool, route: rid } = SLOT_ACTIONS[action];
  const route = d.routes.find((r) => routeId(r) === rid);
  if (!route) throw new ApiError("system.internal", `the route ${rid} is not in this server's table`);
  const call: Call = { params: { name: id.slice(SLOT_PREFIX.length) }, query: action === "stop" && force ? { force: "true" } : {}, body: undefined, caller, requestId, tool };
  return { route, tool, call };
}

/**
 * Before an agent's action is queued for a person, and again when it is
 * approved: the service allows it, a slot's action meets its slot tool's
 * tier for the agent (`slot_restart` blocked is `mcp.tool_not_allowed`, as
 * that tool's own call is), and a slot's start or stop is judged by
 * the change its slot route would commit, as that route's own call is — a
 * pinned slot's stop without force is `slot.pinned`, an effect the agent's
 * policy blocks is `mcp.tool_not_allowed` — so the verdict never depends on
 * which tool sent it. Returns the card's effect lines (none for the others).
 */
export async function precheckAction(d: Dispatcher, id: string, action: ServiceAction, force: boolean, caller: Caller, requestId: string): Promise<string[]> {
  const service = await checkAction(d, id, action);
  if (service.kind !== "slot") return [];
  const { route, tool, call } = slotCall(d, id, action, force, caller, requestId);
  const policy = caller.kind === "agent" ? (await d.box.model()).policy : undefined;
  // The slot tool's own tier holds through service_action too: one blocked for the agent is refused, queued or approved.
  if (policy) toolTier(policy, route, tool, caller);
  if (action === "restart") return [];
  const { proposal } = await proposeOnly(d, route, call);
  if (policy) effectVerdict(proposal, "gated", caller, policy);
  return effectLines(proposalEffects(proposal));
}

/** The slot route run as its tool would be for this caller: an agent's own call meets the tool's tier (and a write's effects) first. */
async function asTool(d: Dispatcher, route: Route, tool: string, call: Call): Promise<unknown> {
  const caller = call.caller;
  if (caller.kind !== "agent" || caller.via === "approval") return invoke(d, route, call);
  const started = performance.now();
  const floor = toolTier((await d.box.model()).policy, route, tool, caller);
  const judged = await callTier(d, route, floor, call);
  if (judged.tier === "gated") return queueForPerson(d, route, tool, call, started, `${tool} is gated for ${caller.agent}`);
  return withDryRunVerdict(await invoke(d, route, judged.call), judged.dryRun);
}

export interface ServiceHealth {
  readonly id: string;
  /** ok; degraded (runs, with a problem); down (should run and does not); off (not meant to run: disabled, no loop here). */
  readonly health: "ok" | "degraded" | "down" | "off";
  readonly detail: string;
}

/** A health probe per service: the slots' GET /health (1 s each, in parallel), the memory engine's stats (2 s), the loop's last sweep. */
export async function serviceHealth(d: Dispatcher): Promise<{ ok: boolean; services: ServiceHealth[] }> {
  const model = await d.box.model();
  const seen = await observeLiveness(d.box, model).catch(runtimeDown);
  const slots = Object.values(model.slots).sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  const services: ServiceHealth[] = await Promise.all([
    sweepHealth(d),
    memoryHealth(d),
    { id: API, health: "ok" as const, detail: "answering (this reply)" },
    ...slots.map(async (s): Promise<ServiceHealth> => {
      if (!(seen instanceof ApiError)) return slotHealth(s, seen.get(s.name), await d.box.driver(model));
      return { id: `${SLOT_PREFIX}${s.name}`, health: s.enabled ? "down" : "off", detail: `unknown: ${seen.code}: ${seen.message}` };
    }),
  ]);
  return { ok: services.every((s) => s.health === "ok" || s.health === "off"), services };
}

function sweepHealth(d: Dispatcher): ServiceHealth {
  const s = d.loop?.status();
  if (!s || s.state === "not_running") return { id: SWEEP_LOOP, health: "off", detail: "no sweep loop runs in this server" };
  if (s.state !== "running") return { id: SWEEP_LOOP, health: "down", detail: `the loop is ${s.state}` };
  if (s.last_sweep === undefined) return { id: SWEEP_LOOP, health: "ok", detail: "running; its first sweep is under way" };
  const bad = s.last_sweep.outcome === "failed" || s.last_sweep.outcome === "invalid_config";
  const why = bad && s.last_error?.at === s.last_sweep.at ? ` (${s.last_error.message})` : "";
  return { id: SWEEP_LOOP, health: bad ? "degraded" : "ok", detail: `last sweep ${s.last_sweep.at}: ${s.last_sweep.outcome}${why}` };
}

const MEMORY_PROBE_MS = 2000;

async function memoryHealth(d: Dispatcher): Promise<ServiceHealth> {
  const s = d.memory?.status();
  if (!d.memory || !s) return { id: MEMORY, health: "off", detail: "this server does not serve hal0-memory" };
  if (s.state === "disabled") return { id: MEMORY, health: "off", detail: "[memory] enabled = false" };
  try {
    const engine = d.memory.engine();
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new Error(`no answer within ${MEMORY_PROBE_MS} ms`)), MEMORY_PROBE_MS)));
    const stats = await Promise.race([engine.stats({ owner: "hal0" }), late]).finally(() => clearTimeout(timer));
    return { id: MEMORY, health: "ok", detail: `${stats.engine} engine answers (${stats.nodes} memory units)` };
  } catch (err) {
    return { id: MEMORY, health: "down", detail: `the ${s.engine} engine does not answer: ${(err as Error).message}` };
  }
}

async function slotHealth(slot: ResolvedSlot, seen: ObservedSlot | undefined, driver: SlotDriver): Promise<ServiceHealth> {
  const id = `${SLOT_PREFIX}${slot.name}`;
  if (!slot.enabled && !seen?.running) return { id, health: "off", detail: "disabled" };
  if (!seen?.running) return { id, health: "down", detail: "enabled and not running" };
  const h = await probeHealth(seen, driver);
  return { id, health: h === "ok" ? "ok" : h === "loading" ? "degraded" : "down", detail: `GET /health: ${h}` };
}
