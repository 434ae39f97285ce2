import { readFileSync } from "node:fs";
import { readdir, rm } from "node:fs/promises";
import { createHash } from "node:crypto";
import { join, resolve } from "node:path";
import { errnoBrief, parsedOrUndefined } from "../compiler/index.js";
import { Settings } from "../schema/index.js";
import { writeFileAtomic } from "./atomic.js";
import { slotsDir } from "./drivers/runtime-record.js";
import { lockHolder, thisProcess } from "./lock.js";
import type { HermesManaged, HermesManagedProfile, Inventory } from "./observed.js";
import type { ResourceConditions } from "./conditions.js";
import { ensureStateFolder, sameFolder } from "./state-folder.js";

/** The outcome of the last apply step that touched a slot, for `hal0 status`. */
export interface SlotOutcome {
  readonly ok: boolean;
  readonly action: string;
  readonly code?: string;
  readonly error?: string;
  readonly at: string;
  /**
   * How many times in a row the slot died within CRASH_WINDOW_MS of becoming
   * ready and was started again (backoff.ts): set on such a restart, absent
   * on any other step.
   */
  readonly restarts?: number;
}

/**
 * A slot step an apply has begun and not yet ended (`steps.json`): what
 * `hal0 status` and the conditions say while it runs, since the runtime's
 * record names the new spec from the spawn on and the outcome is recorded
 * only when the step ends. `phase`: the old runner being stopped, the new
 * one launched (`starting`), loading (`warming`: `/health` answers 503) or
 * healthy with the step about to be recorded (`ready`).
 */
export interface SlotStep {
  readonly action: "create" | "replace" | "delete";
  readonly phase: "stopping" | "starting" | "warming" | "ready";
  readonly since: string;
}

/** `steps.json`: the steps under way, and the apply (the lock's holder) that runs them. */
interface StepsFile {
  readonly pid: number;
  readonly pid_start?: number;
  readonly slots: Record<string, SlotStep>;
}

/**
 * The state folder: what hal0 created (`inventory.json`), the settings last
 * applied (`applied-settings.json`), the last outcome per slot
 * (`outcomes.json`), the slot steps under way (`steps.json`), each
 * resource's conditions (`conditions.json`), and
 * the runtimes' own records under `slots/`. Every
 * write is atomic; only the apply that holds the lock writes.
 */
export class StateStore {
  constructor(readonly dir: string) {}

  /**
   * What hal0 started. A file that does not parse (or is not an inventory)
   * is `state.corrupt`, never read as empty: an empty inventory would make
   * every runner hal0 owns look unmanaged, and `down` would stop none.
   */
  async readInventory(): Promise<Inventory> {
    const file = "inventory.json";
    let raw: unknown;
    try {
      raw = await this.readJson<unknown>(file, { strict: true });
    } catch (err) {
      if (err instanceof SyntaxError) throw new StateCorruptError(join(this.dir, file), err.message);
      throw err;
    }
    if (raw === undefined) return { version: 1, box: "", slots: {} };
    const slots = (raw as { slots?: unknown } | null)?.slots;
    if (typeof raw !== "object" || raw === null || Array.isArray(raw) || typeof slots !== "object" || slots === null || Array.isArray(slots)) {
      throw new StateCorruptError(join(this.dir, file), "it holds no `slots` table");
    }
    // A newer hal0's format: read as this one's, its next write would hand the newer hal0 a file it misreads.
    const version = (raw as { version?: unknown }).version;
    if (typeof version === "number" && version > INVENTORY_VERSION) throw new StateNewerError(join(this.dir, file), version, INVENTORY_VERSION);
    // Each slot's record says the runtime its runner was started on, where hal0 looks for it and stops it: one that does not (a hand edit) is not guessed at.
    for (const [name, entry] of Object.entries(slots)) {
      if (!isTable(entry) || !RUNTIMES.includes(entry.runtime as string)) {
        throw new StateCorruptError(join(this.dir, file), `its entry for slot ${JSON.stringify(name)} is ${JSON.stringify(entry)?.slice(0, 80) ?? String(entry)}, not a record with the runtime (${RUNTIMES.join(", ")}) the slot was started on`);
      }
    }
    // A copy of another box's folder holds that box's id: it is a box of its own, with none yet.
    return copiedFrom(this.dir, raw as Inventory) === undefined ? (raw as Inventory) : { ...(raw as Inventory), box: "" };
  }

  /**
   * This box's id (the `hal0.box` label): the inventory's, else one derived
   * from the state folder's path, so it is the same before and after the
   * first write and reading it never writes. A folder copied from another
   * box's (`cp -a`, that folder still there with the same id) has no id of
   * its own yet: the derived one, which its first write records.
   */
  async boxId(): Promise<string> {
    return (await this.readInventory()).box || derivedBoxId(this.dir);
  }

  /** Writes the inventory, giving the box its id on first write. */
  async writeInventory(inventory: Inventory): Promise<Inventory> {
    const withBox = { ...inventory, box: inventory.box || derivedBoxId(this.dir), state: resolve(this.dir) };
    await this.writeJson("inventory.json", withBox);
    return withBox;
  }

  /**
   * Records in the inventory the folder it is in (`state`), so a copy of this
   * folder can tell it is one, and the config folder the box converges to
   * (`config`); an inventory copied from another box's is given its own id
   * here. Called by the lock's holder (each apply and sweep); it writes only
   * when the inventory names other folders or none (one written by a hal0
   * from before the fields), and never makes one.
   */
  async recordFolder(config: string): Promise<void> {
    if ((await this.readJson<unknown>("inventory.json")) === undefined) return;
    const inventory = await this.readInventory();
    if (inventory.box !== "" && inventory.state === resolve(this.dir) && inventory.config === resolve(config)) return;
    await this.writeInventory({ ...inventory, config: resolve(config) });
  }

  async readAppliedSettings(): Promise<Settings | undefined> {
    const raw = await this.readJson<unknown>("applied-settings.json");
    return raw === undefined ? undefined : parsedOrUndefined(Settings, raw);
  }

  async writeAppliedSettings(settings: Settings): Promise<void> {
    await this.writeJson("applied-settings.json", settings);
  }

  /**
   * The last outcome of each slot and resource. An entry that is not one (a
   * hand edit, a newer hal0's other shape) is no outcome, as is a file that
   * does not parse: outcomes only ever say what status shows.
   */
  async readOutcomes(): Promise<Record<string, SlotOutcome>> {
    return entriesOf(await this.readJson<unknown>("outcomes.json"), isOutcome);
  }

  /** Records `name`'s outcome; the file's other entries stay as they are, those this hal0 does not read too. */
  async recordOutcome(name: string, outcome: SlotOutcome): Promise<void> {
    const all = entriesOf(await this.readJson<unknown>("outcomes.json"), () => true);
    await this.writeJson("outcomes.json", { ...all, [name]: outcome });
  }

  /** Forgets `name`'s last outcome when it is a failure (a runner started since, by a step that did not end); a success stays. */
  async forgetFailedOutcome(name: string): Promise<void> {
    const { [name]: last, ...others } = entriesOf<unknown>(await this.readJson<unknown>("outcomes.json"), () => true);
    if (last === undefined || (isOutcome(last) && (last as SlotOutcome).ok)) return;
    await this.writeJson("outcomes.json", others);
  }

  /**
   * Marks `name`'s step under way (`undefined`: it ended). Only the apply
   * that holds the lock writes; a file another process wrote (an apply
   * killed mid-way) is started over.
   */
  async recordStep(name: string, step: SlotStep | undefined): Promise<void> {
    const me = await thisProcess();
    const file = await this.readStepsFile();
    const mine = file !== undefined && file.pid === me.pid && file.pid_start === me.pid_start ? file.slots : {};
    const { [name]: _ended, ...others } = mine;
    await this.writeJson("steps.json", { ...me, slots: step === undefined ? others : { ...others, [name]: step } });
  }

  /**
   * The state folder, its `credentials/` and `tokens/` (a provider credential's and an agent token's temp holds the
   * secret), `runs/` (a Hermes run's log being trimmed) and each runtime record's folder (`slots/<name>/`): where
   * hal0's writers leave their temps.
   */
  async folders(): Promise<string[]> {
    const slots = slotsDir(this.dir);
    const records = await readdir(slots, { withFileTypes: true }).catch(() => []);
    return [this.dir, join(this.dir, "credentials"), join(this.dir, "tokens"), join(this.dir, "runs"), ...records.filter((e) => e.isDirectory()).map((e) => join(slots, e.name))];
  }

  /**
   * Removes `steps.json`. Called by the apply that holds the lock before any
   * step of its own (a killed apply's steps never ended; only the lock's
   * holder writes the file, so none of it is live) and as it ends.
   */
  async clearSteps(): Promise<void> {
    await rm(join(this.dir, "steps.json"), { force: true });
  }

  /**
   * The slot steps under way: those of the live apply that holds the lock
   * now, none when no apply runs (a killed apply's file says nothing).
   */
  async readSteps(): Promise<Record<string, SlotStep>> {
    const file = await this.readStepsFile();
    if (file === undefined || Object.keys(file.slots).length === 0) return {};
    const holder = await lockHolder(this.dir);
    return holder !== undefined && holder.pid === file.pid && holder.pid_start === file.pid_start ? file.slots : {};
  }

  /** `steps.json` when it is one (an object with a `slots` table); anything else (`null`, a list, half a file) is no file: it only ever says what status shows. */
  private async readStepsFile(): Promise<StepsFile | undefined> {
    const file = await this.readJson<unknown>("steps.json");
    if (typeof file !== "object" || file === null || Array.isArray(file)) return undefined;
    const slots = (file as { slots?: unknown }).slots;
    return typeof slots === "object" && slots !== null && !Array.isArray(slots) ? (file as StepsFile) : undefined;
  }

  /** Each resource's conditions; an entry that is not such a record is none (the next sweep writes it anew), as is a file that does not parse. */
  async readConditions(): Promise<Record<string, ResourceConditions>> {
    return entriesOf(await this.readJson<unknown>("conditions.json"), isResourceConditions);
  }

  async writeConditions(all: Record<string, ResourceConditions>): Promise<void> {
    await this.writeJson("conditions.json", all);
  }

  /**
   * What hal0 wrote into each Hermes profile. A file that does not parse (or
   * is not such a record) is `state.corrupt`, never read as empty: an empty
   * record would leave the servers hal0 joined in each profile when they are
   * uninstalled, keep a removed profile's agent token live, and the next write
   * would replace every other profile's record with nothing.
   */
  async readHermesManaged(): Promise<HermesManaged> {
    const file = "hermes-managed.json";
    let raw: unknown;
    try {
      raw = await this.readJson<unknown>(file, { strict: true });
    } catch (err) {
      if (err instanceof SyntaxError) throw new StateCorruptError(join(this.dir, file), err.message, HERMES_RECORD);
      throw err;
    }
    if (raw === undefined) return { profiles: {} };
    const profiles = (raw as { profiles?: unknown } | null)?.profiles;
    if (!isTable(raw) || !isTable(profiles) || !Object.values(profiles).every(isRecord) || ((raw as { default?: unknown }).default !== undefined && !isRecord((raw as { default?: unknown }).default))) {
      throw new StateCorruptError(join(this.dir, file), "it holds no `profiles` table of records", HERMES_RECORD);
    }
    return raw as unknown as HermesManaged;
  }

  /** Records what hal0 now owns in one profile (`null`: the default profile). */
  async recordHermesManaged(profile: string | null, entry: HermesManagedProfile): Promise<void> {
    const all = await this.readHermesManaged();
    const next: HermesManaged = profile === null ? { ...all, default: entry } : { ...all, profiles: { ...all.profiles, [profile]: entry } };
    await this.writeJson("hermes-managed.json", next);
  }

  /** Forgets a removed profile (`null`: the default profile). */
  async forgetHermesManaged(profile: string | null): Promise<void> {
    const all = await this.readHermesManaged();
    if (profile === null ? all.default === undefined : !Object.hasOwn(all.profiles, profile)) return;
    const { default: _default, ...rest } = all;
    const next: HermesManaged = profile === null ? rest : { ...all, profiles: Object.fromEntries(Object.entries(all.profiles).filter(([name]) => name !== profile)) };
    await this.writeJson("hermes-managed.json", next);
  }

  /**
   * A missing file is undefined; one that does not parse too, unless `strict` (then the SyntaxError is thrown). One
   * that cannot be read (a folder in its place, permission denied) is `system.io` naming it (StateUnreadableError).
   */
  private async readJson<T>(file: string, opts: { strict?: boolean } = {}): Promise<T | undefined> {
    try {
      // Synchronous: state files are small and local, and an idle sweep reads five of them.
      return JSON.parse(readFileSync(join(this.dir, file), "utf8")) as T;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === "ENOENT" || (err instanceof SyntaxError && opts.strict !== true)) return undefined;
      if (err instanceof SyntaxError) throw err;
      throw new StateUnreadableError(join(this.dir, file), err);
    }
  }

  private async writeJson(file: string, value: unknown): Promise<void> {
    await ensureStateFolder(this.dir);
    await writeFileAtomic(join(this.dir, file), `${JSON.stringify(value, null, 2)}\n`);
  }
}

/** The format of inventory.json this hal0 reads and writes (`version`). */
const INVENTORY_VERSION = 1;

/** The runtimes an inventory entry may name (InventorySlot.runtime). */
const RUNTIMES: readonly string[] = ["process", "docker", "swarm"];

/**
 * `state.newer_schema`: a state file a newer hal0 wrote in a format this one
 * does not know (an upgrade rolled back). Refused before anything reads or
 * writes it, as a database a newer hal0 migrated is (memory/sqlite.ts).
 */
export class StateNewerError extends Error {
  readonly code = "state.newer_schema";
  constructor(readonly file: string, found: number, known: number) {
    super(`${file} was written by a newer hal0 (its format version is ${found}; this hal0 knows ${known}): this hal0 leaves it untouched; run that hal0 again, or restore a backup taken before the upgrade`);
  }
}

/** What inventory.json is, and what moving it away does (a StateCorruptError's message). */
const INVENTORY_RECORD = "it is hal0's record of the slots it started, so hal0 stops rather than forget them; restore it, or move it away to start over (hal0 then leaves those runners alone as unmanaged)";

/** What hermes-managed.json is, and what moving it away does. */
const HERMES_RECORD = "it is hal0's record of what it wrote into each Hermes profile (the installed servers it joined there, the profiles whose agent tokens it revokes when they go), so hal0 stops rather than forget it; restore it, or move it away to start over (hal0 then takes as its own only the entries it finds exactly as it would write them)";

/** `state.corrupt`: a state file hal0 must not guess about does not parse. */
export class StateCorruptError extends Error {
  readonly code = "state.corrupt";
  constructor(readonly file: string, why: string, what: string = INVENTORY_RECORD) {
    super(`${file} does not parse (${why}): ${what}`);
  }
}

/** A JSON object (not null, not a list). */
function isTable(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/** The entries of a JSON table that pass `ok` (none when `value` is no table). */
function entriesOf<T>(value: unknown, ok: (entry: unknown) => boolean): Record<string, T> {
  return isTable(value) ? (Object.fromEntries(Object.entries(value).filter(([, entry]) => ok(entry))) as Record<string, T>) : {};
}

/** An outcomes.json entry of the shape SlotOutcome has. */
function isOutcome(value: unknown): boolean {
  if (!isTable(value)) return false;
  const optional = (v: unknown, type: "string" | "number") => v === undefined || typeof v === type;
  return typeof value.ok === "boolean" && typeof value.action === "string" && typeof value.at === "string" && optional(value.code, "string") && optional(value.error, "string") && optional(value.restarts, "number");
}

/** A conditions.json entry of the shape ResourceConditions has. */
function isResourceConditions(value: unknown): boolean {
  if (!isTable(value) || !Number.isInteger(value.generation) || typeof value.spec_hash !== "string" || !Array.isArray(value.conditions)) return false;
  return value.conditions.every((c) => isTable(c) && ["type", "status", "reason", "message", "lastTransitionTime"].every((k) => typeof c[k] === "string") && Number.isInteger(c.observedGeneration));
}

/** One profile's record in hermes-managed.json: a table whose `ids` is a list of names. */
function isRecord(value: unknown): boolean {
  const ids = isTable(value) ? value.ids : undefined;
  return Array.isArray(ids) && ids.every((id) => typeof id === "string");
}

/**
 * `system.io`: a state file hal0 cannot read (a folder where the file should
 * be, one another user owns after a command run as root, an I/O error). It is
 * never read as empty, since the next write would replace what it holds; the
 * message names the file, the system's reason in brief, and what to do.
 */
export class StateUnreadableError extends Error {
  readonly code = "system.io";
  /** The system's reason (`EACCES`, `EISDIR`, …), when it gave one. */
  readonly errno: string | undefined;
  constructor(readonly file: string, cause: unknown) {
    const errno = (cause as NodeJS.ErrnoException | null)?.code;
    const todo =
      errno === "EISDIR" ? "move the folder away (hal0 writes the file again)" : errno === "EACCES" || errno === "EPERM" ? `give the user hal0 runs as${typeof process.getuid === "function" ? ` (uid ${process.getuid()})` : ""} read and write access to it (a command run as another user may have made it)` : "check the disk, then restore the file or move it away";
    super(`cannot read the state file ${file}: ${errnoBrief(cause)}${typeof errno === "string" ? ` (${errno})` : ""}; ${todo}`);
    this.errno = typeof errno === "string" ? errno : undefined;
  }
}

/**
 * This box's id as `boxId()` gives it, read at once (`hal0 serve` names the
 * web session's cookie after it): the inventory's, else the one derived from
 * the folder's path, also when the inventory cannot be read.
 */
export function boxIdNow(dir: string): string {
  try {
    const inventory = JSON.parse(readFileSync(join(dir, "inventory.json"), "utf8")) as Partial<Inventory> | null;
    if (typeof inventory?.box === "string" && inventory.box !== "" && copiedFrom(dir, inventory) === undefined) return inventory.box;
  } catch {
    // absent or unreadable: the derived id, which a first inventory write records
  }
  return derivedBoxId(dir);
}

function derivedBoxId(dir: string): string {
  return `box-${createHash("sha256").update(resolve(dir)).digest("hex").slice(0, 12)}`;
}

/**
 * The state folder `inventory` was copied from: the one it was last written in
 * (`state`), when that is another folder than `dir` (not the same one under
 * another path: a symbolic link, a bind mount), still there, whose inventory
 * holds the same box id. Two folders with one id would each take the other's
 * containers as their own (observe lists by `hal0.box`), so the copy is the
 * one that gives it up. A folder moved here (the other one gone) keeps it.
 */
function copiedFrom(dir: string, inventory: Partial<Inventory>): string | undefined {
  const from = inventory.state;
  if (typeof from !== "string" || typeof inventory.box !== "string" || inventory.box === "" || sameFolder(from, dir) !== false) return undefined;
  try {
    const box = (JSON.parse(readFileSync(join(from, "inventory.json"), "utf8")) as { box?: unknown } | null)?.box;
    return box === inventory.box ? from : undefined;
  } catch {
    return undefined; // gone, or unreadable: nothing says the id is in use elsewhere
  }
}
