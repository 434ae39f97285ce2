import { z } from "zod";
import { defineRoute } from "../route.js";
import { listServices, precheckAction, runServiceAction, serviceHealth } from "../services.js";

const ServiceId = z.strictObject({ service_id: z.string().min(1).max(80) });
const Action = z.strictObject({
  action: z.enum(["start", "stop", "restart"]),
  /** A pinned slot's stop (unload) needs it, as slot_unload's ?force=true. */
  force: z.boolean().optional(),
});

/**
 * Seed 001's service tools (server/services.ts): the sweep loop, the memory
 * engine, the API and each slot, with state, since, last error and what each
 * allowed action costs; service_action is gated.
 */
export const serviceRoutes = [
  defineRoute({
    method: "GET", path: "/api/services", kind: "read", tools: ["service_list"], listKey: "services",
    summary: "The box's services (sweep loop, memory engine, API, each slot): state, since, last error, allowed actions and what each costs (the plan's downtime)",
    handle: async ({ services }) => {
      const list = await listServices(services);
      return { services: list, count: list.length };
    },
  }),
  defineRoute({
    method: "GET", path: "/api/services/health", kind: "read", tools: ["service_health"],
    summary: "A health probe per service: each running slot's GET /health, the memory engine, the sweep loop's last sweep",
    handle: ({ services }) => serviceHealth(services),
  }),
  defineRoute({
    method: "POST", path: "/api/services/{service_id}/action", kind: "action", params: ServiceId, body: Action, tools: ["service_action"],
    summary: "restart the sweep loop or the memory engine in process; start / stop / restart a slot (its load, unload and restart routes, through the pipeline)",
    // Before a card is queued, and again when it is approved: the service exists and allows the action, and a slot's start or stop is judged by its change.
    precheck: async ({ services, params, body, caller, requestId }) => void (await precheckAction(services, params.service_id, body.action, body.force ?? false, caller, requestId)),
    describe: async ({ services, params, body, caller, requestId }) => ({
      summary: `service_action ${params.service_id} ${body.action}`,
      effects: await precheckAction(services, params.service_id, body.action, body.force ?? false, caller, requestId),
    }),
    handle: ({ services, params, body, caller, requestId }) => runServiceAction(services, params.service_id, body.action, body.force ?? false, caller, requestId),
  }),
];
