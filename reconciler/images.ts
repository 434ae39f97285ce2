import type Dockerode from "dockerode";
import type { Model } from "../compiler/index.js";
import { engineStatus } from "./drivers/docker-engine.js";
import { envSecondsMs } from "./env-seconds.js";

/**
 * Runner images: the images the profiles name, what the engine holds of each,
 * and pulling one with its progress. Read and pulled for the operator
 * (`runner_image_*`, `slot_pull_*`); the plan learns an image's digest
 * through the runner probe (`observed.image_digest`), never from here.
 */

/** The engine hal0 uses when neither `[slots] docker_host` nor `$DOCKER_HOST` names one. */
export const DEFAULT_DOCKER_HOST = "unix:///var/run/docker.sock";

/** The docker engine's address: `[slots] docker_host`, else `$DOCKER_HOST`, else the default socket. */
export function engineAddress(dockerHost: string, env: Readonly<Record<string, string | undefined>>): string {
  return dockerHost || env.DOCKER_HOST || DEFAULT_DOCKER_HOST;
}

/** One image the profiles name: which profiles name it, and which enabled slots run it. */
export interface NamedImage {
  readonly image: string;
  readonly profiles: readonly string[];
  readonly slots: readonly string[];
}

/** Every image a profile names (seeds included), sorted, with its profiles and the enabled slots whose profile it is. */
export function profileImages(model: Model): NamedImage[] {
  const byImage = new Map<string, { profiles: string[]; slots: string[] }>();
  for (const name of Object.keys(model.profiles).sort()) {
    const image = model.profiles[name]!.image;
    if (image === undefined) continue;
    const entry = byImage.get(image) ?? { profiles: [], slots: [] };
    entry.profiles.push(name);
    byImage.set(image, entry);
  }
  for (const slot of Object.values(model.slots).sort((a, b) => (a.name < b.name ? -1 : 1))) {
    const image = model.profiles[slot.profile]?.image;
    if (slot.enabled && image !== undefined) byImage.get(image)!.slots.push(slot.name);
  }
  return [...byImage.keys()].sort().map((image) => ({ image, ...byImage.get(image)! }));
}

/** What the engine holds under an image reference. */
export type ImageFacts =
  | { readonly present: false }
  | {
      readonly present: true;
      /** The local image id (`sha256:…`, the digest of its config): what a slot's `observed.image_digest` holds. */
      readonly id: string;
      /** `repo@sha256:…` per registry it was pulled from or pushed to; empty for an image built or loaded here. */
      readonly repo_digests: readonly string[];
      /** The registry manifest digest of this reference's repository (`sha256:…`), null when it never came from a registry. */
      readonly digest: string | null;
      readonly size_bytes: number;
      /** When the image was built (ISO). */
      readonly created: string;
    };

/** `docker image inspect` of `ref`: its id, registry digests, size and build time, or `present: false`. Engine errors other than 404 throw. */
export async function imageFacts(docker: Dockerode, ref: string): Promise<ImageFacts> {
  let info: Dockerode.ImageInspectInfo;
  try {
    info = await docker.getImage(ref).inspect();
  } catch (err) {
    if (engineStatus(err) === 404) return { present: false };
    throw err;
  }
  const repoDigests = [...(info.RepoDigests ?? [])].sort();
  const repo = repositoryOf(ref);
  const own = repoDigests.find((d) => d.slice(0, d.lastIndexOf("@")) === repo);
  return {
    present: true, id: info.Id, repo_digests: repoDigests, digest: own === undefined ? null : own.slice(own.lastIndexOf("@") + 1),
    size_bytes: info.Size, created: new Date(info.Created).toISOString(),
  };
}

/** A reference's repository: without its tag or digest (`127.0.0.1:5000/a/b:1` → `127.0.0.1:5000/a/b`). */
export function repositoryOf(ref: string): string {
  const at = ref.indexOf("@");
  const name = at >= 0 ? ref.slice(0, at) : ref;
  const colon = name.lastIndexOf(":");
  return colon > name.lastIndexOf("/") ? name.slice(0, colon) : name;
}

/**
 * A reference the engine has that never came from a registry under its name
 * (built, loaded or tagged here): there is nothing to pull it from. Judged
 * by the reference's own repository: an image built here and also pushed
 * or pulled under another name is still local under this one.
 */
export function builtLocally(facts: ImageFacts): boolean {
  return facts.present && facts.digest === null;
}

/** Where a pull stands, summed over its layers from the engine's progress messages. */
export interface PullProgress {
  /** The engine's last status line (`Pulling from hal0/fake`, `Downloading`, `Digest: sha256:…`, `Status: Downloaded newer image for …`). */
  readonly status: string | null;
  readonly layers: number;
  readonly layers_done: number;
  readonly bytes_done: number;
  readonly bytes_total: number;
}

/** One message of the engine's pull stream (`POST /images/create`). */
interface PullMessage {
  readonly status?: string;
  readonly id?: string;
  readonly progressDetail?: { readonly current?: number; readonly total?: number };
  readonly error?: string;
  readonly errorDetail?: { readonly message?: string };
}

/** The statuses after which a layer is on the engine. */
const LAYER_DONE = new Set(["Pull complete", "Already exists"]);
const LAYER_ID = /^[0-9a-f]{12}$/;

/** A pull the engine reports nothing of for this long is given up (HAL0_IMAGE_STALL_S). */
export const IMAGE_STALL_MS = 120_000;

/** HAL0_IMAGE_STALL_S: seconds a pull may go without a word from the engine (default 120). */
export function imageStallMs(env: Readonly<Record<string, string | undefined>>): number {
  return envSecondsMs(env.HAL0_IMAGE_STALL_S, IMAGE_STALL_MS);
}

/**
 * Pulls `ref` through the engine, calling `onProgress` with the running sum
 * after each message. Resolves when the engine has finished; rejects with
 * the engine's own message when it refuses (unknown repository or tag, a
 * registry that does not answer), including the errors it reports inside the
 * stream rather than as an HTTP status (a registry that fails a layer with
 * 500 or drops mid-layer: the stream then ends as a finished one would, and
 * the reference still names the image it named before, if any). The engine waits on a registry that
 * takes the connection and never answers for ever, saying nothing: a pull
 * with no message for `stallMs` is given up (its request to the engine ends).
 * An aborted `signal` ends the request as well.
 */
export async function pullImage(docker: Dockerode, ref: string, onProgress: (p: PullProgress) => void, stallMs = IMAGE_STALL_MS, signal?: AbortSignal): Promise<void> {
  const layers = new Map<string, { done: boolean; current: number; total: number }>();
  let status: string | null = null;
  const sum = (): PullProgress => {
    let bytesDone = 0;
    let bytesTotal = 0;
    let done = 0;
    for (const l of layers.values()) {
      bytesDone += l.done ? Math.max(l.current, l.total) : l.current;
      bytesTotal += l.total;
      if (l.done) done++;
    }
    return { status, layers: layers.size, layers_done: done, bytes_done: bytesDone, bytes_total: bytesTotal };
  };
  const stop = new AbortController();
  let timer: NodeJS.Timeout | undefined;
  let giveUp!: (err: Error) => void;
  const stalled = new Promise<never>((_, reject) => (giveUp = reject));
  const rearm = () => {
    clearTimeout(timer);
    timer = setTimeout(() => {
      giveUp(new Error(`the engine reported nothing for ${stallMs / 1000} s (a registry that takes the connection and does not answer); the pull was given up (HAL0_IMAGE_STALL_S)`));
      stop.abort();
    }, stallMs);
  };
  rearm();
  // `signal` (its caller going away) ends the request to the engine too, which ends the engine's pull.
  const abort = signal === undefined ? stop.signal : AbortSignal.any([signal, stop.signal]);
  // The engine reports a pull that fails after it began (a registry answering 500, a connection dropped mid-layer, a
  // layer that does not verify) inside its stream, as a message with `error`, and then ends the stream as if done.
  let failed: string | undefined;
  const work = (async () => {
    signal?.throwIfAborted();
    const stream = (await docker.pull(ref, { abortSignal: abort })) as NodeJS.ReadableStream;
    rearm();
    await new Promise<void>((resolve, reject) => {
      docker.modem.followProgress(
        stream,
        (err: Error | null) => (err ? reject(err) : failed !== undefined ? reject(new Error(failed)) : resolve()),
        (m: PullMessage) => {
          rearm();
          if (m.error !== undefined || m.errorDetail?.message !== undefined) {
            failed ??= String(m.errorDetail?.message ?? m.error).trim();
            return;
          }
          if (m.status !== undefined) status = m.status;
          if (m.id !== undefined && LAYER_ID.test(m.id)) {
            const layer = layers.get(m.id) ?? { done: false, current: 0, total: 0 };
            if (m.status === "Downloading" && m.progressDetail) {
              layer.current = m.progressDetail.current ?? layer.current;
              layer.total = m.progressDetail.total ?? layer.total;
            }
            if (m.status !== undefined && LAYER_DONE.has(m.status)) layer.done = true;
            layers.set(m.id, layer);
          }
          onProgress(sum());
        },
      );
    });
  })();
  // Whichever loses the race is settled here, never unhandled.
  work.catch(() => {});
  stalled.catch(() => {});
  // Aborted, the pull is over at once, whether or not the engine's stream says so.
  const onAbort = () => giveUp(new Error("the pull was stopped"));
  signal?.addEventListener("abort", onAbort, { once: true });
  try {
    await Promise.race([work, stalled]);
  } finally {
    clearTimeout(timer);
    signal?.removeEventListener("abort", onAbort);
  }
}
