import { existsSync } from "node:fs";
import { basename, isAbsolute, join, posix, relative } from "node:path";
import type { Model } from "../../compiler/index.js";
import { HubClient, HubError } from "../../reconciler/host/hf-hub.js";
import type { BoxService } from "../box.js";
import type { Db } from "../db.js";
import { ApiError } from "../errors.js";
import type { Caller } from "../route.js";
import { isLive, PullStore, type PullExtra, type PullJob } from "./store.js";
import { PullWorker, type PullView } from "./worker.js";

/**
 * Model pulls for the routes: checks a pull before it is queued (and again
 * when an approved one runs), turns it into a durable job, and registers a
 * finished one through the ChangeSet pipeline as `system:pull`.
 */

/** What a pull asks for (`POST /api/models/{model_id}/pull`). */
export interface PullRequest {
  readonly hf_repo: string;
  readonly hf_filename: string;
  readonly revision?: string;
  readonly draft_repo?: string;
  readonly draft_filename?: string;
  readonly mmproj_filename?: string;
}

/** Registers a pulled model: one ChangeSet on models.toml, through the pipeline, by `system:pull` on behalf of whoever approved the pull. */
export type RegisterPulled = (job: PullJob, entry: Record<string, unknown>, onBehalfOf: string) => Promise<void>;

export interface PullServiceOptions {
  readonly db: Db;
  readonly box: BoxService;
  /** HF_ENDPOINT and HF_TOKEN are read from here, at each pull. */
  readonly env: Readonly<Record<string, string | undefined>>;
  readonly register: RegisterPulled;
  readonly now?: () => number;
}

/** A Hub file name: relative, `/`-separated segments, no `..`, no scheme. */
export function checkHubFilename(name: string, field: string): void {
  const bad = name.length === 0 || name.length > 512 || isAbsolute(name) || name.startsWith("/") || name.includes("\\") || /^[a-z][a-z0-9+.-]*:/i.test(name)
    || name.split("/").some((seg) => seg === "" || seg === "." || seg === "..") || /[\u0000-\u001f]/.test(name);
  if (bad) throw new ApiError("validation.invalid", `${field} must be a file path inside the repository (no "..", no absolute path, no URL)`, { fields: [{ loc: ["body", field], msg: "not a path inside the repository", type: "value_error" }] });
}

export class PullService {
  readonly store: PullStore;
  readonly worker: PullWorker;

  constructor(private readonly o: PullServiceOptions) {
    this.store = new PullStore(o.db, o.now);
    this.worker = new PullWorker({
      store: this.store,
      hub: () => this.hub(),
      parallel: () => o.box.lastSettings()?.models.pull_parallel ?? 2,
      register: (job) => this.register(job),
      now: o.now,
    });
  }

  hub(): HubClient {
    return HubClient.fromEnv(this.o.env);
  }

  /** The checks a pull meets before it is queued, and again when an approved one runs: names, the id, the repo and file on the Hub, the store. */
  async precheck(id: string, req: PullRequest): Promise<{ dest: string; extras: PullExtra[] }> {
    checkHubFilename(req.hf_filename, "hf_filename");
    if (req.draft_filename !== undefined) checkHubFilename(req.draft_filename, "draft_filename");
    if (req.mmproj_filename !== undefined) checkHubFilename(req.mmproj_filename, "mmproj_filename");
    const model = await this.o.box.model();
    if (model.models[id] !== undefined) throw new ApiError("model.already_exists", `model ${id} is already registered; pull it under another id (--id)`, { model_id: id });
    const live = this.store.get(id);
    if (live !== undefined && isLive(live)) throw new ApiError("model.already_exists", `a pull of model ${id} is already ${live.state}`, { model_id: id, state: live.state });
    const hub = this.hub();
    const want = [
      { repo: req.hf_repo, file: req.hf_filename },
      ...(req.draft_filename ? [{ repo: req.draft_repo ?? req.hf_repo, file: req.draft_filename }] : []),
      ...(req.mmproj_filename ? [{ repo: req.hf_repo, file: req.mmproj_filename }] : []),
    ];
    for (const repo of new Set(want.map((w) => w.repo))) {
      const info = await hub.repoInfo(repo, repo === req.hf_repo ? req.revision ?? "main" : "main").catch((err: unknown): never => {
        if (err instanceof HubError && err.code === "model.not_found") throw new ApiError("model.not_found", `no model repository ${repo} on ${hub.endpoint}`, { hf_repo: repo });
        if (err instanceof HubError) throw new ApiError("model.hub_unreachable", err.message, { endpoint: hub.endpoint });
        throw err;
      });
      for (const w of want.filter((x) => x.repo === repo)) {
        if (!info.files.some((f) => f.path === w.file)) throw new ApiError("model.not_found", `${repo} has no file ${w.file}`, { hf_repo: repo, hf_filename: w.file });
      }
    }
    const store = storeDir(model);
    const dest = join(store, basename(req.hf_filename));
    const extras: PullExtra[] = [];
    if (req.draft_filename) extras.push({ role: "draft", hf_repo: req.draft_repo ?? req.hf_repo, hf_filename: req.draft_filename, dest: join(store, basename(req.draft_filename)) });
    if (req.mmproj_filename) extras.push({ role: "mmproj", hf_repo: req.hf_repo, hf_filename: req.mmproj_filename, dest: join(store, basename(req.mmproj_filename)) });
    for (const path of [dest, ...extras.map((e) => e.dest)]) {
      if (existsSync(path)) throw new ApiError("model.file_exists", `${path} already exists in the store; register it with model_add, or remove it first`, { path });
    }
    return { dest, extras };
  }

  /** Queues a pull (after precheck) and starts it when there is room. */
  async start(id: string, req: PullRequest, caller: Caller): Promise<PullView> {
    const { dest, extras } = await this.precheck(id, req);
    const job = this.store.create({
      model_id: id, hf_repo: req.hf_repo, hf_filename: req.hf_filename, revision: req.revision ?? "main", dest, extras,
      requested_by: callerName(caller), approved_by: caller.approvedBy ?? (caller.kind === "operator" ? callerName(caller) : null),
    });
    this.worker.pump();
    return this.worker.view(this.store.get(job.model_id) ?? job);
  }

  status(id: string): PullView {
    const job = this.store.get(id);
    if (job === undefined) throw new ApiError("model.pull_not_found", `no pull of model ${id}`, { model_id: id });
    return this.worker.view(job);
  }

  list(): PullView[] {
    return this.store.list().map((j) => this.worker.view(j));
  }

  async cancel(id: string): Promise<PullView> {
    const job = this.status(id);
    if (!isLive(job)) throw new ApiError("model.pull_not_live", `the pull of model ${id} is ${job.state}; only a queued or downloading pull can be cancelled`, { model_id: id, state: job.state });
    await this.worker.cancel(id);
    return this.status(id);
  }

  /** Forgets an ended pull (its row); a live one is cancelled first. The downloaded file, when registered, stays. */
  async remove(id: string): Promise<{ deleted: string; was: string }> {
    const job = this.status(id);
    if (isLive(job)) await this.worker.cancel(id);
    this.store.delete(id);
    return { deleted: id, was: job.state };
  }

  private async register(job: PullJob): Promise<void> {
    const model = await this.o.box.model();
    const path = (abs: string) => relativeIfInside(model.root, abs);
    const entry: Record<string, unknown> = {
      path: path(job.dest), hf_repo: job.hf_repo, hf_filename: job.hf_filename,
      ...(job.commit_sha ? { revision: job.commit_sha } : {}), ...(job.sha256 ? { sha256: job.sha256 } : {}),
    };
    for (const e of job.extras) entry[e.role] = path(e.dest);
    await this.o.register(job, entry, job.approved_by ?? job.requested_by);
  }
}

/** Where pulls land: `[models] store`, else the first of `[models] roots` (relative to the config folder). */
export function storeDir(model: Model): string {
  const dir = model.settings.models.store || model.settings.models.roots[0] || "models";
  return isAbsolute(dir) ? dir : join(model.root, dir);
}

function relativeIfInside(root: string, abs: string): string {
  const rel = relative(root, abs);
  return rel.startsWith("..") || isAbsolute(rel) ? abs : rel.split(/[\\/]/).join(posix.sep);
}

function callerName(caller: Caller): string {
  return caller.kind === "anonymous" ? "anonymous" : `${caller.kind}:${caller.agent}`;
}
