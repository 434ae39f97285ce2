import { createHash } from "node:crypto";
import { constants, createReadStream, createWriteStream, type Stats } from "node:fs";
import { access, mkdir, realpath, rename, rmdir, stat, unlink } from "node:fs/promises";
import { basename, dirname, isAbsolute, join, relative, resolve, sep } from "node:path";
import { Transform } from "node:stream";
import { pipeline } from "node:stream/promises";
import { z } from "zod";
import type { ChangeSet, FileEdit } from "../../compiler/changeset.js";
import { editModelEdits } from "../../compiler/edits/models.js";
import { effectiveSettings, mergeEdits, readSettingsDoc, SETTINGS_FILE } from "../../compiler/edits/settings.js";
import { readTreeFile, type Model } from "../../compiler/index.js";
import type { Base, BoxService, Proposal } from "../box.js";
import { guardOperatorOnly, writtenPlan } from "../dispatch.js";
import { ApiError } from "../errors.js";
import { storeDir } from "../pulls/service.js";
import { defineRoute, type Caller, type WriteOutcome } from "../route.js";
import { fsync, hashFile } from "../pulls/worker.js";
import { configPath, modelFiles } from "../../reconciler/host/model-scan.js";
import { spaceAt } from "../../reconciler/host/probes.js";

/** A store path: "" is the first of `[models] roots` (schema/settings.ts); relative paths resolve against the config folder. */
const StorePath = z.string().max(4096).refine((s) => !s.includes("\0"), "a path without NUL bytes");
const StoreBody = z.strictObject({ store: StorePath });
const DryRunQuery = z.strictObject({ dry_run: z.enum(["true", "false", "1", "0"]).transform((v) => v === "true" || v === "1").default(false) });

const written = (o: WriteOutcome) => ({ revision: o.revision, files: o.files, committed: o.committed, plan: o.plan, warnings: o.warnings });

type Field = "path" | "draft" | "mmproj";
const FIELDS: readonly Field[] = ["path", "draft", "mmproj"];

/** One file the migration moves, and every model field that names it. */
interface Transfer {
  readonly from: string;
  readonly to: string;
  readonly size: number;
  /** The model fields that name it (none for a split model's other part, which moves with the first). */
  readonly refs: Array<{ readonly id: string; readonly file: Field }>;
  /** What models.toml records for it (a model's `path` only: sha256 and size_bytes are the main file's facts). */
  readonly recorded: Array<{ readonly id: string; readonly sha256?: string; readonly size_bytes?: number }>;
}

/** A registered file the migration does not move, and why. */
interface Left {
  readonly id: string;
  /** `part`: another part of a split model (`-00002-of-00003.gguf`), beside its `path`. */
  readonly file: Field | "part";
  readonly path_abs: string;
  readonly reason: "outside_store" | "missing" | "not_a_file";
}

interface Migration {
  /** The current effective store (what files are moved from). */
  readonly from: string;
  /** The new effective store. */
  readonly to: string;
  readonly toExists: boolean;
  readonly transfers: Transfer[];
  readonly left: Left[];
  readonly totalBytes: number;
  readonly neededBytes: number;
  readonly freeBytes: number;
}

/** Stores a migration is running on (by config folder): one at a time. */
const migrating = new Set<string>();

/**
 * Where models land (`[models] store`): setting it (one ChangeSet on
 * hal0.toml, no file moves) and migrating to a new one. A migration copies
 * every registered file under the current store into the new one
 * (`<name>.partial`, fsync, verified by sha256, renamed into place), then
 * commits ONE ChangeSet (the store and every moved path) through the
 * pipeline, and only then removes the old files; any failure before the
 * commit removes the copies and leaves the old store in use.
 *
 * The migration is an action, not a write: a write route's handler is run
 * whenever its change is planned (an approval queued, re-checked, shown),
 * and copying gigabytes must happen once, when the call really runs. Its
 * precheck (paths, space, the ChangeSet planned by the pipeline) refuses a
 * call that could not run, before it is queued and again when approved.
 *
 * `GET /api/settings/models/store` (model_store) is served by settings.ts.
 */
export const modelStoreRoutes = [
  defineRoute({
    method: "POST", path: "/api/settings/models/store", kind: "write", body: StoreBody, query: DryRunQuery, tools: ["model_store_set"],
    summary: "Set [models] store (where pulled models land; \"\" = the first of roots): one change set on hal0.toml; no file is moved, registered models keep their paths (model_store_migrate moves them)",
    handle: async ({ body, query, box }) => {
      const model = await box.model();
      const effective = storeDir(model, body.store);
      const { exists } = await usableStore(effective);
      const changes = await storeEdit(box, model, body.store);
      const previous = { store: model.settings.models.store, effective: storeDir(model) };
      return {
        changes: { edits: changes, summary: `[models] store = ${JSON.stringify(body.store)} (no model file is moved)` },
        dryRun: query.dry_run,
        reply: (o) => ({
          store: body.store, effective, exists, under_roots: underRoots(model, effective), previous, dry_run: query.dry_run,
          files_moved: 0,
          note: "no model file was moved: registered models keep their paths; new pulls land in the new store. POST /api/settings/models/store/migrate moves the files of the old store.",
          ...written(o),
        }),
      };
    },
  }),
  defineRoute({
    method: "POST", path: "/api/settings/models/store/migrate", kind: "action", body: StoreBody, query: DryRunQuery, tools: ["model_store_migrate"],
    summary: "Move every registered model file under the current store (with their draft / mmproj files) to a new store: space checked first, each copy verified by sha256, then [models] store and the moved paths in one change set; the old files are removed only after it commits. Models elsewhere stay (listed as left).",
    previewOnly: ({ query }) => query.dry_run,
    // What it commits ([models] store and the moved paths) is judged like a write's change: the store is privileged.
    proposes: async ({ body, box }) => (await migration(box, body.store)).changes,
    precheck: async ({ body, box, caller, base }) => {
      guardOperatorOnly(await box.propose((await migration(box, body.store)).changes, base), caller);
    },
    handle: async ({ body, query, box, caller, base, services }) => {
      const { model, m, changes } = await migration(box, body.store);
      // The pipeline judges the change before a byte moves (compiled and planned, not committed).
      const first = await box.propose(changes, base);
      guardOperatorOnly(first, caller);
      if (query.dry_run) return { dry_run: true, ...planView(model, body.store, m), committed: false, plan: writtenPlan(first.plan), warnings: first.warnings };
      if (migrating.has(model.root)) {
        throw new ApiError("model.store_migrate_failed", "another store migration is under way; wait for it to end", { step: "start", file: null }, 409);
      }
      // A pull under way writes into the store it began with: moved under it, its file would land in the old store, unregistered or named by a stale path.
      const live = services.pulls?.store.live() ?? [];
      if (live.length > 0) {
        throw new ApiError("model.store_migrate_failed", `a model pull is under way (${live.map((j) => `${j.model_id}: ${j.state}`).join(", ")}); wait for it to end, or cancel it, then migrate`, { step: "start", file: null, pulls: live.map((j) => j.model_id) }, 409);
      }
      migrating.add(model.root);
      try {
        return await migrate(box, caller, base, model, m, body.store);
      } finally {
        migrating.delete(model.root);
      }
    },
  }),
];

/** A migration to `store` of the box as it is now: its plan, and the change set it commits. */
async function migration(box: BoxService, store: string) {
  const model = await box.model();
  const m = await planMigration(model, store);
  return { model, m, changes: await migrationChanges(box, model, m, store) };
}

/** `prefix` contains `path` (or is it). */
function under(path: string, prefix: string): boolean {
  return path === prefix || path.startsWith(prefix.endsWith(sep) ? prefix : prefix + sep);
}

function underRoots(model: Model, abs: string): boolean {
  return model.settings.models.roots.some((r) => under(abs, resolve(isAbsolute(r) ? r : join(model.root, r))));
}

function kindOf(s: Stats): string {
  return s.isFile() ? "file" : s.isSymbolicLink() ? "symlink" : s.isFIFO() ? "fifo" : s.isSocket() ? "socket" : s.isCharacterDevice() || s.isBlockDevice() ? "device" : "other";
}

async function writable(path: string): Promise<boolean> {
  return access(path, constants.W_OK | constants.X_OK).then(() => true, () => false);
}

function unwritable(path: string, reason: string, message: string): ApiError {
  return new ApiError("model.store_unwritable", message, { path, reason });
}

/**
 * A store folder hal0 can use: an existing folder it may write, or a
 * missing one whose parent is a folder it may write (so it can be created).
 */
async function usableStore(abs: string): Promise<{ exists: boolean }> {
  const s = await stat(abs).catch(() => undefined);
  if (s) {
    if (!s.isDirectory()) throw new ApiError("model.store_not_directory", `${abs} exists and is a ${kindOf(s)}, not a folder; name a folder, or one to be created in a folder hal0 may write`, { path: abs, type: kindOf(s) });
    if (!(await writable(abs))) throw unwritable(abs, "not_writable", `hal0 may not write in ${abs} (permissions, or a read-only filesystem)`);
    return { exists: true };
  }
  const parent = dirname(abs);
  const p = await stat(parent).catch(() => undefined);
  if (!p) throw unwritable(abs, "parent_missing", `${abs} does not exist and cannot be created: its parent ${parent} does not exist either; create it first`);
  if (!p.isDirectory()) throw unwritable(abs, "parent_not_directory", `${abs} cannot be created: its parent ${parent} is a ${kindOf(p)}, not a folder`);
  if (!(await writable(parent))) throw unwritable(abs, "parent_not_writable", `${abs} cannot be created: hal0 may not write in its parent ${parent} (permissions, or a read-only filesystem)`);
  return { exists: false };
}

/** The `set` edit of `[models] store` in hal0.toml (none when the file already says so), by the settings merge's rules. */
async function storeEdit(box: BoxService, model: Model, store: string): Promise<FileEdit[]> {
  const snap = await box.snapshot();
  const doc = readSettingsDoc(snap.tree.files.get(SETTINGS_FILE)) ?? {};
  return mergeEdits(doc, { models: { store } }, effectiveSettings(doc) ?? model.settings);
}

async function sameDir(a: string, b: string): Promise<boolean> {
  if (a === b) return true;
  const [ra, rb] = await Promise.all([realpath(a).catch(() => a), realpath(b).catch(() => b)]);
  return ra === rb;
}

function invalidStore(msg: string): ApiError {
  return new ApiError("validation.invalid", msg, { fields: [{ loc: ["body", "store"], msg, type: "custom" }] });
}

/**
 * What a migration to `store` would do, refused when it could not run: the
 * same store, a store inside the current one, a target that is a file or
 * cannot be created, files the target already holds, or too little space
 * (the bytes to move plus a 1% margin). Reads only.
 */
async function planMigration(model: Model, store: string): Promise<Migration> {
  const from = storeDir(model);
  const to = storeDir(model, store);
  if (await sameDir(from, to)) throw invalidStore(`${to} is already the model store`);
  if (under(to, from)) throw invalidStore(`${to} is inside the current store ${from}; name a folder outside it`);
  const { exists: toExists } = await usableStore(to);
  const byPath = new Map<string, Transfer>();
  const left: Left[] = [];
  for (const m of Object.values(model.models).sort((a, b) => a.id.localeCompare(b.id))) {
    // A split model's other parts, beside its first (its `path`): llama.cpp reads them from there, so they move with it.
    const parts = m.path_abs === undefined ? [] : modelFiles(m.path_abs).slice(1);
    for (const [file, given] of [...FIELDS.map((f) => [f, f === "path" ? m.path_abs : f === "draft" ? m.draft_abs : m.mmproj_abs] as const), ...parts.map((p) => ["part", p] as const)]) {
      if (given === undefined) continue;
      const abs = resolve(given);
      if (abs === from || !under(abs, from)) {
        left.push({ id: m.id, file, path_abs: abs, reason: "outside_store" });
        continue;
      }
      const s = await stat(abs).catch(() => undefined);
      if (!s || !s.isFile()) {
        left.push({ id: m.id, file, path_abs: abs, reason: s ? "not_a_file" : "missing" });
        continue;
      }
      let t = byPath.get(abs);
      if (!t) byPath.set(abs, (t = { from: abs, to: join(to, relative(from, abs)), size: s.size, refs: [], recorded: [] }));
      if (file !== "part") t.refs.push({ id: m.id, file });
      if (file === "path" && m.sha256 !== undefined) t.recorded.push({ id: m.id, sha256: m.sha256, ...(m.size_bytes === undefined ? {} : { size_bytes: m.size_bytes }) });
    }
  }
  const transfers = [...byPath.values()].sort((a, b) => a.from.localeCompare(b.from));
  const taken: string[] = [];
  for (const t of transfers) if (await stat(t.to).then(() => true, () => false)) taken.push(t.to);
  if (taken.length > 0) throw new ApiError("model.store_file_exists", `the new store already holds ${taken.join(", ")}; move or remove ${taken.length === 1 ? "it" : "them"} first (nothing was copied)`, { paths: taken });
  const totalBytes = transfers.reduce((n, t) => n + t.size, 0);
  const marginBytes = Math.ceil(totalBytes / 100);
  const neededBytes = totalBytes + marginBytes;
  const space = await spaceAt(to);
  if (transfers.length > 0 && space.free_bytes < neededBytes) {
    throw new ApiError("model.store_no_space", `${to} has ${space.free_bytes} bytes free; moving ${transfers.length} file(s) of ${totalBytes} bytes needs ${neededBytes} (a 1% margin); nothing was copied`, {
      path: to, measured_at: space.path, needed_bytes: neededBytes, free_bytes: space.free_bytes, total_bytes: totalBytes, margin_bytes: marginBytes, files: transfers.length,
    });
  }
  return { from, to, toExists, transfers, left, totalBytes, neededBytes, freeBytes: space.free_bytes };
}

/** ONE change set: `[models] store`, and every moved file's `path` / `draft` / `mmproj` in models.toml. */
async function migrationChanges(box: BoxService, model: Model, m: Migration, store: string): Promise<ChangeSet> {
  const facts = new Map<string, Record<string, string>>();
  for (const t of m.transfers) {
    for (const r of t.refs) {
      const f = facts.get(r.id) ?? {};
      f[r.file] = configPath(model.root, t.to);
      facts.set(r.id, f);
    }
  }
  const edits: FileEdit[] = [...(await storeEdit(box, model, store))];
  for (const [id, f] of [...facts].sort(([a], [b]) => a.localeCompare(b))) edits.push(...editModelEdits(id, f).edits);
  const models = facts.size;
  return { edits, summary: `model store ${m.from} → ${m.to}: ${m.transfers.length} file(s) of ${models} model(s) moved, ${m.totalBytes} bytes` };
}

function planView(model: Model, store: string, m: Migration) {
  return {
    store, effective: m.to, previous: { store: model.settings.models.store, effective: m.from },
    files: m.transfers.map((t) => ({ from: t.from, to: t.to, size_bytes: t.size, models: t.refs })),
    left: m.left, total_bytes: m.totalBytes, needed_bytes: m.neededBytes, free_bytes: m.freeBytes,
  };
}

function failed(step: "copy" | "verify" | "commit", file: string | null, message: string, extra: Record<string, unknown> = {}): ApiError {
  return new ApiError("model.store_migrate_failed", `store migration failed at ${step}${file ? ` (${file})` : ""}: ${message}; the copies were removed, the old store stays in use`, { step, file, ...extra });
}


async function sha256File(path: string): Promise<string> {
  const hash = createHash("sha256");
  await hashFile(path, hash);
  return hash.digest("hex");
}

/** What a migration made in the new store, to undo it: files (partial or renamed) and the folders it created. */
interface Made {
  readonly files: string[];
  readonly dirs: string[];
}

async function undo(made: Made): Promise<string[]> {
  const kept: string[] = [];
  for (const f of made.files.reverse()) await unlink(f).catch((err: NodeJS.ErrnoException) => (err.code === "ENOENT" ? undefined : kept.push(f)));
  // Deepest first; a folder something else wrote into stays.
  for (const d of [...made.dirs].sort((a, b) => b.length - a.length)) await rmdir(d).catch(() => undefined);
  return kept;
}

/** Copies one file to `<to>.partial`, fsyncs it, verifies it, renames it into place. Returns its sha256. */
async function copyOne(t: Transfer, made: Made): Promise<string> {
  const partial = `${t.to}.partial`;
  let sourceSha: string;
  try {
    const first = await mkdir(dirname(t.to), { recursive: true });
    if (first !== undefined) {
      // mkdir -p reports the first folder it made; every folder from there down to the file's is new.
      for (let d = dirname(t.to); under(d, first); d = dirname(d)) made.dirs.push(d);
    }
    made.files.push(partial);
    const hash = createHash("sha256");
    const tee = new Transform({
      transform(chunk: Buffer, _enc, done) {
        hash.update(chunk);
        done(null, chunk);
      },
    });
    await pipeline(createReadStream(t.from), tee, createWriteStream(partial, { flags: "w", mode: 0o644 }));
    await fsync(partial);
    sourceSha = hash.digest("hex");
  } catch (err) {
    throw failed("copy", t.from, (err as Error).message, { to: t.to, errno: (err as NodeJS.ErrnoException).code ?? null });
  }
  const s = await stat(partial).catch(() => undefined);
  if (s?.size !== t.size) throw failed("verify", t.from, `the copy is ${s?.size ?? "no"} bytes, the file ${t.size}`, { to: t.to, expected_size: t.size, actual_size: s?.size ?? null });
  const copySha = await sha256File(partial).catch((err: Error) => failed("verify", t.from, `the copy could not be read back: ${err.message}`, { to: t.to }));
  if (copySha instanceof ApiError) throw copySha;
  if (copySha !== sourceSha) throw failed("verify", t.from, `the copy hashes to ${copySha}, the file to ${sourceSha}`, { to: t.to, expected: sourceSha, actual: copySha });
  for (const r of t.recorded) {
    if (r.size_bytes !== undefined && r.size_bytes !== t.size) throw failed("verify", t.from, `models.toml records size_bytes = ${r.size_bytes} for model ${r.id}; the file is ${t.size} bytes`, { to: t.to, model_id: r.id, expected_size: r.size_bytes, actual_size: t.size });
    if (r.sha256 !== undefined && r.sha256 !== sourceSha) throw failed("verify", t.from, `models.toml records sha256 = ${r.sha256} for model ${r.id}; the file hashes to ${sourceSha}`, { to: t.to, model_id: r.id, expected: r.sha256, actual: sourceSha });
  }
  try {
    await rename(partial, t.to);
    made.files[made.files.indexOf(partial)] = t.to;
  } catch (err) {
    throw failed("copy", t.from, `renaming ${partial} into place: ${(err as Error).message}`, { to: t.to });
  }
  return sourceSha;
}

/** Whether a commit that threw wrote its files anyway (an observer failed after the write): the files on disk are its `after`. */
async function landed(root: string, proposal: Proposal): Promise<boolean> {
  if (proposal.applied.files.length === 0) return false;
  for (const f of proposal.applied.files) {
    const now = await readTreeFile(join(root, f.file));
    if (now !== f.after) return false;
  }
  return true;
}

async function migrate(box: BoxService, caller: Caller, base: Base | undefined, model: Model, m: Migration, store: string): Promise<unknown> {
  const made: Made = { files: [], dirs: [] };
  const moved: Array<{ from: string; to: string; size_bytes: number; sha256: string; models: Transfer["refs"] }> = [];
  const fail = async (err: unknown): Promise<never> => {
    const kept = await undo(made);
    if (err instanceof ApiError && kept.length > 0) throw new ApiError(err.code, `${err.message} (could not remove ${kept.join(", ")})`, { ...err.details, not_removed: kept }, err.statusOverride);
    throw err;
  };
  try {
    if (!m.toExists) {
      await mkdir(m.to);
      made.dirs.push(m.to);
    }
    for (const t of m.transfers) moved.push({ from: t.from, to: t.to, size_bytes: t.size, sha256: await copyOne(t, made), models: t.refs });
    for (const d of new Set(m.transfers.map((t) => dirname(t.to)))) await fsync(d).catch(() => undefined);
  } catch (err) {
    return fail(err instanceof ApiError ? err : failed("copy", null, (err as Error).message));
  }
  // The tree as it is now (it may have moved while the bytes were copied), judged again by the pipeline, then committed.
  let proposal: Proposal | undefined;
  let revision: string;
  try {
    proposal = await box.propose(await migrationChanges(box, await box.model(), m, store), base);
    guardOperatorOnly(proposal, caller);
    revision = await box.commit(proposal);
  } catch (err) {
    if (proposal === undefined || !(await landed(box.root, proposal))) {
      const cause = err instanceof ApiError ? { code: err.code, message: err.message, details: err.details } : { code: "system.internal", message: (err as Error).message };
      return fail(failed("commit", null, `the change set was refused: ${cause.message}`, { cause }));
    }
    revision = (await box.snapshot()).revision;
  }
  // Committed: the new paths are in use; only now do the old files go.
  const notRemoved: Array<{ path: string; error: string }> = [];
  for (const t of m.transfers) await unlink(t.from).catch((err: Error) => notRemoved.push({ path: t.from, error: err.message }));
  return {
    store, effective: m.to, previous: { store: model.settings.models.store, effective: m.from },
    moved, left: m.left, bytes_moved: m.totalBytes, old_files_removed: notRemoved.length === 0, not_removed: notRemoved,
    revision, files: proposal.applied.files.map((f) => f.file), committed: true, plan: writtenPlan(proposal.plan), warnings: proposal.warnings,
  };
}
