import type { SlotSpec } from "../compiler/index.js";
import type { ObservedSlot } from "../reconciler/index.js";
import type { SlotDriver } from "../reconciler/drivers/driver.js";
import { API_KEY_ENV, llamaCsvRow } from "../reconciler/drivers/runner-secrets.js";

/** Where a slot's runner answers and what a request to it carries. */
export interface SlotReach {
  readonly host: string;
  readonly port: number;
  /** `Authorization: Bearer …` when the runner wants a key; never logged or returned. */
  readonly headers: Readonly<Record<string, string>>;
}

/**
 * The one answer to "how does hal0 reach this slot": on a multi-node runtime
 * (swarm) the driver says — the node's address its task runs on, with the
 * box's API key; on one box the spec's host (a wildcard is reached on
 * loopback) with the `--api-key` its argv passes, if any.
 */
export function slotReach(spec: Pick<SlotSpec, "host" | "port" | "argv"> & Partial<Pick<SlotSpec, "env">>, seen?: Pick<ObservedSlot, "name" | "node">, driver?: Pick<SlotDriver, "reach">): SlotReach {
  const far = seen !== undefined ? driver?.reach?.(seen) : undefined;
  if (far !== undefined) return { host: far.host, port: spec.port, headers: far.headers };
  const host = ["0.0.0.0", "::", ""].includes(spec.host) ? "127.0.0.1" : spec.host;
  const key = apiKeyOf(spec.argv, spec.env ?? {});
  return { host, port: spec.port, headers: key === undefined ? {} : { authorization: `Bearer ${key}` } };
}

/** `http://host:port` of a reach (an IPv6 host in brackets). */
export function reachBase(reach: Pick<SlotReach, "host" | "port">): string {
  return `http://${reach.host.includes(":") ? `[${reach.host}]` : reach.host}:${reach.port}`;
}

/**
 * The first key a runner wants: of its last `--api-key` or, with none, of the `LLAMA_API_KEY` its env declares
 * (llama-server reads that variable as it reads the flag). llama-server takes a comma-separated list, read by its
 * CSV reader (a field may be quoted; an empty one is no key): a value with no comma and no quote is one key alike
 * in every build (an older build takes any value whole).
 */
function apiKeyOf(argv: readonly string[], env: Readonly<Record<string, string>>): string | undefined {
  const i = argv.lastIndexOf("--api-key");
  const value = i >= 0 ? argv[i + 1] : env[API_KEY_ENV];
  if (value === undefined) return undefined;
  return /[,"]/.test(value) ? llamaCsvRow(value).find((k) => k !== "") : value;
}
