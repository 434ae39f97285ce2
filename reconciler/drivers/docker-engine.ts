import { LABEL, containerName } from "./docker-container.js";
import { DriverError } from "./driver.js";
import { describeExit, type RunnerExit } from "./runner.js";

/**
 * The docker runtime's dealings with the engine's answers: HTTP statuses of
 * its errors, the end of a container's run, and the messages hal0 prints.
 * Structural types only (docker.ts alone imports dockerode).
 */

/** The HTTP status of an engine error (dockerode puts it on `statusCode`); undefined for a transport error. */
export function engineStatus(err: unknown): number | undefined {
  const status = (err as { statusCode?: unknown } | null)?.statusCode;
  return typeof status === "number" ? status : undefined;
}

/**
 * How long an engine call that answers at once on a working engine (the ping,
 * observe's list call) may take. An engine that accepts the connection and
 * never answers would otherwise hold every sweep, status and slot read forever.
 */
export const ENGINE_ANSWER_MS = 30_000;

/** What hal0 says when the engine at `address` does not answer (`why`: the transport's error, or the bound). */
export function engineDownMessage(runtime: "docker" | "swarm", address: string, why: string): string {
  return `[slots] runtime = "${runtime}": the engine at ${address} does not answer (${why}); start it, or set [slots] docker_host or DOCKER_HOST`;
}

/**
 * One engine call that answers at once, bounded by `ms`: given the signal to
 * pass on (a call that takes none is no longer waited for), it fails with
 * "no answer within N s" when the engine keeps silent that long.
 */
export function within<T>(call: (abortSignal: AbortSignal) => Promise<T>, ms = ENGINE_ANSWER_MS): Promise<T> {
  const signal = AbortSignal.timeout(ms);
  const silent = new Promise<never>((_, reject) => signal.addEventListener("abort", () => reject(new Error(`no answer within ${ms / 1000} s`)), { once: true }));
  silent.catch(() => undefined); // the call answered first: nobody waits for this one
  return Promise.race([call(signal).catch((err: unknown) => Promise.reject(signal.aborted ? new Error(`no answer within ${ms / 1000} s`) : err)), silent]);
}

/**
 * `within`, for the runtime: no connection (the socket gone, the port closed)
 * or no answer in time is `runtime.unavailable` (a DriverError), naming the
 * address; an answer with an HTTP status (the engine's own refusal) is thrown
 * as it came.
 */
export async function answered<T>(call: (abortSignal: AbortSignal) => Promise<T>, address: string, ms = ENGINE_ANSWER_MS, runtime: "docker" | "swarm" = "docker"): Promise<T> {
  try {
    return await within(call, ms);
  } catch (err) {
    if (engineStatus(err) !== undefined) throw err;
    throw new DriverError("runtime.unavailable", engineDownMessage(runtime, address, (err as Error).message));
  }
}

/** Swallows the engine errors with these HTTP statuses (a missing container or service, one already stopped). */
export function ignore(...statuses: number[]): (err: unknown) => void {
  return (err) => {
    if (!statuses.includes(engineStatus(err) ?? -1)) throw err;
  };
}

/**
 * The catch of a log read (`GET /containers/{id}/logs`, `/services/{id}/logs`):
 * gone (404) reads as no log; an engine that answered but keeps nothing it can
 * read back (a log driver without reading, such as `none`) is
 * `slot.log_unreadable`, in the engine's words; anything else (no answer) as it was.
 */
export function logUnread(name: string, command: string): (err: unknown) => undefined {
  return (err) => {
    if (engineStatus(err) === 404) return undefined;
    if (engineStatus(err) !== undefined) throw new DriverError("slot.log_unreadable", `the engine cannot read back ${name}'s log: ${String((err as Error).message).replace(/^\(HTTP code \d+\) [a-z ]+- /, "").trim()} (its log driver keeps no copy the engine reads; ${command} ${name} says the same)`);
    throw err;
  };
}

/** What `POST /containers/{id}/wait` needs of a container. */
export interface Waitable {
  wait(options: { condition: "not-running"; abortSignal: AbortSignal }): Promise<{ StatusCode?: number }>;
}

/**
 * Settles when the (started) container is not running, with its exit code, as a runner's
 * exit (what `waitHealthy` races against). The engine answers a wait for a
 * container that is gone with an error: that is an exit too (code null). An
 * aborted wait never settles: nobody is waiting any more.
 */
export function whenExited(container: Waitable, signal: AbortSignal): Promise<RunnerExit> {
  return container.wait({ condition: "not-running", abortSignal: signal }).then(
    (result) => ({ code: typeof result?.StatusCode === "number" ? result.StatusCode : null, signal: null }),
    () => (signal.aborted ? new Promise<RunnerExit>(() => {}) : { code: null, signal: null }),
  );
}

export function exitNote(exit: RunnerExit): string {
  return exit.code === null && exit.signal === null ? "stopped or vanished (the engine could not say how)" : describeExit(exit);
}

/** hal0's own runner image is built locally; any other image is the operator's to build, load or pull. */
export function imageMissingMessage(image: string): string {
  const build = image.startsWith("hal0-runner:") ? "build it (npm run runner-image)" : "build or load it (docker build, docker load)";
  return `image ${image} is not present; ${build} or set [slots] pull = true`;
}

/** Why hal0 will not touch the container that holds a slot's name. */
export function notOursMessage(name: string, labels: Readonly<Record<string, string>> | null | undefined, box: string): string {
  const owner = labels?.[LABEL.managed] !== "true"
    ? "it carries no hal0 labels"
    : labels[LABEL.box] !== box
      ? `it belongs to box ${labels[LABEL.box] ?? "(none)"}, not ${box}`
      : `its ${LABEL.slot} label is ${labels[LABEL.slot] ?? "(none)"}`;
  return `slot ${name}: a container named ${containerName(name)} already exists and is not this box's slot (${owner}); hal0 leaves it alone: remove or rename it`;
}
