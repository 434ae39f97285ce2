import { mkdir, rm } from "node:fs/promises";
import { parse as parseToml } from "smol-toml";
import { basename, dirname, join } from "node:path";
import { packageRoot } from "../reconciler/package-root.js";
import { applyChangeSet, ChangeSetError, movedFiles, revisionFiles, type AppliedChangeSet, type ChangeSet } from "../compiler/changeset.js";
import { checkChange } from "../compiler/change-checks.js";
import { Locator } from "../compiler/locate.js";
import { compile, ConfigNotFoundError, hashOf, MAX_DIAGNOSTICS, readTreeFile, startsWithBom, type CompileResult, type Model, type SourceTree } from "../compiler/index.js";
import { removeStaleTemps } from "../reconciler/atomic.js";
import { acquireCommitLock, CommitLockedError } from "../reconciler/lock.js";
import { longLivedAbort } from "../reconciler/drivers/driver.js";
import { refuseEmptied } from "../reconciler/sweep.js";
import { isTreeFileName, TREE_FOLDERS, TreeCache } from "../reconciler/tree-cache.js";
import { watchFolders, type FolderWatch } from "../reconciler/tree-watch.js";
import { compileWithRunners, runnerErrors } from "../reconciler/runner-observe.js";
import type { RunnerProbe } from "../reconciler/runner-probe.js";
import { linkTarget, observe, planChanges, replaceFileKeeping, StateStore, type HermesCredentials, type Inventory, type Observed, type ObservedSlot, type PortAnswers, type SlotDriver } from "../reconciler/index.js";
import { slotOfFile, type Diagnostic, type Plan } from "../schema/index.js";
import type { Db } from "./db.js";
import { ApiError, apiErrorOf } from "./errors.js";
import { MASK, maskedOverValues, redactToml } from "./redact.js";
import { Mutex } from "./mutex.js";

export interface BoxServiceOptions {
  readonly root: string;
  readonly stateDir: string;
  readonly db: Db;
  /** The runtime for a model (the composition root decides docker or process). */
  readonly driverFor: (model: Model) => Promise<SlotDriver>;
  /** Asks the reconcile loop for a sweep (after a commit, a reload). */
  readonly nudge?: () => void;
  /** The agent tokens hal0 hands on to Hermes profiles (observed as fingerprints; written by hermes_sync). */
  readonly hermesCredentials?: HermesCredentials;
  readonly now?: () => number;
  /**
   * Where a file hal0 creates points its `#:schema` line (`<dir>/<kind>.schema.json`):
   * by default this package's own `schema/json/`, so the line works whatever
   * the tree's other files say (or whether they have one at all).
   */
  readonly schemaDir?: string;
  /** Learns each runner's flag table: every write's plan (and the snapshot) is compiled with the runners' facts. Without it every runner is unprobed. */
  readonly runners?: RunnerProbe;
  /** Told of a commit's after-effect (`onCommit`) that failed once the files were written: the commit stands (the server logs it). */
  readonly onAfterEffectError?: (name: string, err: unknown) => void;
}

/** Several proposals made at one moment (an inbox render re-planning each pending request): what their observations share. */
export interface ObservePass {
  readonly portHolders: PortAnswers;
}

/** A new pass: nothing asked yet. */
export function observePass(): ObservePass {
  return { portHolders: new WeakMap() };
}

/** The tree as it is on disk now. `model` is absent when it does not compile. */
export interface Snapshot {
  readonly tree: SourceTree;
  readonly model?: Model;
  readonly diagnostics: readonly Diagnostic[];
  readonly revision: string;
  readonly files: Readonly<Record<string, string>>;
}

/**
 * The text of the tree's file `file`; undefined when the tree has no such
 * file. A file hal0 could not read (nor its folder, nor the config folder) is
 * not absent: 422 `config.invalid`, naming why, so no read says "there is no
 * such file" of one that is there.
 */
export function treeFileText(snap: Pick<Snapshot, "tree" | "diagnostics">, file: string): string | undefined {
  const text = snap.tree.files.get(file);
  if (text !== undefined) return text;
  const folder = dirname(file);
  const unread = snap.diagnostics.filter((d) => d.code === "config.read_error" && (d.file === file || d.file === folder || d.file === "."));
  if (unread.length > 0) throw new ApiError("config.invalid", `${file} cannot be known: ${unread.map((d) => `${d.file}: ${d.detail}`).join("; ")}`, { diagnostics: unread });
  return undefined;
}

/**
 * The tree's file `file` as a TOML document (undefined when absent, as {@link treeFileText}). A text that does
 * not parse (a hand edit the tree does not compile with) is 422 `config.invalid` naming the file, not an internal error.
 */
export function treeFileDoc(snap: Pick<Snapshot, "tree" | "diagnostics">, file: string): Record<string, unknown> | undefined {
  const text = treeFileText(snap, file);
  if (text === undefined) return undefined;
  try {
    return parseToml(text) as Record<string, unknown>;
  } catch (err) {
    throw new ApiError("config.invalid", `${file} is not valid TOML: ${(err as Error).message.split("\n")[0]}`, { file, diagnostics: snap.diagnostics.filter((d) => d.file === file) });
  }
}

/** A change set compiled and planned against the tree and the box: nothing written yet. */
export interface Proposal {
  readonly changes: ChangeSet;
  readonly snapshot: Snapshot;
  /**
   * When the tree on disk does not compile (a hand edit in progress): the last
   * one that did, which the box runs. What the change does is judged against
   * it, since committing a tree that compiles again sets all of it going.
   */
  readonly baseline?: Model;
  readonly applied: AppliedChangeSet;
  readonly model: Model;
  readonly plan: Plan;
  /** The plan's changes that this change set brings (not already pending on the tree as it is): what an approval card shows. */
  readonly delta: Plan["changes"];
  readonly warnings: readonly Diagnostic[];
}

/** What judging a proposal reads: the tree before (or, when it does not compile, the last one that did), after, and the files written. */
export type JudgedProposal = Pick<Proposal, "snapshot" | "baseline" | "model" | "applied" | "changes">;

/**
 * The read window: how old what a read is served from may be. A liveness
 * observation (which runners or containers run) is reused for reads started
 * within this long of when it was taken, and a watched tree is re-checked
 * (a stat of every file) at least this often in case a watcher event is
 * missed or late. A change hal0 makes itself (a commit, a sweep's or a
 * restart's step) is seen by the next read at once.
 */
export const READ_WINDOW_MS = 1000;

/** How many checked change sets `propose` keeps per snapshot. */
const CHECKED_MAX = 128;

/** A change set applied, compiled and checked on a snapshot; and its last plan, with the hash of the observation it was made from. */
interface Checked {
  readonly applied: AppliedChangeSet;
  readonly model: Model;
  readonly warnings: readonly Diagnostic[];
  planned?: { readonly seen: string; readonly plan: Plan; readonly delta: Plan["changes"] };
}

/** How often a write that named no base is planned again when a file it edits moved under it. */
const UNBASED_ATTEMPTS = 3;

/** What the runtime ran at one moment, by slot name: liveness only (health "unknown"). */
export type Liveness = ReadonlyMap<string, ObservedSlot>;

/**
 * The revision a write is based on: one (`If-Match: "rev_a"`, a body's `base`), or
 * several (`If-Match: "rev_a", "rev_b"`: RFC 9110 §13.1.1, the write goes ahead when
 * any of them holds).
 */
export type Base = string | readonly string[];

/**
 * The box as the server sees it: the tree (cached until a file changes), its
 * revisions, the runtime, and the one write path — propose (apply the change
 * set in memory, compile, plan) then commit (atomic, all files or none).
 */
export class BoxService {
  readonly state: StateStore;
  private readonly writes = new Mutex();
  /** Writes that name no base revision, one at a time from planning to commit (see unbasedWrite). */
  private readonly unbased = new Mutex();
  private readonly tree: TreeCache;
  private cached?: { result: CompileResult; snapshot: Snapshot; checkedAt: number };
  private watcher?: FolderWatch;
  private lastGood?: Model;
  /** Before any version of the tree has compiled: the settings of its hal0.toml when that file validated (CompileResult.settings). */
  private settingsAlone?: Model["settings"];
  private driverCache?: { key: string; driver: Promise<SlotDriver> };
  /** The last liveness observation: of which driver, started when (performance.now()), and its result. */
  private live?: { driver: Promise<SlotDriver>; startedAt: number; seen: Promise<Liveness> };
  /** When the runtime last changed under this process's hands (forgetLiveness): an observation started earlier is not reused. */
  private forgottenAt = Number.NEGATIVE_INFINITY;

  private readonly schemaDir: string;

  constructor(readonly options: BoxServiceOptions) {
    this.schemaDir = options.schemaDir ?? join(packageRoot(), "schema", "json");
    this.state = new StateStore(options.stateDir);
    this.tree = new TreeCache(options.root, undefined, options.runners);
  }

  get root(): string {
    return this.options.root;
  }

  get db(): Db {
    return this.options.db;
  }

  now(): number {
    return (this.options.now ?? Date.now)();
  }

  /**
   * Watches the tree's folders (`watchFolders`: an event costs its callback, never a read of the folder) so that `snapshot()` can skip the
   * stat of every file while nothing changed; it still re-checks every
   * READ_WINDOW_MS in case an event is missed. `hal0 serve` turns it on.
   */
  async watch(): Promise<void> {
    if (this.watcher) return;
    const folders = TREE_FOLDERS.map((f) => join(this.root, f));
    const watchTree = (): FolderWatch => watchFolders(folders, (path) => {
      if (isTreeFileName(basename(path))) this.readAgain();
      // A resource folder made, removed or replaced (or a watch that failed): read again, and watch the folders as they are now.
      else if (folders.includes(path)) {
        this.readAgain();
        this.watcher?.close();
        this.watcher = watchTree();
      }
    });
    this.watcher = watchTree();
  }

  private readonly stopping = longLivedAbort();

  /**
   * Aborted when the server starts to stop (`interrupt`): a converge a
   * request runs (a slot restart) takes it as its signal, so a drain does
   * not wait out a model's load; its runner is left running.
   */
  get stoppingSignal(): AbortSignal {
    return this.stopping.signal;
  }

  /** The server is stopping: what runs under `stoppingSignal` starts no further step. */
  interrupt(): void {
    this.stopping.abort();
  }

  async close(): Promise<void> {
    this.interrupt();
    this.watcher?.close();
    this.watcher = undefined;
  }

  /** The tree on disk; re-read and re-compiled only when a file of it changed (reconciler/tree-cache.ts decides). */
  async snapshot(): Promise<Snapshot> {
    const now = performance.now();
    if (this.cached && this.watcher && now - this.cached.checkedAt < READ_WINDOW_MS) return this.cached.snapshot;
    const { tree, result } = await this.tree.loadTree().catch((err: unknown) => {
      if (err instanceof ConfigNotFoundError) throw configGone(this.root);
      throw err;
    });
    // No .toml file left while slots hal0 started run: a volume unmounted under the folder, as the sweep judges it (config.empty), not an empty box.
    // (A folder that cannot be listed is no empty box either: its config.read_error leaves the tree invalid, as the sweep reads it.)
    if (tree.files.size === 0 && result.model !== undefined) {
      try {
        refuseEmptied(this.root, tree, await this.state.readInventory(), "hal0 serve answers from the last tree that compiled (it does not start without one) and writes nothing until the files are back");
      } catch (err) {
        throw apiErrorOf(err);
      }
    }
    if (this.cached?.result === result) {
      this.cached.checkedAt = now;
      return this.cached.snapshot;
    }
    const { model, diagnostics } = result;
    const files = revisionFiles(tree);
    const snapshot: Snapshot = { tree, model, diagnostics, files, revision: this.recordRevision(files) };
    if (model) this.lastGood = model;
    else this.settingsAlone = result.settings;
    this.cached = { result, snapshot, checkedAt: now };
    return snapshot;
  }

  /** The next read looks at the files again, however fresh the cached tree is. */
  private readAgain(): void {
    if (this.cached) this.cached.checkedAt = -Infinity;
  }

  /**
   * The settings of the last tree that compiled (synchronous: the gate and
   * TTLs read it per request). Until one has: those of the tree's hal0.toml
   * when that file validated, so that a box started with an error in some
   * other file keeps its own port, hosts, auth and `[bridge] enabled`, not the
   * built-in defaults; undefined when hal0.toml itself has errors.
   */
  lastSettings(): Model["settings"] | undefined {
    return this.lastGood?.settings ?? this.settingsAlone;
  }

  /**
   * The compiled tree; when the files on disk do not compile, or the config
   * folder is gone (moved, deleted, a volume unmounted), the last good model
   * (as the sweep does): reads answer on, writes are refused.
   */
  async model(): Promise<Model> {
    const { snap, gone } = await this.current();
    if (snap === undefined) {
      if (!this.lastGood) throw gone;
      return this.lastGood;
    }
    const model = snap.model ?? this.lastGood;
    if (!model) throw new ApiError("config.invalid", "the config tree has errors and no earlier version compiled", { diagnostics: snap.diagnostics.filter((d) => d.severity === "error") });
    return model;
  }

  /**
   * The tree on disk, or, when the config folder is gone (moved, deleted,
   * unmounted), the `config.not_found` refusal as a value: the reads that say
   * how the box is report it rather than fail with it.
   */
  async current(): Promise<{ snap: Snapshot; gone?: undefined } | { snap?: undefined; gone: ApiError }> {
    try {
      return { snap: await this.snapshot() };
    } catch (err) {
      if (err instanceof ApiError && (err.code === "config.not_found" || err.code === "config.empty")) return { gone: err };
      throw err;
    }
  }

  /**
   * The driver of the model's runtime: one per runtime and engine, the same promise each time (liveness reads compare it).
   * One that could not be made (the engine did not answer) is not kept: the next read asks the engine again.
   */
  driver(model: Model): Promise<SlotDriver> {
    const key = driverKey(model);
    if (this.driverCache?.key !== key) {
      const entry = { key, driver: this.options.driverFor(model) };
      this.driverCache = entry;
      entry.driver.catch(() => {
        if (this.driverCache === entry) this.driverCache = undefined;
      });
    }
    return this.driverCache!.driver;
  }

  /**
   * Which slots run, by name (liveness only: no /health probes, no port
   * scans): one observation shared by every read that starts within
   * READ_WINDOW_MS of when it was taken (reads at the same time share the one
   * in flight). A failed observation is not kept.
   */
  liveness(model: Model): Promise<Liveness> {
    const driver = this.driver(model);
    const now = performance.now();
    const live = this.live;
    if (live && live.driver === driver && now - live.startedAt < READ_WINDOW_MS) return live.seen;
    const entry = { driver, startedAt: now, seen: driver.then(async (d) => bySlotName(await d.observe({ health: false }))) };
    this.live = entry;
    entry.seen.catch(() => {
      if (this.live === entry) this.live = undefined;
    });
    return entry.seen;
  }

  /**
   * An observation taken elsewhere in this process (the sweep's) for the
   * liveness reads: kept when it started after the last change hal0 made and
   * after the observation held now, and only as liveness (health dropped). One
   * with a slot whose /health failed is not kept (the drivers word such a
   * slot's `detail` from the probe).
   */
  seedLiveness(model: Model, slots: readonly ObservedSlot[], startedAt: number): void {
    if (startedAt <= this.forgottenAt || (this.live && this.live.startedAt >= startedAt)) return;
    if (slots.some((s) => s.health === "down")) return;
    if (this.driverCache?.key !== driverKey(model)) return;
    const seen = bySlotName(slots.map((s) => (s.health === "unknown" ? s : { ...s, health: "unknown" as const })));
    this.live = { driver: this.driverCache.driver, startedAt, seen: Promise.resolve(seen) };
  }

  /** The runtime changed under this process's hands (a step started or stopped a runner): the next liveness read observes anew. */
  forgetLiveness(): void {
    this.live = undefined;
    this.forgottenAt = performance.now();
  }

  /** One observation of the box (no /health probes unless asked); `portHolders`: the answers of the other observations of one pass (see `propose`). */
  async observe(model: Model, health = false, portHolders?: PortAnswers): Promise<{ observed: Observed; inventory: Inventory }> {
    return observe(model, await this.driver(model), this.state, { health, hermesCredentials: this.options.hermesCredentials, ...(portHolders ? { portHolders } : {}) });
  }

  /**
   * Applies `changes` to the tree in memory, compiles and plans it. Throws config.stale / config.invalid / config.unknown_revision.
   * The compiled tree is kept per snapshot and change set (see `checked`): proposing the same change on the same tree again
   * (the inbox re-plans every pending request on each render) observes the box and plans afresh, without compiling again.
   * Proposals of one `pass` (an inbox render) ask who holds each port once between them, not once each.
   */
  async propose(changes: ChangeSet, base?: Base, pass?: ObservePass): Promise<Proposal> {
    const snapshot = await this.snapshot();
    const key = hashOf(changes);
    let checked = this.checked.get(snapshot)?.get(key);
    if (checked !== undefined) {
      if (base !== undefined) this.checkBase(base, snapshot, checked.applied.files.map((f) => f.file));
    } else {
      checked = await this.check(snapshot, changes, base);
      let bySnapshot = this.checked.get(snapshot);
      if (bySnapshot === undefined) this.checked.set(snapshot, (bySnapshot = new Map()));
      // The oldest out first: a bound on what is kept, above the most requests an inbox holds at once in practice.
      if (bySnapshot.size >= CHECKED_MAX) bySnapshot.delete(bySnapshot.keys().next().value!);
      bySnapshot.set(key, checked);
    }
    const { applied, model, warnings } = checked;
    const { observed, inventory } = await this.observe(model, false, pass?.portHolders);
    // Planned again only when the box looks otherwise than when this checked change was last planned (the plan is pure in model, observed, inventory).
    const seen = hashOf([observed, inventory]);
    if (checked.planned?.seen !== seen) {
      const plan = planChanges(model, observed, inventory);
      const before = snapshot.model ? planChanges(snapshot.model, observed, inventory) : undefined;
      const same = new Map(before?.changes.map((c) => [c.address, JSON.stringify([c.action, c.after])]));
      const delta = plan.changes.filter((c) => c.action !== "no-op" && same.get(c.address) !== JSON.stringify([c.action, c.after]));
      checked.planned = { seen, plan, delta };
    }
    return { changes, snapshot, ...(snapshot.model === undefined && this.lastGood !== undefined ? { baseline: this.lastGood } : {}), applied, model, plan: checked.planned.plan, delta: checked.planned.delta, warnings };
  }

  /**
   * Change sets that applied, compiled and passed every check of the change on a snapshot, by `hashOf` the change set:
   * all of that is pure in the tree (the snapshot: a new one whenever a file or a runner's facts change) and the change set.
   * A refused change is not kept (it is checked again each time).
   */
  private readonly checked = new WeakMap<Snapshot, Map<string, Checked>>();

  /** `propose`'s part that does not look at the box: apply, compile, the change's checks. */
  private async check(snapshot: Snapshot, changes: ChangeSet, base: Base | undefined): Promise<Checked> {
    let applied: AppliedChangeSet;
    try {
      applied = applyChangeSet(snapshot.tree, changes, { schemaDir: this.schemaDir });
    } catch (err) {
      if (err instanceof ChangeSetError && err.code === "slot.exists") {
        const name = slotOfFile(err.file);
        throw new ApiError("slot.exists", name ? `slot \`${name}\` already exists (${err.file})` : err.message, { name, file: err.file });
      }
      if (err instanceof ChangeSetError) throw new ApiError("config.invalid", err.message, { diagnostics: [changeSetDiagnostic(err, snapshot.tree)] });
      throw err;
    }
    if (base !== undefined) this.checkBase(base, snapshot, applied.files.map((f) => f.file));
    // A pinned slot's deletion is refused as that, before the tree it would leave is judged. Judged against the tree on
    // disk, or, while that does not compile (a hand edit in progress), the last one that did: its pinned slots run.
    const judgedFrom = snapshot.model ?? this.lastGood;
    const early = checkChange(judgedFrom, undefined, applied, changes)[0];
    if (early) throw new ApiError(early.code, early.message, early.details);
    // A file of the tree that could not be read (not UTF-8, a folder, a link to nothing) is still there, unless this change
    // writes it: compiled as the sweep compiles it, it is an error like any other, and its slot is never planned as removed.
    const unreadable = snapshot.diagnostics.filter((d) => d.code === "config.read_error" && !applied.tree.files.has(d.file!));
    const { model, diagnostics } = this.options.runners ? (await compileWithRunners(applied.tree, unreadable, this.options.runners)).result : compile(applied.tree, unreadable);
    const errors = diagnostics.filter((d) => d.severity === "error");
    // Past MAX_DIAGNOSTICS the last one (config.too_many_diagnostics) counts the rest.
    if (!model) throw new ApiError("config.invalid", `the change would leave the tree with ${errors.length > MAX_DIAGNOSTICS ? `more than ${MAX_DIAGNOSTICS}` : errors.length} error(s); nothing was written`, { diagnostics: errors });
    refuseMaskOverSecret(applied);
    // A flag the slot's runner would refuse (its --help says so): refused like any error, when this change brings it.
    const had = new Set((snapshot.model ? runnerErrors(snapshot.model) : []).map(runnerErrorKey));
    const refusedArgv = runnerErrors(model).filter((d) => !had.has(runnerErrorKey(d)));
    if (refusedArgv.length > 0) throw new ApiError("config.invalid", `the change would give ${refusedArgv.length === 1 ? "a slot an argv" : "slots argv"} its runner refuses (${refusedArgv.map((d) => d.code).join(", ")}); nothing was written`, { diagnostics: refusedArgv });
    // The rules of the change itself (a pinned slot is not stopped without force), for every door alike.
    const refused = checkChange(judgedFrom, model, applied, changes)[0];
    if (refused) throw new ApiError(refused.code, refused.message, refused.details);
    const warnings = diagnostics.filter((d) => d.severity === "warning" && applied.files.some((f) => f.file === d.file));
    return { applied, model, warnings };
  }

  /**
   * Writes a proposal's files (atomic each, removals last; all roll back if one fails), then
   * runs the commit observers and asks for a sweep. Returns the new revision.
   * A proposal that changes no file writes nothing and asks for no sweep, but
   * its observers still see it (a stack re-applied onto a tree that already
   * holds it moves the pointer).
   */
  async commit(proposal: Proposal): Promise<string> {
    return this.writes.run(async () => {
      const files = proposal.applied.files;
      let revision = proposal.snapshot.revision;
      if (files.length > 0) {
        // Another process sharing the state folder (hal0 agent approvals approve, hal0 model pull, hal0 serve) commits
        // under the same lock: none writes a file between this one's check of it and its write.
        const release = await acquireCommitLock(this.options.stateDir, "a commit to the config files").catch((err: unknown) => {
          if (err instanceof CommitLockedError) throw new ApiError(err.code, err.message, { holder: err.holder });
          throw err;
        });
        try {
          revision = await this.writeFiles(proposal);
        } finally {
          await release();
        }
      }
      // After-effects keyed on what the commit touched, whichever door it came through (a route, a plan by id, an approval).
      const results: Record<string, unknown> = {};
      for (const { name, observer } of this.observers) {
        // The files are written: an after-effect that fails (the stack pointer on a full or read-only state folder) is
        // reported as its own, never as the commit's, which a caller would take for a change not made.
        try {
          const result = await observer(proposal);
          if (result !== undefined) results[name] = result;
        } catch (err) {
          const refusal = apiErrorOf(err);
          results[name] = { error: { code: refusal instanceof ApiError ? refusal.code : "system.io", message: (err as Error).message } };
          // Only some replies carry an after-effect's result (a stack apply's pointer): the log says it for every one.
          this.options.onAfterEffectError?.(name, err);
        }
      }
      this.observed.set(proposal, results);
      if (files.length > 0) this.options.nudge?.();
      return revision;
    });
  }

  /** `commit`'s writes, under the commit lock: refused (config.stale) when a file moved since the proposal; the new revision. */
  private async writeFiles(proposal: Proposal): Promise<string> {
    const files = proposal.applied.files;
    const moved: string[] = [];
    for (const f of files) {
      const now = await readTreeFile(join(this.root, f.file));
      if (now !== f.before) moved.push(f.file);
    }
    if (moved.length > 0) {
      // The tree this was planned from is not the one on disk: the next read looks again (a write that named no base is
      // planned again from it), rather than serve the same tree until the watcher's event or the read window says so.
      this.readAgain();
      throw new ApiError("config.stale", `changed on disk since the change was planned: ${moved.join(", ")}`, { files: moved });
    }
    await removeStaleTempsFor(this.root, files.map((f) => f.file));
    const done: Array<(typeof files)[number]> = [];
    try {
      // Removals last: a write that fails then rolls back only written files, which keep their mode, owner and link;
      // a removed file written back would be a new plain 0644 file (a private slot file readable by all, a link gone).
      for (const f of [...files.filter((x) => x.after !== null), ...files.filter((x) => x.after === null)]) {
        await writeOrRemove(this.root, f.file, f.after);
        done.push(f);
      }
    } catch (err) {
      for (const f of done.reverse()) await writeOrRemove(this.root, f.file, f.before).catch(() => undefined);
      throw new ApiError("config.write_failed", `writing ${files.map((f) => f.file).join(", ")} failed, every file was rolled back: ${(err as Error).message}`);
    }
    this.cached = undefined;
    // The committed tree compiled: its settings (the gate, [server] auth, TTLs) hold from the next request on.
    this.lastGood = proposal.model;
    return this.recordRevision(revisionFiles(proposal.applied.tree));
  }

  /**
   * A write whose caller named no base revision (no `If-Match`): "apply this
   * to the tree as it is". Such writes are planned and committed one at a
   * time, so that one never meets another's commit between its plan and its
   * own; a file moved meanwhile by anything else (a hand edit, a write that
   * named its base) plans it again, up to UNBASED_ATTEMPTS times. `write`
   * plans from the tree afresh each time.
   */
  unbasedWrite<T>(write: () => Promise<T>): Promise<T> {
    return this.unbased.run(async () => {
      for (let attempt = 1; ; attempt++) {
        try {
          return await write();
        } catch (err) {
          if (!(err instanceof ApiError && err.code === "config.stale") || attempt >= UNBASED_ATTEMPTS) throw err;
        }
      }
    });
  }

  private readonly observers: Array<{ name: string; observer: (proposal: Proposal) => unknown }> = [];
  private readonly observed = new WeakMap<Proposal, Readonly<Record<string, unknown>>>();

  /**
   * Registers an after-effect of every commit (under the write lock, right
   * after the files are written): it sees the proposal — the change set and
   * the files it touched — and decides from those alone. What it returns
   * (undefined = it did nothing) is the commit's `observed[name]`; when it
   * throws, that is `{error: {code, message}}` and the commit stands.
   */
  onCommit(name: string, observer: (proposal: Proposal) => unknown): void {
    this.observers.push({ name, observer });
  }

  /** What the commit observers reported for a committed proposal (`{}` before or without a commit). */
  observedFor(proposal: Proposal): Readonly<Record<string, unknown>> {
    return this.observed.get(proposal) ?? {};
  }

  /** Asks the reconcile loop for a sweep now. */
  nudge(): void {
    this.options.nudge?.();
  }

  /** The files of a revision this server handed out, or undefined. */
  revisionFiles(id: string): Record<string, string> | undefined {
    const row = this.db.prepare("SELECT files FROM revisions WHERE id = ?").get(id) as { files: string } | undefined;
    return row ? (JSON.parse(row.files) as Record<string, string>) : undefined;
  }

  /**
   * Refuses a change when a file it edits (`touched`) moved since its base. Several
   * revisions (an If-Match list) hold when any one does; when none does, the refusal
   * names the known one the fewest files moved since (`config.stale`), or, none being
   * known, every one (`config.unknown_revision`).
   */
  private checkBase(base: Base, snapshot: Snapshot, touched: readonly string[]): void {
    const bases = typeof base === "string" ? [base] : [...new Set(base)];
    let closest: { base: string; moved: string[] } | undefined;
    for (const b of bases) {
      const baseFiles = this.revisionFiles(b);
      if (!baseFiles) continue;
      const moved = movedFiles(baseFiles, snapshot.files, touched);
      if (moved.length === 0) return;
      if (!closest || moved.length < closest.moved.length) closest = { base: b, moved };
    }
    if (closest) throw new ApiError("config.stale", `changed since revision ${closest.base}: ${closest.moved.join(", ")}`, { base: closest.base, current: snapshot.revision, files: closest.moved });
    if (bases.length === 1) throw new ApiError("config.unknown_revision", `revision ${bases[0]} is unknown to this server; read the resource again and retry`, { base: bases[0] });
    throw new ApiError("config.unknown_revision", `none of the revisions ${bases.join(", ")} is known to this server; read the resource again and retry`, { base: bases });
  }

  private recordRevision(files: Record<string, string>): string {
    const id = `rev_${hashOf(files).replace(/^sha256:/, "").slice(0, 24)}`;
    this.db.prepare("INSERT OR IGNORE INTO revisions (id, files, created_at) VALUES (?, ?, ?)").run(id, JSON.stringify(files), new Date(this.now()).toISOString());
    return id;
  }
}

/** The config folder went away under a running server: coded, not an internal error. */
function configGone(root: string): ApiError {
  return new ApiError("config.not_found", `the config folder ${root} is gone (moved, deleted or unmounted): reads answer from the last tree that compiled, and nothing is written until the folder is back`, { root });
}

/** Folders whose files carry installed servers' env: the folder is 0700 and its files 0600 (DESIGN.md §7). */
const PRIVATE_FOLDERS = new Set(["mcp-servers"]);

/**
 * Before a commit writes, the temp files a dead writer left (kill -9 mid-write)
 * in the folders it writes to go: one readdir per folder. A live writer's are
 * kept (reconciler/atomic.ts). Best effort: a failure here never stops a commit.
 */
async function removeStaleTempsFor(root: string, files: readonly string[]): Promise<void> {
  const dirs = await Promise.all(files.map(async (file) => {
    const path = join(root, file);
    const target = await linkTarget(path).catch(() => path); // a linked file is written beside its target
    return target === path ? [dirname(path)] : [dirname(path), dirname(target)];
  }));
  await removeStaleTemps(dirs.flat()).catch(() => undefined);
}

/**
 * Writes one file of the tree as its owner arranged it: a symbolic link
 * stays a link (the file it leads to is written), a file keeps its mode and
 * owner (a slot file made 0600 by hand stays 0600); a new file is 0644, and
 * 0600 in a private folder, where a file never keeps bits for others; a file
 * written with a secret in it (what a read masks) is made 0600, or loses the
 * bits for others (0644 becomes 0640), as a Hermes file holding a token does; a
 * UTF-8 byte-order mark stays.
 * `null` removes the entry (a link, not what it leads to).
 */
async function writeOrRemove(root: string, file: string, text: string | null): Promise<void> {
  const path = join(root, file);
  if (text === null) return rm(path, { force: true });
  const restricted = PRIVATE_FOLDERS.has(file.split("/")[0]!) && file.includes("/");
  await mkdir(dirname(path), { recursive: true, mode: restricted ? 0o700 : 0o777 });
  const bom = (await startsWithBom(path)) ? "\ufeff" : ""; // the loader drops it; the file keeps it
  // A file that holds a secret (an env API_KEY, an --api-key, a URL's password: what every read masks) is not left for others to read.
  const secret = !restricted && redactToml(text) !== text;
  await replaceFileKeeping(path, bom + text, restricted ? { newMode: 0o600, maxMode: 0o700 } : secret ? { newMode: 0o600, maxMode: 0o770 } : { newMode: 0o644 });
}

/** Which runtime, and how its driver is built (cli/box.ts driverFor): another value of any of these is another driver. */
function driverKey(model: Model): string {
  const { runtime, docker_host, stop_grace_s, pull, log_max_mb } = model.settings.slots;
  return JSON.stringify([runtime, docker_host, stop_grace_s, pull, log_max_mb]);
}

function bySlotName(slots: readonly ObservedSlot[]): Liveness {
  return new Map(slots.map((s) => [s.name, s]));
}

/** A runner error as the same finding before and after an edit (its line may move). */
function runnerErrorKey(d: Diagnostic): string {
  return `${d.code}\u0000${d.file}\u0000${d.summary}`;
}

/**
 * `[redacted]` is what hal0 shows in place of a secret. A change that would
 * write it over a value that is there (a masked value sent back that no route
 * could match to the value it stands for, a URL whose password was masked and
 * whose host was edited) would put the mask over the secret: refused,
 * whatever door it came through, and nothing is written. A new entry that
 * carries the mask (an imported export) loses nothing and is not refused.
 */
function refuseMaskOverSecret(applied: AppliedChangeSet): void {
  const over = applied.files.flatMap((f) => maskedOverValues(f.before, f.after).map((path) => `${f.file} ${path}`));
  if (over.length === 0) return;
  throw new ApiError("validation.invalid",
    `the change would write ${MASK} over ${over.join(", ")}: ${MASK} is what hal0 shows in place of a secret, not the secret. Send the value itself, or send the field back exactly as it was read; nothing was written`,
    { values: over, reason: "masked_value" });
}

/**
 * An edit that cannot apply, in the one diagnostic shape: at the key the `set`
 * edit names (or its closest ancestor the file spells out), else the file's start.
 */
function changeSetDiagnostic(err: ChangeSetError, tree: SourceTree): Diagnostic {
  const text = tree.files.get(err.file);
  const at = text === undefined || err.path.length === 0 ? { line: 1, column: 1 } : new Locator(text).locate(err.path, "value");
  return { code: err.code, severity: "error", summary: err.message, detail: "The change set cannot be applied to this file as written; nothing of it was applied.", file: err.file, ...at, path: [...err.path], related: [] };
}
