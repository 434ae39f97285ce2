import { createHash, type Hash } from "node:crypto";
import { EventEmitter } from "node:events";
import { createReadStream, createWriteStream, existsSync } from "node:fs";
import { link, mkdir, open, rename, stat, truncate, unlink } from "node:fs/promises";
import { dirname } from "node:path";
import { inspectGguf } from "../../reconciler/host/gguf-facts.js";
import { GgufError } from "../../reconciler/host/gguf.js";
import type { HubClient } from "../../reconciler/host/hf-hub.js";
import { isLive, type PullExtra, type PullFailure, type PullJob, type PullStore } from "./store.js";

/**
 * Runs the pulls: at most `parallel()` download at once, the rest wait
 * queued. Each file goes to `<dest>.partial` beside the store, hashed while
 * it downloads (sha256, never a second pass), and is renamed into place only
 * when the hash equals the Hub's LFS oid. A restart resumes a partial file
 * with a Range request from where its bytes end (the bytes already there are
 * hashed once, from disk). A finished pull registers the model through the
 * one ChangeSet pipeline (`register`, given by the composition root).
 */

/** Why a pull stopped short: becomes the job's `reason`. */
export class PullError extends Error {
  constructor(readonly reason: PullFailure, message: string) {
    super(message);
  }
}

/** What the events stream and `model_pull_status` show of a job, with its rate and ETA. */
export interface PullView extends PullJob {
  /** Bytes per second over the last few seconds (null when not downloading). */
  readonly rate: number | null;
  /** Seconds left at that rate (null when unknown). */
  readonly eta_s: number | null;
}

export interface PullWorkerOptions {
  readonly store: PullStore;
  /** The Hub client (HF_ENDPOINT, HF_TOKEN) each pull uses. */
  readonly hub: () => HubClient;
  /** `[models] pull_parallel` as the tree says now. */
  readonly parallel: () => number;
  /** Registers a downloaded model (one ChangeSet); throws when the change is refused. */
  readonly register: (job: PullJob) => Promise<void>;
  /** Why an update's (an install's) model is no longer the one it was queued for (edited or removed meanwhile); undefined while it is. Asked before its files are placed. */
  readonly stale?: (job: PullJob) => Promise<string | undefined>;
  readonly now?: () => number;
  /**
   * A CLI command's worker on a state folder a `hal0 serve` may own (`hal0
   * model pull`, `hal0 agent approvals`): it runs only the pulls this process
   * queued or took over, never the serve's queued ones.
   */
  readonly guest?: boolean;
}

/** How often a serve looks for pulls another process left under way (a `hal0 model pull` that was stopped). */
export const ADOPT_MS = 5000;

/** How often a downloading job's row and its listeners hear of new bytes. */
const PROGRESS_MS = 250;
/** A downloading file is flushed to disk every this many bytes, while the download goes on. */
const FLUSH_BYTES = 32 * 1024 * 1024;
/** The rate is measured over this window. */
const RATE_WINDOW_MS = 5000;

export class PullWorker {
  /** `progress` and `state` events, each with a PullView. */
  readonly events = new EventEmitter();
  private readonly running = new Map<string, { abort: AbortController; cancelled: boolean; samples: Array<[number, number]>; ended: Promise<void> }>();
  private closed = false;
  /** A guest's own pulls: the ones it queued or took over. */
  private readonly mine = new Set<string>();
  private adoptTimer: NodeJS.Timeout | undefined;
  private readonly now: () => number;

  constructor(private readonly o: PullWorkerOptions) {
    this.now = o.now ?? Date.now;
    this.events.setMaxListeners(0);
  }

  /** After a restart: every job that was live is queued again (downloading ones resume from their partial file). */
  resume(): void {
    for (const job of this.o.store.live()) if (job.state !== "queued") this.o.store.update(job.model_id, { state: "queued" });
    this.pump();
  }

  /** One live job nobody works on (a `hal0 model pull` that was interrupted) queued again: it resumes from its partial file. False when it is not live or runs here. */
  resumeOne(id: string): boolean {
    const job = this.o.store.get(id);
    if (job === undefined || !isLive(job) || this.running.has(id)) return false;
    if (job.state !== "queued") this.o.store.update(id, { state: "queued" });
    this.pump(id);
    return true;
  }

  /**
   * The serve's: every ADOPT_MS, a pull the database says is downloading
   * that no download here works on, while no `hal0 model pull` holds the
   * state folder (`mayAdopt`), was left by a command that stopped: it is
   * queued again and resumes from its partial file.
   */
  adoptOrphans(mayAdopt: () => Promise<boolean>): void {
    clearInterval(this.adoptTimer);
    this.adoptTimer = setInterval(() => void this.adopt(mayAdopt), ADOPT_MS);
    this.adoptTimer.unref();
  }

  private async adopt(mayAdopt: () => Promise<boolean>): Promise<void> {
    if (this.closed) return;
    const left = this.o.store.list("downloading").filter((j) => !this.running.has(j.model_id));
    if (left.length === 0 || !(await mayAdopt())) return;
    for (const job of left) {
      const now = this.o.store.get(job.model_id);
      if (now?.state === "downloading" && !this.running.has(job.model_id)) this.o.store.update(job.model_id, { state: "queued" });
    }
    this.pump();
  }

  /** Starts queued jobs while there is room; `id`: a job this process queued (a guest runs only those). */
  pump(id?: string): void {
    if (id !== undefined) this.mine.add(id);
    if (this.closed) return;
    const room = this.o.parallel() - this.running.size;
    const queued = this.o.store.list("queued").filter((j) => !this.running.has(j.model_id) && (!this.o.guest || this.mine.has(j.model_id)));
    for (const job of queued.slice(0, Math.max(0, room))) void this.run(job);
  }

  view(job: PullJob): PullView {
    const live = this.running.get(job.model_id);
    const rate = live && job.state === "downloading" ? rateOf(live.samples) : null;
    const left = job.size !== null ? job.size - job.bytes : null;
    return { ...job, rate, eta_s: rate && left !== null && rate > 0 ? Math.ceil(left / rate) : null };
  }

  /** Cancels a live job: its download stops, its partial files are removed; resolves once the job has ended (so its state is the one after). False when it is not live. */
  async cancel(id: string): Promise<boolean> {
    const job = this.o.store.get(id);
    if (job === undefined || !isLive(job)) return false;
    const live = this.running.get(id);
    if (live !== undefined) {
      live.cancelled = true;
      live.abort.abort();
      await live.ended;
    } else {
      await removePartials(job);
      this.emit("state", this.o.store.update(id, { state: "cancelled", finished_at: this.iso() }) ?? { ...job, state: "cancelled" });
    }
    return true;
  }

  /** Stops the downloads without cancelling them (hal0 serve is stopping): they resume at the next start. */
  close(): void {
    this.closed = true;
    clearInterval(this.adoptTimer);
    for (const live of this.running.values()) live.abort.abort();
  }

  private async run(queued: PullJob): Promise<void> {
    const id = queued.model_id;
    let ended!: () => void;
    const live = { abort: new AbortController(), cancelled: false, samples: [] as Array<[number, number]>, ended: new Promise<void>((r) => (ended = r)) };
    this.running.set(id, live);
    /** The job as written, or as known here once another process has forgotten its row (the run then ends, and says how, all the same). */
    const save = (patch: Partial<PullJob>): PullJob => this.o.store.update(id, patch) ?? { ...job, ...patch };
    let job: PullJob = queued;
    job = save({ state: "downloading", reason: null, error: null });
    this.emit("state", job);
    /** Files this run renamed into place (a pull of a new model only): a later file that fails (or a cancel) removes them too, so a retry does not meet model.file_exists. */
    const placed: string[] = [];
    try {
      const hub = this.o.hub();
      // The other parts of a split model: llama.cpp loads the first and reads them from beside it, so no part is placed until every one is verified.
      const parts = job.extras.filter((e) => e.role === "part");
      // The job's size and bytes count every file of the pull (each part of a split model, the draft, the projector): the listing's sizes
      // from the precheck, each replaced by its download's own once it answers; `done` is the bytes of the files already fetched whole.
      const sizes = new Map<string, number>(job.extras.flatMap((e) => (typeof e.size === "number" ? [[e.dest, e.size] as const] : [])));
      let done = 0;
      const progressOf = (dest: string, own: boolean) => (patch: Partial<PullJob>): void => {
        if (typeof patch.size === "number") sizes.set(dest, patch.size);
        // The model's file's reply names the commit and its sha256; another file's only adds to the counts.
        const counted: Partial<PullJob> = { ...(own ? patch : {}), ...(typeof patch.size === "number" && sizes.has(job.dest) ? { size: sum(sizes.values()) } : {}), ...(patch.bytes !== undefined ? { bytes: done + patch.bytes } : {}) };
        if (Object.keys(counted).length === 0) return;
        const row = this.o.store.update(id, counted);
        // Cancelled or forgotten by another process (the serve, of a pull this command runs): it stops here as a cancel does.
        if (row === undefined || row.state === "cancelled") {
          live.cancelled = true;
          live.abort.abort();
          return;
        }
        job = row;
        this.emit("progress", job);
      };
      // An update (or an install) replaces the model's files; a new model's never takes the place of a file that is there.
      const replace = job.mode === "update";
      // A split model's parts, and an update's files, are placed together once all are verified (an update only while its model is as it was queued).
      const together = parts.length > 0 || replace;
      const main = await this.fetchFile(hub, { repo: job.hf_repo, revision: job.revision, file: job.hf_filename, dest: job.dest, listed: job.sha256, place: !together, replace, offset: done }, live, progressOf(job.dest, true));
      done += main.size;
      if (job.mode === "pull" && !together) placed.push(job.dest);
      const extras: PullExtra[] = [];
      const fetchExtra = async (extra: PullExtra, place: boolean): Promise<void> => {
        // From the model's repo at the model's commit; from another repo (draft_repo) at its main.
        const revision = extra.hf_repo === job.hf_repo ? (job.commit_sha ?? job.revision) : "main";
        const got = await this.fetchFile(hub, { repo: extra.hf_repo, revision, file: extra.hf_filename, dest: extra.dest, listed: extra.sha256 ?? null, place, replace, offset: done }, live, progressOf(extra.dest, false));
        done += got.size;
        if (job.mode === "pull" && place) placed.push(extra.dest);
        extras.push({ ...extra, sha256: got.sha256, size: got.size, bytes: got.size });
      };
      for (const part of parts) await fetchExtra(part, false);
      if (together) {
        // A person's edit of the model (its path, its Hub file) or its removal while the update downloaded wins: nothing is replaced.
        const stale = replace ? await this.o.stale?.(job) : undefined;
        if (stale !== undefined) throw new PullError("model_changed", stale);
        // Every part verified: all of them renamed into place together (a failure part way removes the ones placed).
        for (const dest of [job.dest, ...parts.map((p) => p.dest)]) {
          await placeFile(`${dest}.partial`, dest, replace);
          if (job.mode === "pull") placed.push(dest);
        }
      }
      for (const extra of job.extras) if (extra.role !== "part") await fetchExtra(extra, true);
      job = save({ state: "verifying", commit_sha: main.commit ?? job.commit_sha, sha256: main.sha256, size: done, bytes: done, extras });
      this.emit("state", job);
      try {
        await this.o.register(job);
      } catch (err) {
        throw new PullError("register", `${job.dest} was downloaded and verified but could not be registered (it stays in the store, unregistered): ${(err as Error).message}`);
      }
      this.emit("state", save({ state: "done", finished_at: this.iso() }));
    } catch (err) {
      const unplace = async () => {
        for (const path of placed) await unlink(path).catch(() => undefined);
      };
      if (live.cancelled) {
        await removePartials(job);
        if (!(err instanceof PullError && err.reason === "register")) await unplace();
        this.emit("state", save({ state: "cancelled", finished_at: this.iso() }));
      } else if (this.closed && live.abort.signal.aborted) {
        // hal0 is stopping: the job stays downloading and resumes at the next start.
      } else {
        const reason = err instanceof PullError ? err.reason : diskFailure(err) ?? "network";
        // A refused token keeps them too: the next try, with access granted, resumes; so does a file found in the way (verified, to be placed once it is moved).
        if (reason !== "register") await removePartials(job, reason === "network" || reason === "denied" || reason === "file_exists");
        // A network failure keeps the partial file it broke off in, to resume; the whole files before it go too (they are fetched again).
        if (reason !== "register") await unplace();
        this.emit("state", save({ state: "failed", reason, error: (err as Error).message, finished_at: this.iso() }));
      }
    } finally {
      this.running.delete(id);
      ended();
      this.pump();
    }
  }

  /**
   * Downloads one file to `<dest>.partial` (resuming it), hashing as it goes;
   * renames it into place (unless `place` is false) when its sha256 is the Hub's: the reply's
   * x-linked-etag, else the listing's (`listed`, from the precheck; when both
   * are there they must agree). Returns what it was.
   */
  private async fetchFile(
    hub: HubClient, t: { repo: string; revision: string; file: string; dest: string; listed: string | null; place?: boolean; replace?: boolean; offset?: number },
    live: { abort: AbortController; samples: Array<[number, number]> }, progress: (p: Partial<PullJob>) => void,
  ): Promise<{ sha256: string | null; size: number; commit: string | null }> {
    const partial = `${t.dest}.partial`;
    await mkdir(dirname(t.dest), { recursive: true });
    const from = await sizeOf(partial);
    const hash = createHash("sha256");
    if (from > 0) await hashFile(partial, hash);
    const reply = await hub.download({ repo: t.repo, revision: t.revision, file: t.file }, { from, signal: live.abort.signal }).catch((err: Error & { code?: string; status?: number }) => {
      if (err.code === "model.not_found") throw new PullError("not_found", err.message);
      if (err.code === "hub.denied") throw new PullError("denied", err.message);
      // The Range is refused (the partial file is as large as the file, or larger): it cannot be resumed, so it starts again from byte 0.
      if (err.status === 416 && from > 0) return "restart" as const;
      throw err;
    });
    if (reply === "restart" && t.listed !== null && /^[0-9a-f]{64}$/.test(t.listed) && hash.copy().digest("hex") === t.listed) {
      // The partial file is the whole file, already verified (a part of a split set kept when a later part failed): nothing left to fetch.
      progress({ sha256: t.listed, size: from, bytes: from });
      await this.finish(partial, t);
      return { sha256: t.listed, size: from, commit: null };
    }
    if (reply === "restart" || (reply.status === 200 && from > 0) || reply.total < from) {
      // The server ignored the Range request and sends the whole file, or the partial file does not fit in it: the partial one is emptied, the file fetched whole.
      if (reply !== "restart") for await (const _ of reply.body) break; // release the connection
      await truncate(partial, 0);
      return this.fetchFile(hub, t, live, progress);
    }
    const etag = reply.etag && /^[0-9a-f]{64}$/.test(reply.etag) ? reply.etag : null;
    const listed = t.listed && /^[0-9a-f]{64}$/.test(t.listed) ? t.listed : null;
    if (etag !== null && listed !== null && etag !== listed) {
      for await (const _ of reply.body) break; // release the connection
      await unlink(partial).catch(() => undefined);
      throw new PullError("checksum", `${t.repo}/${t.file}: the download says sha256 ${etag}, not ${listed} (the Hub's listing before the pull, or the sha256 models.toml records: the file changed on the Hub, or is not the one pinned); the partial file is removed`);
    }
    const expected = etag ?? listed;
    // A file the Hub keeps outside LFS has no sha256 there: its bytes are checked against its git blob id (the Hub's ETag) instead.
    const blob = expected === null && reply.gitBlob !== null ? createHash("sha1").update(`blob ${reply.total}\0`) : null;
    if (blob !== null && from > 0) await hashFile(partial, blob);
    progress({ commit_sha: reply.commit, sha256: expected, size: reply.total, bytes: from });
    let bytes = from;
    let last = 0;
    // The disk flushes while the download goes on (a datasync every FLUSH_BYTES, never two at once), so the final fsync has little left to do.
    let flushed = from;
    let flushing: Promise<void> | undefined;
    // A deep buffer: the disk writes while the next bytes arrive (a 16 KiB one would make each chunk wait for its write).
    const out = createWriteStream(partial, { flags: "a", highWaterMark: 8 * 1024 * 1024 });
    const failed = new Promise<never>((_, reject) => out.once("error", reject));
    failed.catch(() => undefined);
    try {
      for await (const chunk of reply.body) {
        // More bytes than the Hub advertised: the download stops here, before they fill the disk.
        if (bytes + chunk.length > reply.total) throw new PullError("oversized", `${t.repo}/${t.file}: the Hub sent more than the ${reply.total} bytes it advertised; the download is stopped and its partial file removed (it cannot be resumed)`);
        hash.update(chunk);
        blob?.update(chunk);
        if (!out.write(chunk)) await Promise.race([new Promise<void>((r) => out.once("drain", () => r())), failed]);
        bytes += chunk.length;
        if (flushing === undefined && bytes - flushed >= FLUSH_BYTES) {
          flushed = bytes;
          flushing = datasync(partial).finally(() => (flushing = undefined));
        }
        const t0 = this.now();
        if (t0 - last >= PROGRESS_MS) {
          last = t0;
          // The rate is the job's: measured on the bytes of all its files, so it does not drop (or turn negative) when the next file starts.
          live.samples.push([t0, (t.offset ?? 0) + bytes]);
          while (live.samples.length > 2 && live.samples[0]![0] < t0 - RATE_WINDOW_MS) live.samples.shift();
          progress({ bytes });
        }
      }
      await new Promise<void>((resolve, reject) => out.end((err?: Error | null) => (err ? reject(err) : resolve())));
      await flushing;
      await Promise.race([Promise.resolve(), failed]);
    } catch (err) {
      // The download broke off (the connection lost or silent, a cancel, hal0 stopping): the bytes received are written out
      // before the error goes on, so the partial file holds all of them and nothing lands in it after a retry has measured it.
      if (err instanceof PullError || out.errored !== null) out.destroy();
      else await new Promise<void>((resolve) => out.end(() => resolve()));
      if (err instanceof PullError) {
        await unlink(partial).catch(() => undefined);
        throw err;
      }
      if ((err as NodeJS.ErrnoException).code === "ENOSPC") throw new PullError("no_space", `the disk filled up writing ${partial} (${bytes} of ${reply.total} bytes); the partial file is removed`);
      throw err;
    }
    await fsync(partial);
    if (bytes !== reply.total) throw new PullError("network", `${t.file}: the download ended at ${bytes} of ${reply.total} bytes`);
    const sha256 = hash.digest("hex");
    if (expected !== null && sha256 !== expected) {
      await unlink(partial).catch(() => undefined);
      throw new PullError("checksum", `${t.repo}/${t.file}: sha256 ${sha256} is not the Hub's ${expected}; the file is removed`);
    }
    const blobId = blob?.digest("hex");
    if (blobId !== undefined && blobId !== reply.gitBlob) {
      await unlink(partial).catch(() => undefined);
      throw new PullError("checksum", `${t.repo}/${t.file}: git blob id ${blobId} is not the Hub's ${reply.gitBlob} (a file outside LFS, checked by its blob id); the file is removed`);
    }
    await this.finish(partial, t);
    progress({ bytes });
    return { sha256, size: bytes, commit: reply.commit };
  }

  /** A verified download: its GGUF header checked, then renamed into place (a part of a split model stays `<dest>.partial`: the caller places all the parts at once). */
  private async finish(partial: string, t: { repo: string; file: string; dest: string; place?: boolean; replace?: boolean }): Promise<void> {
    // Only a GGUF file is a model (model_add refuses anything else): checked before it is renamed into place, so an update never replaces a model with it.
    try {
      await inspectGguf(partial);
    } catch (err) {
      if (!(err instanceof GgufError)) throw err;
      await unlink(partial).catch(() => undefined);
      throw new PullError("unsupported_format", `model.unsupported_format: ${t.repo}/${t.file} is not a readable GGUF file (${err.reason}: ${err.message}); the file is removed`);
    }
    if (t.place !== false) await placeFile(partial, t.dest, t.replace === true);
  }

  private emit(kind: "state" | "progress", job: PullJob): void {
    this.events.emit(kind, this.view(job));
  }

  private iso(): string {
    return new Date(this.now()).toISOString();
  }
}

/**
 * A failure of the store's disk rather than of the network (a file system call's error carries the path it was given): no_space
 * for a full disk, store for one hal0 cannot write there (a file where a folder should be, no permission, a read-only disk).
 */
function diskFailure(err: unknown): PullFailure | undefined {
  const e = err as Partial<NodeJS.ErrnoException> | null;
  if (e?.code === "ENOSPC") return "no_space";
  return typeof e?.path === "string" && typeof e.syscall === "string" ? "store" : undefined;
}

function sum(values: Iterable<number>): number {
  let n = 0;
  for (const v of values) n += v;
  return n;
}

/** Bytes per second between the oldest and newest sample of the window. */
function rateOf(samples: ReadonlyArray<[number, number]>): number | null {
  if (samples.length < 2) return null;
  const [t0, b0] = samples[0]!;
  const [t1, b1] = samples[samples.length - 1]!;
  return t1 > t0 ? Math.round(((b1 - b0) * 1000) / (t1 - t0)) : null;
}

async function sizeOf(path: string): Promise<number> {
  return stat(path).then((s) => s.size, () => 0);
}

/** Feeds a file's bytes to `hash` (the bytes a resumed download already has; a store migration's copy). */
export async function hashFile(path: string, hash: Hash): Promise<void> {
  for await (const chunk of createReadStream(path)) hash.update(chunk as Buffer);
}

/** Flushes a file's written bytes to disk (best effort: a failure here is caught by the final fsync). */
async function datasync(path: string): Promise<void> {
  const fh = await open(path, "r").catch(() => undefined);
  if (fh === undefined) return;
  try {
    await fh.datasync();
  } catch {
    // the final fsync reports it
  } finally {
    await fh.close();
  }
}

/** Flushes a file to disk (data and metadata) before it is renamed into place. */
export async function fsync(path: string): Promise<void> {
  const fh = await open(path, "r");
  try {
    await fh.sync();
  } finally {
    await fh.close();
  }
}

/**
 * Renames a verified download into place. With `replace` false (a new
 * model's file) a file there is never replaced: one a person put there while
 * the pull ran stays, and the pull fails with reason file_exists, its
 * verified partial file kept (pulled again once the file is moved away, it
 * is taken as downloaded). The file is linked, then its partial name
 * removed, so nothing can slip in between a look and the rename; a file
 * system without hard links is looked at, then renamed.
 */
async function placeFile(partial: string, dest: string, replace: boolean): Promise<void> {
  if (replace) return rename(partial, dest);
  const inTheWay = () => new PullError("file_exists", `${dest} was put there while it was pulled, and a pull does not replace a file; it is left as it is, the verified download kept as ${partial}: move that file away and pull again to use it`);
  try {
    await link(partial, dest);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === "EEXIST") throw inTheWay();
    if (code !== "EPERM" && code !== "ENOTSUP" && code !== "EOPNOTSUPP" && code !== "ENOSYS" && code !== "EMLINK") throw err;
    if (existsSync(dest)) throw inTheWay();
    return rename(partial, dest);
  }
  await unlink(partial);
}

/** Removes a job's partial files (`keepForResume`: a network failure keeps them, so a retry resumes). */
async function removePartials(job: PullJob, keepForResume = false): Promise<void> {
  if (keepForResume) return;
  for (const dest of [job.dest, ...job.extras.map((e) => e.dest)]) await unlink(`${dest}.partial`).catch(() => undefined);
}
