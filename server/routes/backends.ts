import { z } from "zod";
import { ResourceId } from "../../schema/index.js";
import { backendRows, deviceHardware } from "../../reconciler/host/backends.js";
import { ApiError } from "../errors.js";
import { defineRoute } from "../route.js";

const BackendParams = z.strictObject({ backend_id: ResourceId });

/**
 * Backends: capabilities.toml's `[[backend]]` entries with what they serve,
 * the profiles and runner images that run them, the slots on them, and
 * whether this host has their hardware (reconciler/host/backends.ts).
 */
export const backendRoutes = [
  defineRoute({
    method: "GET", path: "/api/backends", kind: "read", tools: ["backend_list"], listKey: "backends",
    summary: "Each [[backend]] of capabilities.toml: kind, what it serves, its devices, profiles, runner images and slots, and whether this host has its hardware",
    handle: async ({ box }) => backendRows(await box.model(), await deviceHardware()),
  }),
  defineRoute({
    method: "GET", path: "/api/backends/{backend_id}", kind: "read", params: BackendParams, tools: ["backend_detail"],
    summary: "One backend: what backend_list shows of it, with its hardware per device",
    handle: async ({ params, box }) => {
      const rows = backendRows(await box.model(), await deviceHardware());
      const row = rows.find((r) => r.id === params.backend_id);
      if (row === undefined) throw new ApiError("backend.not_found", `no [[backend]] of capabilities.toml has id \`${params.backend_id}\``, { backend_id: params.backend_id, known: rows.map((r) => r.id) });
      return row;
    },
  }),
];
