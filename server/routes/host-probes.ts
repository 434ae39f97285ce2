import { z } from "zod";
import { envReport, gpuTargetVersion, modelStoreProbe, npuStatus } from "../../reconciler/host/probes.js";
import { defineRoute } from "../route.js";

/**
 * Seed 001's in-process host probes: MCP tools of hal0-admin with no REST
 * route (`inProcess`), each reading /proc and /sys of this host
 * (reconciler/host/probes.ts) and answering `{available: false, reason}`
 * where the hardware is absent.
 */
export const hostProbeRoutes = [
  defineRoute({
    method: "GET", path: "/in-process/gpu_target_version", kind: "read", inProcess: true, tools: ["gpu_target_version"],
    summary: "The GPU's gfx target (KFD topology gfx_target_version → gfxNNNN), per GPU node",
    handle: () => gpuTargetVersion(),
  }),
  defineRoute({
    method: "GET", path: "/in-process/npu_status", kind: "read", inProcess: true, tools: ["npu_status"],
    summary: "The NPU accel devices and the driver bound to each (amdxdna)",
    handle: () => npuStatus(),
  }),
  defineRoute({
    method: "GET", path: "/in-process/env_report", kind: "read", inProcess: true, tools: ["env_report"],
    summary: "Container or not, CPU, RAM, GPUs, NPU, kernel, and the runtimes found on PATH",
    handle: () => envReport(),
  }),
  defineRoute({
    method: "GET", path: "/in-process/model_store_probe", kind: "read", inProcess: true, query: z.strictObject({ path: z.string().min(1).max(4096) }), tools: ["model_store_probe"],
    summary: "What a model store path is on: filesystem, free and total bytes, writable, memory-backed",
    handle: ({ query }) => modelStoreProbe(query.path),
  }),
];
