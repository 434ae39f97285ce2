import type { ResolvedSlot } from "../compiler/index.js";
import type { ObservedSlot } from "../reconciler/index.js";
import type { SlotDriver } from "../reconciler/drivers/driver.js";
import { ApiError } from "./errors.js";
import { reachBase, slotReach } from "./slot-reach.js";

/** How long a runner has to answer a read hal0 passes on to it, its whole reply included. */
export const RUNNER_READ_TIMEOUT_MS = 3000;
/** A runner's reply to such a read is a short JSON list (voices, models); more than this is not one. */
export const RUNNER_READ_MAX_BYTES = 4 * 1024 * 1024;

/**
 * `GET <path>` of a slot's running runner, its JSON reply. A slot hal0 does
 * not see running is `slot.not_ready` before anything is sent; a runner still
 * loading (503, as llama-server and the stand-in answer while they load) is
 * `slot.not_ready` too; any other failure is `slot.runner_error`. The runner
 * is on this host (loopback, or the host network for containers), so this
 * never reaches out on a caller's behalf.
 */
export async function readRunner(slot: ResolvedSlot, seen: ObservedSlot | undefined, path: string, driver?: Pick<SlotDriver, "reach">): Promise<unknown> {
  if (!seen?.running) {
    const state = slot.enabled ? "stopped" : "disabled";
    throw new ApiError("slot.not_ready", `slot \`${slot.name}\` is ${state}: its runner is not running`, { name: slot.name, state });
  }
  const reach = slotReach(slot.spec, seen, driver);
  const url = `${reachBase(reach)}${path}`;
  let res: Response;
  try {
    res = await fetch(url, { headers: { ...reach.headers, accept: "application/json" }, redirect: "manual", signal: AbortSignal.timeout(RUNNER_READ_TIMEOUT_MS) });
  } catch (err) {
    const timedOut = (err as Error).name === "TimeoutError";
    const cause = (err as { cause?: { code?: string } }).cause?.code;
    throw new ApiError("slot.runner_error", `slot \`${slot.name}\`'s runner did not answer GET ${path}${timedOut ? ` within ${RUNNER_READ_TIMEOUT_MS} ms` : ""}`, {
      name: slot.name, path, reason: timedOut ? "timeout" : (cause ?? "unreachable"),
    });
  }
  let text: string;
  try {
    text = await bodyText(res);
  } catch (err) {
    // A runner that sent its headers and then stalled, broke off, or kept sending: a failed read, never an uncoded one.
    const timedOut = (err as Error).name === "TimeoutError";
    const tooLarge = err instanceof TooLarge;
    const cause = (err as { cause?: { code?: string } }).cause?.code;
    const why = timedOut ? `did not finish its reply within ${RUNNER_READ_TIMEOUT_MS} ms` : tooLarge ? `sent more than ${RUNNER_READ_MAX_BYTES} bytes` : "broke off its reply";
    throw new ApiError("slot.runner_error", `slot \`${slot.name}\`'s runner answered GET ${path} but ${why}`, {
      name: slot.name, path, status: res.status, reason: timedOut ? "timeout" : tooLarge ? "too_large" : (cause ?? "reply_cut"),
    });
  }
  if (res.status === 503) throw new ApiError("slot.not_ready", `slot \`${slot.name}\`'s runner is still loading`, { name: slot.name, state: "warming", path });
  if (!res.ok) throw new ApiError("slot.runner_error", `slot \`${slot.name}\`'s runner answered GET ${path} with ${res.status}`, { name: slot.name, path, status: res.status });
  try {
    return JSON.parse(text);
  } catch {
    throw new ApiError("slot.runner_error", `slot \`${slot.name}\`'s runner answered GET ${path} with something that is not JSON`, { name: slot.name, path, status: res.status, reason: "not_json" });
  }
}

class TooLarge extends Error {}

/** The reply's body as text, at most RUNNER_READ_MAX_BYTES (past that the read is cancelled: TooLarge). */
async function bodyText(res: Response): Promise<string> {
  if (res.body === null) return "";
  const chunks: Uint8Array[] = [];
  let size = 0;
  for await (const chunk of res.body) {
    size += chunk.length;
    if (size > RUNNER_READ_MAX_BYTES) throw new TooLarge();
    chunks.push(chunk);
  }
  return Buffer.concat(chunks).toString("utf8");
}
