import { parse as parseToml } from "@decimalturn/toml-patch";
import { z } from "zod";
import type { ResolvedSlot } from "../../compiler/index.js";
import { ApiError } from "../errors.js";
import { redact, redactToml } from "../redact.js";
import { defineRoute } from "../route.js";
import { slotIds } from "../slot-ids.js";
import { slotLog } from "../slot-logs.js";
import { findSlot, lifecycleOf, observeLiveness, probeHealth, roster, rosterReply, slotDetail, slotFileText } from "../slot-view.js";
import { slotConditionsNow } from "../../reconciler/conditions-store.js";
import type { BoxService } from "../box.js";
import { queryInt } from "../query.js";

const Name = z.strictObject({ name: z.string().min(1).max(64) });
const Lines = z.strictObject({ lines: queryInt(1, 2000, 200) });

async function slotOf(box: BoxService, name: string): Promise<ResolvedSlot> {
  return findSlot(await box.model(), name);
}

/** The read side of the slot routes: roster, one slot, its resolved spec, state, file, logs, and box-wide counters. */
export const slotReadRoutes = [
  defineRoute({
    method: "GET", path: "/api/slots", kind: "read", tools: ["slot_list"], listKey: "slots",
    summary: "Every slot: profile, model, port, device, status and its effective tune (liveness only, no /health probes)",
    handle: async ({ box }) => rosterReply(box, await box.model()),
  }),
  defineRoute({
    method: "GET", path: "/api/slots/metrics", kind: "read", tools: ["slot_metrics"],
    summary: "Counters over the slots: by status, type and device; ports in use; running runners and their uptime",
    handle: async ({ box }) => slotMetrics(box),
  }),
  defineRoute({
    method: "GET", path: "/api/slots/capacity", kind: "read", tools: ["slot_capacity"],
    summary: "How many more slots fit: [slots] max_slots against the enabled slots, and the free ports of the range",
    handle: async ({ box }) => capacity(box),
  }),
  defineRoute({
    method: "GET", path: "/api/slots/by-name/{name}", kind: "read", params: Name, tools: ["slot_by_name"],
    summary: "One slot by name (the same reply as GET /api/slots/{name})",
    handle: async ({ box, params }) => slotDetail(box, await box.model(), await slotOf(box, params.name)),
  }),
  defineRoute({
    method: "GET", path: "/api/slots/by-id/{slot_id}", kind: "read", params: z.strictObject({ slot_id: z.string().min(1).max(64) }), tools: ["slot_by_id"],
    summary: "One slot by its stable id (kept across renames)",
    handle: async ({ box, params }) => {
      const model = await box.model();
      const name = slotIds(box.db).nameOf(params.slot_id);
      if (name === undefined || !Object.hasOwn(model.slots, name)) {
        const known = [...slotIds(box.db).ensure(Object.keys(model.slots)).entries()].filter(([n]) => Object.hasOwn(model.slots, n)).map(([, id]) => id);
        throw new ApiError("slot.not_found", `no slot has id \`${params.slot_id}\``, { slot_id: params.slot_id, known: known.sort() });
      }
      return slotDetail(box, model, model.slots[name]!);
    },
  }),
  defineRoute({
    method: "GET", path: "/api/slots/{name}", kind: "read", params: Name, tools: ["slot_status"],
    summary: "One slot: the roster line, its compiled facts, what runs (with a /health probe) and the last apply outcome",
    handle: async ({ box, params }) => slotDetail(box, await box.model(), await slotOf(box, params.name)),
  }),
  defineRoute({
    method: "GET", path: "/api/slots/{name}/resolved", kind: "read", params: Name, tools: ["slot_resolved"],
    summary: "The resolved runtime spec: argv, env (secret-named values and secret flags' values masked), spec_hash, and the runner facts the argv was written in and checked against",
    handle: async ({ box, params }) => {
      const slot = await slotOf(box, params.name);
      const spec = redact(slot.spec) as typeof slot.spec;
      // The runner facts (runner-probe.ts) the argv follows: its dialect, and what checking it against the runner's --help found.
      const runner = { ...slot.runner, diagnostics: [...slot.runner.diagnostics] };
      return { name: slot.name, file: slot.file, spec, argv: spec.argv, env: spec.env, spec_hash: slot.spec_hash, tune_effective: slot.tune_effective, tune_unavailable: slot.tune_unavailable, runner };
    },
  }),
  defineRoute({
    method: "GET", path: "/api/slots/{name}/state", kind: "read", params: Name, tools: ["slot_state"],
    summary: "Lifecycle state, the conditions of the last sweep or apply, and the last apply outcome",
    handle: async ({ box, params }) => {
      const model = await box.model();
      const slot = findSlot(model, params.name);
      const [liveness, driver] = await Promise.all([observeLiveness(box, model), box.driver(model)]);
      const seen = liveness.get(slot.name);
      // A swarm's nodes (one more list call): a slot no node can take is held by the planner, not pending.
      const [health, nodes] = await Promise.all([probeHealth(seen, driver), driver.nodes?.()]);
      // Its conditions now, from this very observation and the step an apply runs on it (as hal0 status computes them).
      const { conditions, outcome, step } = await slotConditionsNow(model, slot.name, seen && { ...seen, health }, box.state, Date.now, nodes);
      return {
        name: slot.name, state: lifecycleOf(slot, seen, health, outcome?.ok, step), enabled: slot.enabled, running: seen?.running ?? false, health,
        generation: conditions.generation, conditions: conditions.conditions, last_outcome: outcome ?? null, step: step ?? null,
      };
    },
  }),
  defineRoute({
    method: "GET", path: "/api/slots/{name}/config", kind: "read", params: Name, tools: ["slot_config"],
    summary: "The slot's file: its parsed content, its text (secret values masked in both), and the revision to send back as If-Match",
    handle: async ({ box, params }) => {
      const snap = await box.snapshot();
      const file = `slots/${params.name}.toml`;
      const text = slotFileText(snap, params.name);
      let content: unknown = null;
      try {
        content = parseToml(text);
      } catch {
        // the text is still served: an editor fixes it from there
      }
      // Secret values masked in both (a `[redacted]` sent back by PUT keeps the value); the file keeps them.
      return { name: params.name, file, revision: snap.revision, content: redact(content), text: redactToml(text), valid: content !== null };
    },
  }),
  defineRoute({
    method: "GET", path: "/api/slots/{name}/logs", kind: "read", params: Name, query: Lines, tools: ["slot_logs"], reveals: "slot-log",
    summary: "The tail of the slot runner's output (the process runtime's runner.log, a docker slot's container log), secrets masked; ?lines=1..2000 (default 200)",
    handle: async ({ box, params, query }) => {
      const model = await box.model();
      const slot = findSlot(model, params.name);
      const log = await slotLog(await box.driver(model), box.state.dir, slot.name, query.lines);
      return { name: slot.name, runtime: slot.spec.runtime, ...log };
    },
  }),
];


async function slotMetrics(box: BoxService): Promise<Record<string, unknown>> {
  const model = await box.model();
  const seen = await observeLiveness(box, model);
  const list = await roster(box, model, seen);
  const count = (key: "status" | "type" | "device") => list.reduce<Record<string, number>>((acc, s) => ({ ...acc, [s[key]]: (acc[s[key]] ?? 0) + 1 }), {});
  const now = box.now();
  const running = list.filter((s) => s.status === "running").map((s) => {
    const started = seen.get(s.name)?.record?.started_at;
    return { name: s.name, port: s.port, pid: seen.get(s.name)?.record?.pid ?? null, started_at: started ?? null, uptime_s: started ? Math.max(0, Math.round((now - Date.parse(started)) / 1000)) : null };
  });
  const unmanaged = [...seen.values()].filter((s) => s.running && !Object.hasOwn(model.slots, s.name)).map((s) => s.name);
  return {
    total: list.length, enabled: list.filter((s) => s.enabled).length, pinned: list.filter((s) => s.pinned).length,
    by_status: { running: 0, stopped: 0, disabled: 0, ...count("status") }, by_type: count("type"), by_device: count("device"),
    ports_used: list.filter((s) => s.enabled).map((s) => s.port).sort((a, b) => a - b), running, running_not_in_config: unmanaged,
  };
}

async function capacity(box: BoxService): Promise<Record<string, unknown>> {
  const model = await box.model();
  const { max_slots, port_range_start, port_range_end } = model.settings.slots;
  const slots = Object.values(model.slots);
  const enabled = slots.filter((s) => s.enabled).length;
  const taken = new Set(slots.map((s) => s.port));
  const free: number[] = [];
  for (let p = port_range_start; p <= port_range_end; p++) if (!taken.has(p) && p !== model.settings.server.port) free.push(p);
  return {
    max_slots, unlimited: max_slots === 0, total: slots.length, enabled, remaining: max_slots === 0 ? null : Math.max(0, max_slots - enabled),
    port_range: { start: port_range_start, end: port_range_end }, free_ports: free.length, next_free_port: free[0] ?? null, free_port_sample: free.slice(0, 20),
  };
}
