import { randomUUID } from "node:crypto";
import { EventEmitter } from "node:events";
import type Dockerode from "dockerode";
import type { Model } from "../compiler/index.js";
import { builtLocally, engineAddress, imageFacts, imageStallMs, profileImages, pullImage, type ImageFacts, type NamedImage, type PullProgress } from "../reconciler/images.js";
import type { BoxService } from "./box.js";
import { ApiError } from "./errors.js";
import { callerName } from "./pulls/service.js";
import type { Caller } from "./route.js";
import { findSlot } from "./slot-view.js";

/** A pull of one runner image, as replies and events show it. */
export interface ImagePullView {
  readonly id: string;
  readonly image: string;
  readonly state: "pulling" | "done" | "failed";
  /** `operator:<name>`, or the agent whose approved request this runs (`approved_by` names the operator). */
  readonly requested_by: string;
  readonly approved_by: string | null;
  readonly started_at: string;
  readonly finished_at: string | null;
  readonly progress: PullProgress;
  /** The image id the reference named before and after the pull. */
  readonly before: string | null;
  readonly after: string | null;
  /** The pull moved the reference to another image (its slots re-plan: `image digest changed`); null while it runs. */
  readonly changed: boolean | null;
  readonly error: { readonly code: "image.pull_failed"; readonly message: string } | null;
}

/** An image a sync did not pull, and why. */
export interface SkippedImage {
  readonly image: string;
  readonly reason: string;
}

export interface ImagePullsOptions {
  readonly box: BoxService;
  /** Where `$DOCKER_HOST` is read (the server's environment). */
  readonly env: Readonly<Record<string, string | undefined>>;
  readonly now?: () => number;
}

/** Finished pulls kept for the list (the newest); a live one is never dropped. */
const KEEP_FINISHED = 50;
/** At most one progress event per pull this often while the engine's status line stays the same (state changes are always sent). */
const PROGRESS_EVERY_MS = 250;
const PING_TIMEOUT_MS = 3000;

/**
 * Runner image pulls: `[slots] pull` decides whether hal0 pulls at all; each
 * pull runs at once in this process (at most one per image: asking again
 * joins the live one), through the engine the docker runtime uses, and is
 * kept in memory (a restart forgets the list; the engine keeps what it
 * pulled). `events` emits `state` and `progress` with an ImagePullView for
 * the event stream. A pull that moves a reference to another image asks
 * for a sweep: the runner probe sees the new id and the slots that run it
 * are replaced (`observed_changed: image digest changed`).
 */
export class ImagePulls {
  readonly events = new EventEmitter();
  private readonly jobs = new Map<string, ImagePullView>();
  /** Per pull, when its last progress event went out (performance.now) and the status it carried. */
  private readonly lastSent = new Map<string, { at: number; status: string | null }>();
  private client?: { address: string; docker: Dockerode };
  private closed = false;
  /** Ends the requests of the pulls under way when the server closes (an open request to the engine kept the process alive). */
  private readonly stop = new AbortController();

  constructor(private readonly o: ImagePullsOptions) {
    this.events.setMaxListeners(0);
  }

  /** The engine `[slots] docker_host`, else `$DOCKER_HOST`, else the default socket names, answering; else 503 `image.engine_unavailable`. */
  async engine(model?: Model): Promise<Dockerode> {
    return (await this.connect(model)).docker;
  }

  private async connect(model?: Model): Promise<{ address: string; docker: Dockerode }> {
    const settings = (model ?? (await this.o.box.model())).settings;
    const address = engineAddress(settings.slots.docker_host, this.o.env);
    try {
      if (this.client?.address !== address) {
        const { dockerClient } = await import("../reconciler/drivers/docker.js");
        this.client = { address, docker: dockerClient(address) };
      }
      const client = this.client;
      let timer: NodeJS.Timeout | undefined;
      await Promise.race([client.docker.ping(), new Promise((_, reject) => (timer = setTimeout(() => reject(new Error(`no answer in ${PING_TIMEOUT_MS / 1000} s`)), PING_TIMEOUT_MS)))]).finally(() => clearTimeout(timer));
      return client;
    } catch (err) {
      throw new ApiError("image.engine_unavailable", `no Docker engine answers at ${address} (${(err as Error).message}); start it, or set [slots] docker_host or DOCKER_HOST`, { address });
    }
  }

  /** Each image the profiles name, with what the engine holds of it. */
  async images(): Promise<{ model: Model; engine: string; images: Array<NamedImage & ImageFacts> }> {
    const model = await this.o.box.model();
    const { address, docker } = await this.connect(model);
    const named = profileImages(model);
    const facts = await Promise.all(named.map((n) => imageFacts(docker, n.image)));
    return { model, engine: address, images: named.map((n, i) => ({ ...n, ...facts[i]! })) };
  }

  /** `[slots] pull = true`, and an engine that answers: what every pull needs (checked before a request is queued, and when it runs). */
  async precheck(model?: Model): Promise<Model> {
    const m = model ?? (await this.o.box.model());
    if (!m.settings.slots.pull) {
      throw new ApiError("image.pull_disabled", "[slots] pull = false: hal0 pulls no image; set pull = true under [slots] in hal0.toml to allow runner_image_sync and slot_pull_image", { setting: "slots.pull" });
    }
    await this.engine(m);
    return m;
  }

  /** The image a slot's profile names; 404 `slot.not_found`, 409 `image.not_named` when its profile names none. */
  slotImage(model: Model, name: string): string {
    const slot = findSlot(model, name);
    const image = model.profiles[slot.profile]?.image;
    if (image === undefined) throw new ApiError("image.not_named", `slot \`${name}\`'s profile \`${slot.profile}\` names no image: there is nothing to pull`, { slot: name, profile: slot.profile });
    return image;
  }

  /** Pulls every image the profiles name, but those built here (nothing to pull them from). */
  async sync(caller: Caller): Promise<{ pulls: ImagePullView[]; skipped: SkippedImage[] }> {
    await this.precheck();
    const { images } = await this.images();
    const skipped = images.filter(builtLocally).map((i) => ({ image: i.image, reason: "built or loaded on this engine (no registry digest): there is nothing to pull it from" }));
    const pulls = images.filter((i) => !builtLocally(i)).map((i) => this.start(i.image, caller));
    return { pulls, skipped };
  }

  /** Pulls the image of one slot's profile. */
  async pullSlot(name: string, caller: Caller): Promise<ImagePullView> {
    const model = await this.o.box.model();
    const image = this.slotImage(model, name);
    await this.precheck(model);
    return this.start(image, caller);
  }

  /** Every pull this process ran or runs, newest first. */
  list(): ImagePullView[] {
    return [...this.jobs.values()].reverse();
  }

  /** The newest pull of `image`, if any. */
  latest(image: string): ImagePullView | null {
    return this.list().find((j) => j.image === image) ?? null;
  }

  /**
   * Stops reporting and ends the pulls under way (their requests to the engine; the engine stops pulling, keeping the layers
   * it has for the next pull); called when the server closes, so that a pull never keeps a stopped `hal0 serve` running.
   */
  close(): void {
    this.closed = true;
    this.stop.abort();
    this.events.removeAllListeners();
  }

  /** A live pull of `image` (joined), or a new one, started now. */
  private start(image: string, caller: Caller): ImagePullView {
    const live = this.list().find((j) => j.image === image && j.state === "pulling");
    if (live !== undefined) return live;
    const job: ImagePullView = {
      id: randomUUID(), image, state: "pulling",
      requested_by: callerName(caller), approved_by: caller.approvedBy ?? (caller.kind === "operator" ? callerName(caller) : null),
      started_at: this.iso(), finished_at: null,
      progress: { status: null, layers: 0, layers_done: 0, bytes_done: 0, bytes_total: 0 },
      before: null, after: null, changed: null, error: null,
    };
    this.put(job, "state");
    void this.run(job);
    return job;
  }

  private async run(first: ImagePullView): Promise<void> {
    let job = first;
    try {
      const docker = await this.engine();
      const before = await imageFacts(docker, job.image);
      job = this.put({ ...job, before: before.present ? before.id : null });
      await pullImage(docker, job.image, (progress) => {
        job = this.put({ ...job, progress }, this.due(job.id, progress.status) ? "progress" : undefined);
      }, imageStallMs(this.o.env), this.stop.signal);
      const after = await imageFacts(docker, job.image);
      const afterId = after.present ? after.id : null;
      if (afterId === null) throw new Error(`the engine finished the pull, but ${job.image} is not present`);
      const changed = job.before !== afterId;
      job = this.put({ ...job, state: "done", after: afterId, changed, finished_at: this.iso() }, "state");
      // The runner probe sees the new id on the next sweep: the slots that run this image are replaced.
      if (changed) this.o.box.nudge();
    } catch (err) {
      const message = String((err as Error)?.message ?? err).trim();
      this.put({ ...job, state: "failed", finished_at: this.iso(), error: { code: "image.pull_failed", message: `pulling ${job.image} failed: ${message}` } }, "state");
    }
  }

  /** Stores the job's new view (keeping its place in the list) and emits it. */
  private put(job: ImagePullView, event?: "state" | "progress"): ImagePullView {
    this.jobs.set(job.id, job);
    if (event === "progress") this.lastSent.set(job.id, { at: performance.now(), status: job.progress.status });
    if (event !== undefined && !this.closed) this.events.emit(event, job);
    if (event === "state" && job.state !== "pulling") this.trim();
    return job;
  }

  /** A progress event is due when the engine's status line changed, else at most every PROGRESS_EVERY_MS. */
  private due(id: string, status: string | null): boolean {
    const last = this.lastSent.get(id);
    // On the monotonic clock: a wall clock set back (NTP, `date -s`) would hold the events back for as long as its step.
    return last === undefined || last.status !== status || performance.now() - last.at >= PROGRESS_EVERY_MS;
  }

  private trim(): void {
    const finished = [...this.jobs.values()].filter((j) => j.state !== "pulling");
    for (const j of finished.slice(0, Math.max(0, finished.length - KEEP_FINISHED))) {
      this.jobs.delete(j.id);
      this.lastSent.delete(j.id);
    }
  }

  private iso(): string {
    return new Date((this.o.now ?? Date.now)()).toISOString();
  }
}
