import { isAbsolute, join } from "node:path";
import { parse } from "smol-toml";
import { slotOfFile } from "../schema/index.js";
import type { Model } from "./model.js";

/**
 * What a change does, classified (issue 15, "gate by effect"). Pure: the
 * tree before and after a ChangeSet (the compiled models and the touched
 * files' texts) in, one effect per changed key out, plus one per slot whose
 * resolved runner, image, flags or env moved.
 *
 * - `tune`: `[tune]` keys, `priority`, placement within the slot's device
 *   class, and keys given that class on purpose below (descriptions, file
 *   facts of a model inside `[models] roots`, inert stack files…): the
 *   tool's own tier decides.
 * - `assignment`: a slot's `model`, `enabled`, `profile`, a slot or stack
 *   file removed, a slot file moved to another name with its text, a model
 *   or profile entry removed: never looser than the caller's tier for `tool`
 *   (slot_load, slot_unload, model_swap, slot_delete, slot_rename,
 *   stack_delete, model_delete, profile_delete).
 * - `privileged`: anything that decides what code runs or where secrets go
 *   — and **every key not classified here on purpose** — always needs a
 *   person.
 */
export type EffectClass = "tune" | "assignment" | "privileged";

export interface Effect {
  readonly class: EffectClass;
  /** Tree-relative file, or `slot.<name>` for a resolved-spec effect. */
  readonly where: string;
  /** The changed key path inside the file (empty for a whole file or a resolved-spec effect). */
  readonly path: readonly string[];
  /** What it does, in words a person checks in five seconds. */
  readonly line: string;
  /** For `assignment`: the tool whose tier the change may not be looser than. */
  readonly tool?: string;
}

export interface EffectInput {
  /** The tree as it compiles now (absent when it does not). */
  readonly before?: Model;
  readonly after: Model;
  readonly files: ReadonlyArray<{ readonly file: string; readonly before: string | null; readonly after: string | null }>;
  /** The ChangeSet's stack-apply mark (compiler/changeset.ts): applying a stack, whichever door carries it. */
  readonly stack?: { readonly slug: string };
}

export const EFFECT_RANK: Readonly<Record<EffectClass, number>> = { tune: 0, assignment: 1, privileged: 2 };

/** Every effect of a change, privileged first, then in file order. */
export function effectsOf(input: EffectInput): Effect[] {
  const out: Effect[] = [];
  // The mark moves the stack pointer (server/stack-pointer.ts): never looser than the caller's tier for stack_apply.
  if (input.stack) out.push({ class: "assignment", where: `stacks/${input.stack.slug}.toml`, path: [], tool: "stack_apply", line: `applies stack ${input.stack.slug}` });
  const renamed = slotRenames(input);
  for (const r of renamed) {
    const on = input.before?.slots[r.from]?.enabled === true;
    out.push({ class: "assignment", where: `slots/${r.to}.toml`, path: [], tool: "slot_rename", line: `renames slot ${r.from} to ${r.to}${on ? " (it runs on under the new name: its server restarts)" : ""}` });
  }
  const moved = new Set(renamed.flatMap((r) => [`slots/${r.from}.toml`, `slots/${r.to}.toml`]));
  for (const f of input.files) if (!moved.has(f.file)) out.push(...fileEffects(input, f));
  out.push(...resolvedEffects(input, new Set(out.filter((e) => e.class === "privileged").map((e) => e.line))));
  return out.sort((a, b) => EFFECT_RANK[b.class] - EFFECT_RANK[a.class]);
}

type Doc = Record<string, unknown>;

/**
 * Slot files moved to another name with their text as it was (slot_rename, a plan's `rename`, or a delete and a
 * create of the same text): one rename each, not a slot deleted and every key of a new one read as new.
 */
function slotRenames(input: EffectInput): Array<{ from: string; to: string }> {
  const gone = input.files.filter((f) => f.after === null && f.before !== null && slotOfFile(f.file) !== undefined);
  const taken = new Set<string>();
  const out: Array<{ from: string; to: string }> = [];
  for (const f of input.files) {
    if (f.before !== null || f.after === null || slotOfFile(f.file) === undefined) continue;
    const from = gone.find((g) => !taken.has(g.file) && g.before === f.after);
    if (from === undefined) continue;
    taken.add(from.file);
    out.push({ from: slotOfFile(from.file)!, to: slotOfFile(f.file)! });
  }
  return out;
}

function fileEffects(input: EffectInput, f: EffectInput["files"][number]): Effect[] {
  const before = docOf(f.before);
  const after = docOf(f.after);
  const slot = slotOfFile(f.file);
  if (slot !== undefined && f.after === null) {
    return [{ class: "assignment", where: f.file, path: [], tool: "slot_delete", line: `deletes slot ${slot}${input.before?.slots[slot]?.enabled ? " (it is enabled now: its server stops)" : ""}` }];
  }
  if (slot !== undefined && f.before === null) {
    // A new slot: its keys are classified like edits (a new slot's env or runner flags are privileged), under a line that says so.
    return [{ class: "assignment", where: f.file, path: [], tool: "slot_create", line: `creates slot ${slot}` }, ...diff(before, after).map((p) => classify(input, f.file, p, before, after))];
  }
  const mcp = /^mcp-servers\/([^/]+)\.toml$/.exec(f.file)?.[1];
  if (mcp !== undefined && f.before !== null && f.after === null) {
    // One line for what it does, not one per key it had ("runs a new command: (unset)"): Hermes profiles drop it.
    const was = input.before?.mcpServers[mcp];
    const exposed = was !== undefined && (was.exposure.hermes || was.exposure.brain) ? " (it is exposed to Hermes: the profiles drop it)" : "";
    return [{ class: "privileged", where: f.file, path: [], line: `uninstalls MCP server ${mcp}${exposed}` }];
  }
  const stack = /^stacks\/([^/]+)\.toml$/.exec(f.file)?.[1];
  if (stack !== undefined && f.after === null) return [{ class: "assignment", where: f.file, path: [], tool: "stack_delete", line: `deletes stack ${stack}` }];
  if (before === undefined || after === undefined) {
    // A file that is not TOML hal0 can read (the compiler refuses such a tree; be strict all the same).
    return [{ class: "privileged", where: f.file, path: [], line: `rewrites ${f.file}` }];
  }
  if (f.file === "upstreams.toml" && Array.isArray(before.upstream ?? []) && Array.isArray(after.upstream ?? [])) {
    // Entries are paired by name, so removing one is said as that (not as the next entry's keys changing under its index).
    const { aligned, removed } = alignUpstreams(before, after);
    const gone: Effect[] = removed.map(({ index, name }) => ({ class: "privileged", where: f.file, path: ["upstream", String(index)], line: `removes upstream ${name}` }));
    return [...gone, ...diff(aligned, after).map((p) => classify(input, f.file, p, aligned, after))];
  }
  // A model or profile whose whole entry goes is deleted, whichever door removes it: never looser than the caller's delete tool.
  const entries = ENTRY_DELETES[f.file];
  const gone = entries === undefined ? [] : Object.keys(tableOf(before[entries.table])).filter((id) => !(id in tableOf(after[entries.table])));
  const deletes: Effect[] = gone.map((id) => ({ class: "assignment", where: f.file, path: [entries!.table, id], tool: entries!.tool, line: `deletes ${entries!.table} ${id}` }));
  const kept = diff(before, after).filter((p) => !(entries !== undefined && p[0] === entries.table && gone.includes(p[1]!)));
  return [...deletes, ...kept.map((p) => classify(input, f.file, p, before, after))];
}

/** Files of named entries, and the tool that deletes one (never loosened: a person decides, and a policy's block holds). */
const ENTRY_DELETES: Readonly<Record<string, { readonly table: string; readonly tool: string }>> = {
  "models.toml": { table: "model", tool: "model_delete" },
  "profiles.toml": { table: "profile", tool: "profile_delete" },
};

function tableOf(v: unknown): Record<string, unknown> {
  return isTable(v) ? v : {};
}

function classify(input: EffectInput, file: string, path: readonly string[], before: Doc | undefined, after: Doc | undefined): Effect {
  const was = at(before, path);
  const now = at(after, path);
  const key = path.join(".");
  const make = (cls: EffectClass, line: string, tool?: string): Effect => ({ class: cls, where: file, path, line, ...(tool ? { tool } : {}) });
  const slot = slotOfFile(file);
  if (slot !== undefined) {
    const [head, sub] = path;
    if (head === "tune") return make("tune", `tunes slot ${slot}: ${key} ${show(was)} → ${show(now)}`);
    if (head === "priority") return make("tune", `sets slot ${slot}'s priority ${show(was)} → ${show(now)}`);
    if (head === "description") return make("tune", `describes slot ${slot}`);
    // Which machine a slot runs on (swarm): another box's hardware, network and data — a person decides.
    if (head === "placement" && sub === "node") return make("privileged", `moves slot ${slot} to node ${show(now)} (from ${show(was)})`);
    if (head === "placement" && sub === "labels") return make("privileged", `places slot ${slot} by node labels: ${key} ${show(was)} → ${show(now)}`);
    if (head === "placement" && JSON.stringify(input.before?.slots[slot]?.spec.placement ?? null) !== JSON.stringify(input.after.slots[slot]?.spec.placement ?? null)) {
      return make("privileged", `moves slot ${slot} to other nodes: placement ${show(was)} → ${show(now)}`);
    }
    if (head === "placement") {
      const a = input.before?.slots[slot]?.device;
      const b = input.after.slots[slot]?.device;
      if (a !== undefined && b !== undefined && deviceClass(a) === deviceClass(b)) return make("tune", `places slot ${slot}: ${key} ${show(was)} → ${show(now)}`);
      return make("privileged", `moves slot ${slot} to another device class: ${a ?? "—"} → ${b ?? "—"}`);
    }
    if (head === "model") return make("assignment", `swaps slot ${slot}'s model ${show(was)} → ${show(now)}`, "model_swap");
    if (head === "profile") return make("assignment", `switches slot ${slot} to profile ${show(now)} (from ${show(was)})`, "model_swap");
    if (head === "enabled") {
      const on = now !== false;
      // A slot that did not exist in a tree that compiled stops nothing by being created off: its slot_create line judges it.
      if (!on && input.before !== undefined && input.before.slots[slot] === undefined) return make("tune", `creates slot ${slot} disabled (nothing starts)`);
      return on
        ? make("assignment", `enables slot ${slot} (it starts)`, "slot_load")
        : make("assignment", `disables slot ${slot}${input.before?.slots[slot]?.enabled ? " (it serves now: it stops)" : ""}`, "slot_unload");
    }
    if (head === "server" && sub === "env") return make("privileged", path.length > 2 ? `${now === undefined ? "removes" : "sets"} env ${path.slice(2).join(".")} for slot ${slot}` : `replaces the env of slot ${slot}`);
    if (head === "server" && sub === "extra_args") return make("privileged", `runs slot ${slot} with extra runner flags: ${show(now)}`);
    return make("privileged", `changes ${key} of slot ${slot}: ${show(was)} → ${show(now)}`);
  }
  if (file === "profiles.toml") {
    const [, name, field] = path;
    if (path[0] === "profile" && field === "tune") return make("tune", `tunes profile ${name}: ${path.slice(3).join(".")} ${show(was)} → ${show(now)}`);
    if (path[0] === "profile" && (field === "intent" || field === "quant")) return make("tune", `describes profile ${name}`);
    if (path[0] === "profile" && field === "runner") return make("privileged", `runs a new command for profile ${name}: ${show(now)}`);
    if (path[0] === "profile" && field === "image") return make("privileged", `runs another image for profile ${name}: ${show(now)}`);
    if (path[0] === "profile" && field === "flags") return make("privileged", `runs profile ${name} with flags ${show(now)}`);
    // Its values are not shown (a runner's env holds tokens and passwords), as a slot's and an MCP server's are not.
    if (path[0] === "profile" && field === "env") return make("privileged", path.length > 3 ? `${now === undefined ? "removes" : "sets"} env ${path.slice(3).join(".")} for profile ${name}` : `replaces the env of profile ${name}`);
    return make("privileged", `changes ${key} in profiles.toml: ${show(was)} → ${show(now)}`);
  }
  if (file === "models.toml") {
    const [, id, field] = path;
    if (path[0] === "model" && (field === "path" || field === "draft" || field === "mmproj")) {
      const abs = field === "path" ? input.after.models[id!]?.path_abs : field === "draft" ? input.after.models[id!]?.draft_abs : input.after.models[id!]?.mmproj_abs;
      if (abs !== undefined && insideRoots(abs, input.after.settings.models.roots, input.after.root)) {
        // The weights a running slot serves, swapped under it: what a model_swap does, so never looser than the caller's model_swap.
        const serving = field === "path" && input.before?.models[id!] !== undefined ? slotsServing(input, id!) : [];
        if (serving.length > 0) {
          return make("assignment", `points model ${id}'s path at ${abs} (inside [models] roots): ${serving.length === 1 ? `slot ${serving[0]} serves it, so its server restarts` : `slots ${serving.join(", ")} serve it, so their servers restart`} with that file`, "model_swap");
        }
        return make("tune", `points model ${id}'s ${field} at ${abs} (inside [models] roots)`);
      }
      return make("privileged", `points model ${id}'s ${field} at ${abs ?? show(now)}, outside [models] roots`);
    }
    if (path[0] === "model" && field === "chat_template") return make("privileged", `gives model ${id} the chat template ${show(now)}`);
    if (path[0] === "model" && (field === "hf_repo" || field === "hf_filename" || field === "revision")) {
      // Which Hub file a model's bytes come from: what its runner downloads when it has no local path (--hf-repo / --hf-file),
      // what model_update and `[models] pull_on_apply` write to its path. Like a path outside the roots, a person decides.
      // The revision too, for a model with Hub names: `pull_on_apply` installs it at that commit, and a commit may be a pull
      // request's (`refs/pr/N`), which anyone may open on a public repository.
      const m = input.after.models[id!];
      const at = m?.revision !== undefined && m.revision !== "main" ? ` at revision ${show(m.revision)}` : "";
      if (m !== undefined && (field !== "revision" || m.hf_repo !== undefined)) {
        return make("privileged", `has model ${id} downloaded from the Hub's ${show(m.hf_repo)} ${show(m.hf_filename)}${at}${m.path_abs === undefined ? " (no local path: its runner fetches it)" : ""}`);
      }
    }
    // The other file facts (type, capabilities, native context, …) only describe the file: tune, on purpose.
    if (path[0] === "model" && field !== undefined) return make("tune", `sets model ${id}'s ${path.slice(2).join(".")} ${show(was)} → ${show(now)}`);
    return make("privileged", `changes ${key} in models.toml`);
  }
  if (file === "upstreams.toml") {
    const entry = path[0] === "upstream" && typeof path[1] === "string" ? upstreamAt(after, path) ?? upstreamAt(before, path) : undefined;
    const field = path[2];
    if (field === "url" || (field !== undefined && field.startsWith("auth"))) {
      const env = entry?.auth_value_env;
      const credential = entry?.auth_credential;
      if (typeof credential === "string" && credential !== "") return make("privileged", `sends stored credential ${credential} to ${entry?.url ?? "?"}`);
      return make("privileged", typeof env === "string" && env !== "" ? `sends the value of $${env} to ${entry?.url ?? "?"}` : `points upstream ${entry?.name ?? path[1]} at ${entry?.url ?? show(now)}`);
    }
    if (field === "name" || field === "description") return make("tune", `renames or describes upstream ${entry?.name ?? path[1]}`);
    return make("privileged", `changes ${key} in upstreams.toml`);
  }
  const mcp = /^mcp-servers\/([^/]+)\.toml$/.exec(file)?.[1];
  if (mcp !== undefined) {
    const [head] = path;
    if (head === "name" || head === "description") return make("tune", `describes MCP server ${mcp}`);
    if (head === "env") return make("privileged", path.length > 1 ? `${now === undefined ? "removes" : "sets"} env ${path.slice(1).join(".")} for MCP server ${mcp}` : `replaces the env of MCP server ${mcp}`);
    if (head === "command" || head === "args") return make("privileged", `runs a new command for MCP server ${mcp}: ${show(at(after, ["command"]))} ${show(at(after, ["args"]))}`);
    if (head === "url") return make("privileged", `points MCP server ${mcp} at ${show(now)}`);
    // When it was installed: a record, not a behaviour (and a time, which no two plans of one install share).
    if (head === "installed_at") return make("tune", `records when MCP server ${mcp} was installed`);
    return make("privileged", `changes ${key} of MCP server ${mcp}: ${show(was)} → ${show(now)}`);
  }
  if (file === "hal0.toml") {
    if (TUNE_SETTINGS.has(key)) return make("tune", `sets [${path[0]}] ${path.slice(1).join(".")} ${show(was)} → ${show(now)}`);
    return make("privileged", `changes [${path[0]}] ${path.slice(1).join(".")} in hal0.toml: ${show(was)} → ${show(now)}`);
  }
  // A stack file does nothing until it is applied, and applying it is judged by the slot edits it makes.
  if (/^stacks\/[^/]+\.toml$/.test(file)) return make("tune", `edits stack ${file.slice(7, -5)}: ${key}`);
  return make("privileged", `changes ${key || "the file"} in ${file}`);
}

/** The enabled slots that serve model `id` before and after the change (sorted): a new file for it is a new model for them. */
function slotsServing(input: EffectInput, id: string): string[] {
  return Object.keys(input.after.slots).filter((name) => {
    const now = input.after.slots[name]!;
    const was = input.before?.slots[name];
    return now.enabled && now.model === id && was !== undefined && was.model === id;
  }).sort();
}

/** hal0.toml keys that only pace hal0 itself: tune, on purpose. Every other setting is privileged. */
const TUNE_SETTINGS: ReadonlySet<string> = new Set(["slots.max_slots", "slots.health_timeout_s", "slots.stop_grace_s", "slots.parallel", "slots.log_max_mb", "reconcile.interval_s"]);

/**
 * Per slot the change touches: a resolved runner, image, profile flags, env
 * or device class that moved is privileged even when the key that moved it is
 * an assignment (a model_swap to a profile that runs something else, or on
 * another device class: the devices a container is given). With no `before`
 * (no tree compiled to compare with) every enabled slot's runner is said,
 * privileged.
 */
function resolvedEffects(input: EffectInput, seen: ReadonlySet<string>): Effect[] {
  const out: Effect[] = [];
  const before = input.before;
  for (const [name, now] of Object.entries(input.after.slots).sort(([a], [b]) => (a < b ? -1 : 1))) {
    if (!before) {
      // No tree compiled before this one, so nothing tells what it moves: what each slot would run is said, and a person decides.
      const p = input.after.profiles[now.profile];
      if (now.enabled) out.push({ class: "privileged", where: `slot.${name}`, path: [], line: `runs slot ${name}: ${(p?.runner ?? []).join(" ")}${p?.image ? ` (image ${p.image})` : ""} (no earlier tree compiled to compare with)` });
      continue;
    }
    const was = before.slots[name];
    if (!was) continue;
    const p0 = before.profiles[was.profile];
    const p1 = input.after.profiles[now.profile];
    const push = (line: string) => {
      if (!seen.has(line)) out.push({ class: "privileged", where: `slot.${name}`, path: [], line });
    };
    if (JSON.stringify(p0?.runner ?? []) !== JSON.stringify(p1?.runner ?? [])) push(`runs a new command for slot ${name}: ${(p1?.runner ?? []).join(" ")}`);
    if ((p0?.image ?? "") !== (p1?.image ?? "")) push(`runs another image for slot ${name}: ${p1?.image ?? "—"}`);
    if (JSON.stringify(p0?.flags_argv ?? []) !== JSON.stringify(p1?.flags_argv ?? [])) push(`runs slot ${name} with other runner flags: ${(p1?.flags_argv ?? []).join(" ")}`);
    // The device class a profile switch moves it to (its device_class and backend): what a [placement] device edit across classes is.
    if (deviceClass(was.device) !== deviceClass(now.device)) push(`moves slot ${name} to another device class: ${was.device} → ${now.device}`);
    const keys = [...new Set([...Object.keys(was.spec.env), ...Object.keys(now.spec.env)])].sort();
    for (const k of keys) if (was.spec.env[k] !== now.spec.env[k]) push(`${now.spec.env[k] === undefined ? "removes" : "sets"} env ${k} for slot ${name}`);
  }
  return out;
}

function deviceClass(device: string): string {
  return device.split("-")[0]!;
}

/** Whether `abs` lies under one of `roots`; a relative root is the config folder's (`root`) folder of that name, as the routes and the scan read it. */
function insideRoots(abs: string, roots: readonly string[], root: string): boolean {
  const clean = abs.replace(/\/+$/, "");
  if (clean.split("/").includes("..")) return false;
  return roots.some((r) => {
    const dir = (isAbsolute(r) ? r : join(root, r)).replace(/\/+$/, "");
    return clean === dir || clean.startsWith(`${dir}/`);
  });
}

/**
 * upstreams.toml's `before` with its `[[upstream]]` entries moved to the index of the same entry in `after`:
 * paired by name, then an unpaired entry with an unpaired one at its own index (a rename in place); an entry new
 * in `after` faces an empty table, and one with no pair is `removed` (with its index and name in `before`).
 */
function alignUpstreams(before: Doc, after: Doc): { aligned: Doc; removed: Array<{ index: number; name: string }> } {
  const was = ((before.upstream ?? []) as unknown[]).map(tableOf);
  const now = ((after.upstream ?? []) as unknown[]).map(tableOf);
  const pairOf = new Map<number, number>();
  const taken = new Set<number>();
  was.forEach((entry, i) => {
    const j = now.findIndex((e, k) => !taken.has(k) && e.name !== undefined && e.name === entry.name);
    if (j >= 0) {
      pairOf.set(j, i);
      taken.add(j);
    }
  });
  const paired = new Set(pairOf.values());
  was.forEach((_, i) => {
    if (!paired.has(i) && i < now.length && !taken.has(i)) {
      pairOf.set(i, i);
      taken.add(i);
      paired.add(i);
    }
  });
  const removed = was.flatMap((entry, i) => (paired.has(i) ? [] : [{ index: i, name: typeof entry.name === "string" ? entry.name : `#${i + 1}` }]));
  const upstream = now.map((_, j) => (pairOf.has(j) ? was[pairOf.get(j)!]! : {}));
  const aligned: Doc = { ...before };
  if (after.upstream !== undefined) aligned.upstream = upstream;
  else delete aligned.upstream;
  return { aligned, removed };
}

function upstreamAt(doc: Doc | undefined, path: readonly string[]): { name?: string; url?: string; auth_value_env?: string; auth_credential?: string } | undefined {
  const list = doc?.upstream;
  const index = Number(path[1]);
  if (Array.isArray(list) && Number.isInteger(index)) return list[index] as never;
  return undefined;
}

function docOf(text: string | null): Doc | undefined {
  if (text === null) return {};
  try {
    return parse(text) as Doc;
  } catch {
    return undefined;
  }
}

/** Leaf key paths where two documents differ (arrays are leaves; a table added or removed is each of its leaves). */
function diff(a: unknown, b: unknown, prefix: string[] = []): string[][] {
  if (isTable(a) && isTable(b)) {
    const keys = [...new Set([...Object.keys(a), ...Object.keys(b)])].sort();
    return keys.flatMap((k) => diff(a[k], b[k], [...prefix, k]));
  }
  if (isTable(a) && b === undefined) return diff(a, {}, prefix);
  if (isTable(b) && a === undefined) return diff({}, b, prefix);
  if (a === undefined && Array.isArray(b) && b.length > 0 && b.every(isTable)) return diff([], b, prefix);
  if (b === undefined && Array.isArray(a) && a.length > 0 && a.every(isTable)) return diff(a, [], prefix);
  if (Array.isArray(a) && Array.isArray(b) && a.every(isTable) && b.every(isTable) && (a.length > 0 || b.length > 0)) {
    // An array of tables ([[upstream]]): entry by entry.
    const n = Math.max(a.length, b.length);
    return Array.from({ length: n }, (_, i) => diff(a[i], b[i], [...prefix, String(i)])).flat();
  }
  return JSON.stringify(a) === JSON.stringify(b) ? [] : [prefix];
}

function at(doc: unknown, path: readonly string[]): unknown {
  let cur = doc;
  for (const k of path) cur = isTable(cur) || Array.isArray(cur) ? (cur as Record<string, unknown>)[k] : undefined;
  return cur;
}

function isTable(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v) && !(v instanceof Date);
}

/**
 * A value as a line shows it: short, secrets never (values under env are not shown at all by the callers).
 * A value is cut between words and a list between its members, never inside one: a flag's value cut in half
 * (`"--api-key","sk-12…`) or a URL cut before the `@` that ends its password is no longer a secret to the
 * redactor every reader sees a line through, so its start would be shown. One word longer than a line is
 * shown whole up to {@link WORD_MAX} characters (a URL a person must check), else only as its length.
 */
function show(v: unknown): string {
  if (v === undefined) return "(unset)";
  const text = typeof v === "string" ? JSON.stringify(v) : JSON.stringify(v) ?? String(v);
  if (text.length <= 80) return text;
  if (!Array.isArray(v)) return clip(text);
  let shown = "[";
  for (const member of v) {
    const next = `${shown === "[" ? "" : ","}${JSON.stringify(member) ?? "null"}`;
    if (shown.length + next.length > 76) break;
    shown += next;
  }
  return `${shown}${shown === "[" ? "" : ","}…]`;
}

const WORD_MAX = 1024;

/** A long text cut at its last whitespace within 77 characters; one long first word whole (at most WORD_MAX), else its length. */
function clip(text: string): string {
  const space = text.slice(0, 78).search(/\s\S*$/);
  if (space > 0) return `${text.slice(0, space)} …`;
  const word = /^\S+/.exec(text)?.[0] ?? "";
  if (word.length > WORD_MAX) return `(${text.length} characters)`;
  return word.length === text.length ? text : `${word} …`;
}
