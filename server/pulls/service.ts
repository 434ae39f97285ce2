import { existsSync } from "node:fs";
import { stat } from "node:fs/promises";
import { basename, dirname, isAbsolute, join } from "node:path";
import type { Model } from "../../compiler/index.js";
import type { ChangeSet } from "../../compiler/changeset.js";
import { editModelEdits, modelTableEdit } from "../../compiler/edits/models.js";
import { configPath, modelFiles, splitParts, storeDir } from "../../reconciler/host/model-scan.js";
import { HubClient, HubError, type HubFile } from "../../reconciler/host/hf-hub.js";
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

/** Registers a pulled model (or, for an update, edits its facts): one ChangeSet on models.toml, through the pipeline, by `system:pull` on behalf of whoever approved the pull. */
export type RegisterPulled = (job: PullJob, entry: Record<string, unknown>, onBehalfOf: string) => Promise<void>;

export interface PullServiceOptions {
  readonly db: Db;
  readonly box: BoxService;
  /** HF_ENDPOINT and HF_TOKEN are read from here, at each pull. */
  readonly env: Readonly<Record<string, string | undefined>>;
  readonly register: RegisterPulled;
  readonly now?: () => number;
  /** A CLI command's service beside a `hal0 serve` (PullWorkerOptions.guest). */
  readonly guest?: boolean;
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
  /** Aborted by close(): Hub calls in flight (a search, a listing, a precheck) end at once, so a stopping serve does not wait for them. */
  readonly #stop = new AbortController();

  constructor(private readonly o: PullServiceOptions) {
    this.store = new PullStore(o.db, o.now);
    this.worker = new PullWorker({
      store: this.store,
      hub: () => this.hub(),
      parallel: () => o.box.lastSettings()?.models.pull_parallel ?? 2,
      register: (job) => this.register(job),
      stale: (job) => this.stale(job),
      now: o.now,
      guest: o.guest,
    });
  }

  hub(): HubClient {
    return HubClient.fromEnv(this.o.env, this.#stop.signal);
  }

  /** hal0 serve is stopping: the downloads stop (they resume at the next start) and Hub calls in flight are given up. */
  close(): void {
    this.worker.close();
    this.#stop.abort();
  }

  /** The checks a pull meets before it is queued, and again when an approved one runs: names, the id, the repo and file on the Hub, the store. */
  async precheck(id: string, req: PullRequest): Promise<{ hf_filename: string; dest: string; extras: PullExtra[]; sha256: string | null }> {
    checkHubFilename(req.hf_filename, "hf_filename");
    if (req.draft_filename !== undefined) checkHubFilename(req.draft_filename, "draft_filename");
    if (req.mmproj_filename !== undefined) checkHubFilename(req.mmproj_filename, "mmproj_filename");
    const model = await this.o.box.model();
    if (model.models[id] !== undefined) throw new ApiError("model.already_exists", `model ${id} is already registered; pull it under another id (--id)`, { model_id: id });
    this.notLive(id);
    const hub = this.hub();
    // A split model (`-00002-of-00003.gguf`) comes down whole, whichever part was named: every part, registered by the first.
    const first = splitParts(req.hf_filename)[0]!;
    const dest = storedAt(model, first);
    const want = [
      { repo: req.hf_repo, file: req.hf_filename },
      ...(req.draft_filename ? [{ repo: req.draft_repo ?? req.hf_repo, file: req.draft_filename }] : []),
      ...(req.mmproj_filename ? [{ repo: req.hf_repo, file: req.mmproj_filename }] : []),
    ];
    // The listing's entry of each file: its LFS sha256 (what the download must hash to when its reply carries none) and size.
    const listedFiles = new Map<string, HubFile>();
    let parts: PullExtra[] = [];
    for (const repo of new Set(want.map((w) => w.repo))) {
      const info = await hub.repoInfo(repo, repo === req.hf_repo ? req.revision ?? "main" : "main").catch((err: unknown): never => {
        if (err instanceof HubError && err.code === "model.not_found") throw repoNotFound(hub, repo, repo === req.hf_repo ? req.revision ?? "main" : "main");
        // A repo id or revision the client refuses to send (`a..b`, a name over 96 characters, `a//b`): the request's fault, as model_inspect says.
        if (err instanceof HubError && err.code === "validation.invalid") {
          const field = / is not a revision$/.test(err.message) ? "revision" : repo === req.hf_repo ? "hf_repo" : "draft_repo";
          throw new ApiError("validation.invalid", err.message, { fields: [{ loc: ["body", field], msg: err.message, type: "value_error" }] });
        }
        throw hubFailure(err, hub, repo);
      });
      for (const w of want.filter((x) => x.repo === repo)) {
        const listed = info.files.find((f) => f.path === w.file);
        if (listed === undefined) throw new ApiError("model.not_found", `${repo} has no file ${w.file}`, { hf_repo: repo, hf_filename: w.file });
        listedFiles.set(`${repo}\n${w.file}`, listed);
      }
      if (repo !== req.hf_repo) continue;
      const lookup = (file: string) => info.files.find((f) => f.path === file);
      parts = otherParts(repo, first, dest, lookup, req.hf_filename);
      const head = lookup(first);
      if (head !== undefined) listedFiles.set(`${repo}\n${first}`, head);
    }
    const listed = (repo: string, file: string) => listedFiles.get(`${repo}\n${file}`)?.sha256 ?? null;
    const sizeOf = (repo: string, file: string) => listedFiles.get(`${repo}\n${file}`)?.size ?? null;
    const extras: PullExtra[] = [...parts];
    if (req.draft_filename) extras.push({ role: "draft", hf_repo: req.draft_repo ?? req.hf_repo, hf_filename: req.draft_filename, dest: storedAt(model, req.draft_filename), sha256: listed(req.draft_repo ?? req.hf_repo, req.draft_filename), size: sizeOf(req.draft_repo ?? req.hf_repo, req.draft_filename) });
    if (req.mmproj_filename) extras.push({ role: "mmproj", hf_repo: req.hf_repo, hf_filename: req.mmproj_filename, dest: storedAt(model, req.mmproj_filename), sha256: listed(req.hf_repo, req.mmproj_filename), size: sizeOf(req.hf_repo, req.mmproj_filename) });
    // The files of one pull land side by side under their base names: two of them with one name (a/m.gguf and b/m.gguf), or one named as another's
    // `.partial`, would write into one file, and the registry would record one file's sha256 for the other's bytes.
    const mine = [{ field: "hf_filename", name: first, path: dest }, ...extras.map((e) => ({ field: e.role === "part" ? "hf_filename" : `${e.role}_filename`, name: e.hf_filename, path: e.dest }))];
    for (const [i, a] of mine.entries()) {
      for (const b of mine.slice(i + 1)) {
        if (!clash(a.path, b.path)) continue;
        throw new ApiError("validation.invalid", `${a.field} ${JSON.stringify(a.name)} and ${b.field} ${JSON.stringify(b.name)} would both be stored as ${a.path === b.path ? a.path : `${a.path} / ${b.path}`} (the store keeps base names, and a download goes to <file>.partial); pull one of them under another id`, {
          fields: [a, b].map((x) => ({ loc: ["body", x.field], msg: `stored at ${x.path}, as is ${x === a ? b.field : a.field}`, type: "value_error" })),
        });
      }
    }
    this.free(id, mine.map((m) => m.path));
    return { hf_filename: first, dest, extras, sha256: listed(req.hf_repo, first) };
  }

  /** Refuses an id a pull under way holds (model.already_exists). */
  private notLive(id: string): void {
    const live = this.store.get(id);
    if (live !== undefined && isLive(live)) throw new ApiError("model.already_exists", `a pull of model ${id} is already ${live.state}`, { model_id: id, state: live.state });
  }

  /**
   * Refuses files the store holds, or another pull under way writes. No
   * await in it: `start` runs it again right before it creates the job, so
   * two requests whose prechecks awaited the Hub side by side cannot both
   * pass and download into one file.
   */
  private free(id: string, paths: readonly string[]): void {
    const others = this.store.live().filter((j) => j.model_id !== id);
    for (const path of paths) {
      if (existsSync(path)) throw new ApiError("model.file_exists", `${path} already exists in the store; register it (POST /api/models/add-from-path, the MCP tool model_add), or remove it first`, { path });
      // Another pull under way writes it, or its .partial is this file, or this one's .partial is its file: two downloads into one file would corrupt both.
      for (const j of others) {
        const theirs = [j.dest, ...j.extras.map((e) => e.dest)].find((d) => clash(d, path));
        if (theirs !== undefined) throw new ApiError("model.file_exists", theirs === path ? `${path} is being pulled as model ${j.model_id} (${j.state}); wait for it, or cancel it first` : `${path} and ${theirs}, being pulled as model ${j.model_id} (${j.state}), would share a file (one is the other's .partial, where a download's bytes go); wait for it, or cancel it first`, { path, model_id: j.model_id, ...(theirs === path ? {} : { other: theirs }) });
      }
    }
  }

  /**
   * The change a finished pull of `req` as model `id` registers — its path in
   * the store, its Hub names, its drafter and projector — as an agent's call
   * is judged by it (the header facts the registration adds describe the
   * file). Planned only: no Hub call, nothing queued.
   */
  async registration(id: string, req: PullRequest): Promise<ChangeSet> {
    const model = await this.o.box.model();
    const stored = (file: string) => configPath(model.root, storedAt(model, file));
    const first = splitParts(req.hf_filename)[0]!;
    const entry: Record<string, unknown> = {
      path: stored(first), hf_repo: req.hf_repo, hf_filename: first,
      ...(req.draft_filename ? { draft: stored(req.draft_filename) } : {}), ...(req.mmproj_filename ? { mmproj: stored(req.mmproj_filename) } : {}),
    };
    // The draft's and the projector's Hub files too (a draft may come from another repository, at its main): models.toml records only where they land, so a card reads their source here.
    const beside = [
      ...(req.draft_filename ? [`its draft ${req.draft_repo ?? req.hf_repo} ${req.draft_filename}`] : []),
      ...(req.mmproj_filename ? [`its projector ${req.hf_repo} ${req.mmproj_filename}`] : []),
    ];
    // A revision other than main is named too: `refs/pr/N` is a pull request's, which anyone may open on a public repository.
    const at = req.revision !== undefined && req.revision !== "main" ? ` at revision ${req.revision}` : "";
    return { edits: [modelTableEdit(id, entry)], summary: `pull ${req.hf_repo} ${req.hf_filename}${at}${beside.length > 0 ? ` with ${beside.join(" and ")}` : ""} into the store and register it as model ${id}` };
  }

  /** Queues a pull (after precheck) and starts it when there is room. */
  async start(id: string, req: PullRequest, caller: Caller): Promise<PullView> {
    const { hf_filename, dest, extras, sha256 } = await this.precheck(id, req);
    // Checked again with nothing awaited before the job is created: another request for this id or these files may have passed its precheck meanwhile.
    this.notLive(id);
    this.free(id, [dest, ...extras.map((e) => e.dest)]);
    const job = this.store.create({
      model_id: id, mode: "pull", hf_repo: req.hf_repo, hf_filename, revision: req.revision ?? "main", dest, extras, sha256,
      requested_by: callerName(caller), approved_by: caller.approvedBy ?? (caller.kind === "operator" ? callerName(caller) : null),
    });
    this.worker.pump(id);
    return this.worker.view(this.store.get(job.model_id) ?? job);
  }

  /**
   * What the Hub holds now for each model pulled from it (`hf_repo` and
   * `hf_filename`): its sha256 and commit beside the recorded ones. A model
   * without a recorded sha256 (registered by hand) is compared by size.
   */
  async updates(only?: string): Promise<UpdateRow[]> {
    const model = await this.o.box.model();
    // An id models.toml lacks is said, as model_health_check says it: an empty list would read as "no update" for a typo.
    if (only !== undefined && model.models[only] === undefined) throw new ApiError("model.not_found", `no model ${only} in models.toml`, { model_id: only, known: Object.keys(model.models) });
    const hub = this.hub();
    const rows: UpdateRow[] = [];
    for (const m of Object.values(model.models)) {
      if (only !== undefined && m.id !== only) continue;
      if (!m.hf_repo || !m.hf_filename) continue;
      const local = { revision: m.revision ?? null, sha256: m.sha256 ?? null, size_bytes: m.size_bytes ?? null };
      try {
        rows.push(updateRow(m as HubModel, await hub.repoInfo(m.hf_repo, "main")));
      } catch (err) {
        rows.push({ id: m.id, hf_repo: m.hf_repo, hf_filename: m.hf_filename, local, hub: null, update_available: false, reason: (err as Error).message });
      }
    }
    return rows;
  }

  /** The checks an update meets before it is queued (and again when an approved one runs). */
  async precheckUpdate(id: string): Promise<{ dest: string; row: UpdateRow; parts: PullExtra[] }> {
    const model = await this.o.box.model();
    const m = model.models[id];
    if (m === undefined) throw new ApiError("model.not_found", `no model ${id} in models.toml`, { model_id: id });
    if (!m.hf_repo || !m.hf_filename || !m.path_abs) throw new ApiError("validation.invalid", `model ${id} was not pulled from the Hub (it needs hf_repo, hf_filename and a path)`, { fields: [{ loc: ["params", "model_id"], msg: "not a Hub model", type: "value_error" }] });
    this.notLive(id);
    const hub = this.hub();
    // A Hub that refuses access, or does not answer, is said as a pull's checks say it (model.hub_denied, model.hub_unreachable), not as a file it lacks.
    const info = await hub.repoInfo(m.hf_repo, "main").catch((err: unknown): never => {
      throw hubFailure(err, hub, m.hf_repo!, (e) => new ApiError("model.not_found", `${m.hf_repo}/${m.hf_filename} is not on ${hub.endpoint}: ${e.message}`, { hf_repo: m.hf_repo, hf_filename: m.hf_filename }));
    });
    const row = updateRow(m as HubModel, info);
    if (row.hub === null) throw new ApiError("model.not_found", `${m.hf_repo}/${m.hf_filename} is not on ${hub.endpoint}: ${row.reason}`, { hf_repo: m.hf_repo, hf_filename: m.hf_filename });
    if (!row.update_available) throw new ApiError("model.up_to_date", `model ${id} is up to date with ${m.hf_repo} (${row.reason})`, { model_id: id, ...row });
    // A split model's file is its first part: the others come down with it, each verified, all renamed over the old ones together.
    const parts = otherParts(m.hf_repo, m.hf_filename, m.path_abs, (file) => info.files.find((f) => f.path === file));
    return { dest: m.path_abs, row, parts };
  }

  /**
   * The change a finished update of model `id` commits — the commit of the
   * Hub's main as its revision, the new file's sha256 and size — as an agent's
   * call is judged by it: which commit a model's bytes come from is a
   * person's call, as the same revision set through model_edit is. Planned
   * only: the Hub is asked what it holds (as the precheck asks), nothing queued.
   */
  async updateChange(id: string): Promise<ChangeSet> {
    const { row } = await this.precheckUpdate(id);
    const hub = row.hub!;
    const facts = { revision: hub.revision, ...(hub.sha256 !== null ? { sha256: hub.sha256 } : {}), size_bytes: hub.size_bytes };
    return { edits: editModelEdits(id, facts).edits, summary: `update model ${id} to the Hub's ${row.hf_repo} ${row.hf_filename} at its main (commit ${hub.revision})` };
  }

  /** Queues an update: the file is downloaded beside itself, verified, renamed over the old one, and the model's facts edited (one ChangeSet). */
  async startUpdate(id: string, caller: Caller): Promise<PullView> {
    const { dest, row, parts } = await this.precheckUpdate(id);
    const m = (await this.o.box.model()).models[id]!;
    // Again with nothing awaited before the job is created: another update of this model may have passed its precheck meanwhile.
    this.notLive(id);
    this.store.create({
      model_id: id, mode: "update", hf_repo: m.hf_repo!, hf_filename: m.hf_filename!, revision: "main", dest, extras: parts, sha256: row.hub?.sha256 ?? null,
      requested_by: callerName(caller), approved_by: caller.approvedBy ?? (caller.kind === "operator" ? callerName(caller) : null),
    });
    this.worker.pump(id);
    return this.status(id);
  }

  /**
   * Installs a model models.toml names with `hf_repo` and `hf_filename` but
   * whose file is not here (`hal0 apply` with `[models] pull_on_apply`): the
   * file is pulled to its `path` (else into the store) and the entry gains
   * path, revision and sha256 — one change, like an update. A sha256 the
   * entry records already (a part's in `parts`) is what the bytes must hash
   * to: other bytes fail the pull (reason checksum), nothing placed.
   */
  async startInstall(id: string, caller: Caller): Promise<PullView> {
    const model = await this.o.box.model();
    const m = model.models[id];
    if (m === undefined || !m.hf_repo || !m.hf_filename) throw new ApiError("model.not_found", `no Hub model ${id} in models.toml`, { model_id: id });
    checkHubFilename(m.hf_filename, "hf_filename");
    const live = this.store.get(id);
    if (live !== undefined && isLive(live)) return this.worker.view(live);
    const dest = m.path_abs ?? storedAt(model, m.hf_filename);
    // A split model with a part missing is not installed: its set is pulled again, every part renamed over the ones here.
    if (modelFiles(dest).every((f) => existsSync(f))) throw new ApiError("model.file_exists", `${dest} already exists: model ${id} is installed`, { path: dest });
    // A sha256 the entry records (and each part's, in `parts`) is what the bytes must hash to: the pin holds whatever the Hub serves now.
    const recorded = (file: string) => m.parts?.find((p) => p.file === basename(file));
    this.store.create({
      model_id: id, mode: "update", hf_repo: m.hf_repo, hf_filename: m.hf_filename, revision: m.revision ?? "main", dest, sha256: m.sha256 ?? null,
      extras: otherParts(m.hf_repo, m.hf_filename, dest).map((part) => ({ ...part, sha256: recorded(part.hf_filename)?.sha256 ?? null })),
      requested_by: callerName(caller), approved_by: caller.approvedBy ?? (caller.kind === "operator" ? callerName(caller) : null),
    });
    this.worker.pump(id);
    return this.status(id);
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

  /** Why the model an update (an install) was queued for is not that model now: removed, or another path or Hub file; undefined while it is. */
  private async stale(job: PullJob): Promise<string | undefined> {
    const model = await this.o.box.model();
    const m = model.models[job.model_id];
    const why = (what: string) => `model ${job.model_id} ${what} while its update downloaded; nothing is replaced and the download is removed (check for updates again)`;
    if (m === undefined) return why("was removed from models.toml");
    const now = { hf_repo: m.hf_repo ?? null, hf_filename: m.hf_filename ?? null, path: m.path_abs ?? (m.hf_filename ? storedAt(model, m.hf_filename) : null) };
    const was = { hf_repo: job.hf_repo, hf_filename: job.hf_filename, path: job.dest };
    const moved = (Object.keys(was) as Array<keyof typeof was>).filter((k) => now[k] !== was[k]).map((k) => `${k} ${was[k]} → ${now[k] ?? "(none)"}`);
    return moved.length > 0 ? why(`was edited (${moved.join(", ")})`) : undefined;
  }

  private async register(job: PullJob): Promise<void> {
    const model = await this.o.box.model();
    if (job.mode === "update") {
      // size_bytes is the model's file's own (a split model's first part), as a registration reads it from the file; the job's size counts every file of the pull.
      const size = await stat(job.dest).then((st) => st.size, () => undefined);
      const entry = { path: configPath(model.root, job.dest), ...(job.commit_sha ? { revision: job.commit_sha } : {}), ...(job.sha256 ? { sha256: job.sha256 } : {}), ...(size ? { size_bytes: size } : {}), ...partsOf(job) };
      await this.o.register(job, entry, job.approved_by ?? job.requested_by);
      return;
    }
    const path = (abs: string) => configPath(model.root, abs);
    const entry: Record<string, unknown> = {
      path: path(job.dest), hf_repo: job.hf_repo, hf_filename: job.hf_filename,
      ...(job.commit_sha ? { revision: job.commit_sha } : {}), ...(job.sha256 ? { sha256: job.sha256 } : {}), ...partsOf(job),
    };
    for (const e of job.extras) if (e.role !== "part") entry[e.role] = path(e.dest);
    await this.o.register(job, entry, job.approved_by ?? job.requested_by);
  }
}

/** A split model's other parts as models.toml records them (`parts`: each one's file name beside the first, sha256 and size, as the pull verified them); nothing for one file. */
function partsOf(job: PullJob): { parts?: Array<Record<string, unknown>> } {
  const parts = job.extras.filter((e) => e.role === "part").map((e) => ({ file: basename(e.dest), ...(e.sha256 ? { sha256: e.sha256 } : {}), ...(typeof e.size === "number" ? { size_bytes: e.size } : {}) }));
  return parts.length > 0 ? { parts } : {};
}

/** A model pulled from the Hub: one with hf_repo and hf_filename. */
type HubModel = Model["models"][string] & { hf_repo: string; hf_filename: string };

/** The row of `model_update_check` for `m`, from the Hub's listing of its repository. */
function updateRow(m: HubModel, info: Awaited<ReturnType<HubClient["repoInfo"]>>): UpdateRow {
  const local = { revision: m.revision ?? null, sha256: m.sha256 ?? null, size_bytes: m.size_bytes ?? null };
  const file = info.files.find((f) => f.path === m.hf_filename);
  if (file === undefined) return { id: m.id, hf_repo: m.hf_repo, hf_filename: m.hf_filename, local, hub: null, update_available: false, reason: "the file is no longer in the repository" };
  const remote = { revision: info.sha, sha256: file.sha256, size_bytes: file.size };
  // Each file by its recorded sha256, else its recorded size: the model's file, and a split model's other parts (`parts`), any of which may change alone.
  const differs = (rec: { sha256?: string | null; size_bytes?: number | null }, hub: HubFile) => (rec.sha256 ?? null) !== null && hub.sha256 !== null ? rec.sha256 !== hub.sha256 : (rec.size_bytes ?? null) !== null && rec.size_bytes !== hub.size;
  const changed = differs(local, file) ? [m.hf_filename] : [];
  for (const part of splitParts(m.hf_filename).filter((p) => p !== m.hf_filename)) {
    const there = info.files.find((f) => f.path === part);
    const recorded = m.parts?.find((r) => r.file === basename(part));
    if (there !== undefined && recorded !== undefined && differs(recorded, there)) changed.push(part);
  }
  const update = changed.length > 0;
  const reason = !update ? (local.sha256 === null && local.size_bytes === null ? "nothing recorded to compare (no sha256, no size)" : "up to date")
    : changed.length === 1 && changed[0] === m.hf_filename ? "the Hub's file differs from the recorded one" : `the Hub's ${changed.join(", ")} ${changed.length === 1 ? "differs" : "differ"} from the recorded ${changed.length === 1 ? "one" : "ones"}`;
  return { id: m.id, hf_repo: m.hf_repo, hf_filename: m.hf_filename, local, hub: remote, update_available: update, changed, reason };
}

/** 404 model.not_found for a repository the Hub does not answer for: at a revision other than main, the revision may be what it lacks, so it is named too. */
export function repoNotFound(hub: HubClient, repo: string, revision: string): ApiError {
  if (revision === "main") return new ApiError("model.not_found", `no model repository ${repo} on ${hub.endpoint}`, { hf_repo: repo });
  return new ApiError("model.not_found", `no model repository ${repo}, or no revision ${revision} of it, on ${hub.endpoint}`, { hf_repo: repo, revision });
}

/**
 * A Hub call's failure as the routes say it: a refused access is
 * model.hub_denied, any other Hub error model.hub_unreachable; `notFound`
 * says a repository the Hub does not have (as the caller names it). Anything
 * else is returned as it is.
 */
function hubFailure(err: unknown, hub: HubClient, repo: string, notFound?: (e: HubError) => ApiError): unknown {
  if (!(err instanceof HubError)) return err;
  if (err.code === "model.not_found" && notFound !== undefined) return notFound(err);
  if (err.code === "hub.denied") return new ApiError("model.hub_denied", err.message, { endpoint: hub.endpoint, hf_repo: repo, status: err.status });
  return new ApiError("model.hub_unreachable", err.message, { endpoint: hub.endpoint });
}

/** One row of `model_update_check`. */
export interface UpdateRow {
  readonly id: string;
  readonly hf_repo: string;
  readonly hf_filename: string;
  readonly local: { revision: string | null; sha256: string | null; size_bytes: number | null };
  readonly hub: { revision: string; sha256: string | null; size_bytes: number } | null;
  readonly update_available: boolean;
  /** The files the Hub holds otherwise than recorded (the model's file, a split model's other parts); empty when none, or unknown. */
  readonly changed?: readonly string[];
  readonly reason: string;
}

export { storeDir };

/** Where the store keeps a pulled Hub file: under its base name, in the box's model store. */
function storedAt(model: Parameters<typeof storeDir>[0], file: string): string {
  return join(storeDir(model), basename(file));
}

/**
 * The other parts of the split model whose `file` (its first part) lands at
 * `dest`, each beside it under its base name (none for a file that is not
 * split). With the Hub's listing (`listed`), each carries its sha256, and a
 * part the listing lacks is model.split_incomplete (`asked`: the part the
 * request named, in its details).
 */
function otherParts(repo: string, file: string, dest: string, listed?: (file: string) => HubFile | undefined, asked = file): PullExtra[] {
  const others = splitParts(file).filter((p) => p !== file);
  const missing = listed === undefined ? [] : splitParts(file).filter((p) => listed(p) === undefined);
  if (missing.length > 0) throw new ApiError("model.split_incomplete", `${repo} lacks ${missing.join(", ")}, of the parts of ${file} (a split model is loaded from all of its parts, so none is pulled)`, { hf_repo: repo, hf_filename: asked, parts: splitParts(file), missing });
  return others.map((p) => ({ role: "part", hf_repo: repo, hf_filename: p, dest: join(dirname(dest), basename(p)), sha256: listed?.(p)?.sha256 ?? null, size: listed?.(p)?.size ?? null }));
}

/** Two destinations that would share a file: the same path, or one is the other's `.partial` (where its bytes go while they download). */
function clash(a: string, b: string): boolean {
  return a === b || a === `${b}.partial` || b === `${a}.partial`;
}

/** `<kind>:<name>` of a caller (`anonymous` alone), as pulls record who asked. */
export function callerName(caller: Caller): string {
  return caller.kind === "anonymous" ? "anonymous" : `${caller.kind}:${caller.agent}`;
}
