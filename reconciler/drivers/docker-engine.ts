import { LABEL, containerName } from "./docker-container.js";
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

/** Swallows the engine errors with these HTTP statuses (a missing container or service, one already stopped). */
export function ignore(...statuses: number[]): (err: unknown) => void {
  return (err) => {
    if (!statuses.includes(engineStatus(err) ?? -1)) throw err;
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
