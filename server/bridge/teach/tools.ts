import { randomUUID } from "node:crypto";
import { lstat, readdir } from "node:fs/promises";
import { join } from "node:path";
import { z } from "zod";
import { PROFILE_NAME } from "../../../reconciler/hermes-files.js";
import { resolveHermesHome } from "../../../reconciler/hermes-plan.js";
import { requireProfile as requireAdmission } from "../access.js";
import { profileHome } from "../runs/hermes-adapter.js";
import { ApiError } from "../../errors.js";
import { checkPathArgs } from "../../path-args.js";
import type { BridgeContext, BridgeProposal, BridgeToolDef } from "../tool.js";
import { appendEntry, checkSkill, memoryChars, memoryEntries, memoryLimits, SKILL_NAME, splitSkill } from "./format.js";
import { commitPlan, planChange, readProfileFile, sha256, textRecord, underCommitLock, viewOf, withoutWords, type ProfileChange, type ProfileEdit } from "./pipeline.js";

/**
 * The seven tools that teach a Hermes profile (seed 000's agent bridge): read
 * its skills, memory and persona; write a skill (gated: a skill changes what
 * the agent does) or one memory entry. A profile is a Hermes home folder,
 * `<[hermes] home>/profiles/<profile>/`: config.yaml, SOUL.md,
 * memories/MEMORY.md and USER.md, skills/[<category>/]<name>/SKILL.md.
 * Every write goes through ./pipeline.ts (planned with its diff, stale-checked,
 * atomic); the file formats are ./format.ts's.
 */

const Base = z.record(z.string(), z.string().nullable()).optional()
  .describe("The file hashes you planned against (a proposal's `base`, or the `sha256` a read returned, keyed by file); the write is refused as teach.stale if any moved.");
const Profile = z.string().describe("A Hermes profile (a folder under <[hermes] home>/profiles/) your admission reaches");
const Category = z.string().optional().describe("The skill's category folder (skills/<category>/<name>/); absent = a skill directly under skills/");
const Name = z.string().describe("The skill's folder name, [a-z0-9][a-z0-9._-]{0,63}; SKILL.md's front matter `name` must be the same");

const ProfileArgs = z.object({ profile: Profile });
const SkillArgs = z.object({ profile: Profile, category: Category, name: Name });
const SkillPutArgs = z.object({ profile: Profile, category: Category, name: Name, text: z.string().describe("The whole SKILL.md: `---` front matter with name and description, `---`, then the instructions (at most 64 KiB)"), base: Base });
const SkillDeleteArgs = z.object({ profile: Profile, category: Category, name: Name, base: Base });
const MemoryAddArgs = z.object({ profile: Profile, text: z.string().describe("One memory entry (it may span lines; no line that is only `§`)"), base: Base });

type SkillArgs = z.infer<typeof SkillArgs>;

/**
 * The profile folder of `profile` for this caller: checked like a path
 * argument (mcp.invalid_arg), then Hermes's profile-name grammar
 * (teach.invalid_name), then the caller's admission (the bridge's one rule,
 * bridge.profile_denied, before anything on disk is looked at), then
 * that the folder exists (teach.profile_not_found).
 */
export async function requireProfile(ctx: BridgeContext, profile: string): Promise<string> {
  checkPathArgs({ path: "/{profile}" }, { profile });
  if (!PROFILE_NAME.test(profile)) throw new ApiError("teach.invalid_name", `profile \`${profile}\` is not a Hermes profile name ([A-Za-z0-9_-]{1,56})`, { arg: "profile", value: profile });
  requireAdmission(ctx, profile);
  const model = await ctx.d.box.model();
  const root = profileHome(resolveHermesHome(model.settings.hermes.home, model.root), profile);
  const info = await lstat(root).catch(() => undefined);
  if (info === undefined) throw new ApiError("teach.profile_not_found", `no Hermes profile \`${profile}\` (${root} does not exist)`, { profile });
  if (!info.isDirectory()) throw new ApiError("teach.unsafe_path", `${root} is not a plain folder (a link or a file); hal0 does not teach through it`, { profile });
  return root;
}

/** `skills/[<category>/]<name>`, from names checked like path arguments and by Hermes's skill-name grammar. */
function skillDir(args: Pick<SkillArgs, "category" | "name">): string {
  const named = args.category === undefined ? { name: args.name } : { category: args.category, name: args.name };
  checkPathArgs({ path: args.category === undefined ? "/{name}" : "/{category}/{name}" }, named);
  for (const [arg, value] of Object.entries(named)) {
    if (!SKILL_NAME.test(value)) throw new ApiError("teach.invalid_name", `${arg} \`${value}\` must match [a-z0-9][a-z0-9._-]{0,63}`, { arg, value });
  }
  return args.category === undefined ? `skills/${args.name}` : `skills/${args.category}/${args.name}`;
}

interface SkillEntry {
  readonly category: string | null;
  readonly name: string;
  readonly file: string;
  readonly description: string | null;
  /** Why Hermes would not load it, when it would not. */
  readonly problem?: string;
}

/**
 * The profile's skills as Hermes lays them out: skills/<name>/SKILL.md and
 * skills/<category>/<name>/SKILL.md; links and dot-folders under skills/
 * skipped, and a skills/ that is itself a link (or not a folder) refused
 * (teach.unsafe_path), as a read of a skill through it is.
 */
async function listSkills(root: string): Promise<SkillEntry[]> {
  const skills = await lstat(join(root, "skills")).catch(() => undefined);
  if (skills !== undefined && !skills.isDirectory()) throw new ApiError("teach.unsafe_path", `skills is ${skills.isSymbolicLink() ? "a symbolic link" : "not a folder"}; hal0 does not read through it`, { file: "skills" });
  const out: SkillEntry[] = [];
  const dirs = async (rel: string) => (await readdir(join(root, rel), { withFileTypes: true }).catch(() => [])).filter((e) => e.isDirectory() && !e.name.startsWith(".")).map((e) => e.name).sort();
  const entry = async (category: string | null, name: string, file: string): Promise<SkillEntry> => {
    const text = await readProfileFile(root, file).catch(() => null);
    const head = text === null ? { problem: "SKILL.md is not a plain file" } : splitSkill(text);
    if ("problem" in head) return { category, name, file, description: null, problem: head.problem };
    return { category, name, file, description: typeof head.front.description === "string" ? head.front.description : null };
  };
  for (const top of await dirs("skills")) {
    if (await isFile(root, `skills/${top}/SKILL.md`)) {
      out.push(await entry(null, top, `skills/${top}/SKILL.md`));
      continue;
    }
    for (const name of await dirs(`skills/${top}`)) {
      if (await isFile(root, `skills/${top}/${name}/SKILL.md`)) out.push(await entry(top, name, `skills/${top}/${name}/SKILL.md`));
    }
  }
  return out;
}

async function isFile(root: string, rel: string): Promise<boolean> {
  return (await lstat(join(root, rel)).catch(() => undefined))?.isFile() ?? false;
}

/** Planned against `base` (the card's hashes, or none), then committed: what a write tool runs. */
async function commitChange(change: ProfileChange, base: Readonly<Record<string, string | null>> | undefined): Promise<Awaited<ReturnType<typeof planChange>>> {
  const plan = await planChange(change, base);
  await commitPlan(plan);
  return plan;
}

/** The audit row's target of a skill write: its profile, category (when it has one) and name. */
function skillTarget(args: Pick<SkillArgs, "category" | "name"> & { profile: string }): Record<string, string> {
  return { profile: args.profile, ...(args.category === undefined ? {} : { category: args.category }), name: args.name };
}

/**
 * Runs one write: planned (against `base` when the caller sent it), committed,
 * and audited as the tool (`POST /mcp/agents/<tool>`, the skill or file as
 * its target; a text argument recorded as its size and hash, not its words).
 */
async function write(ctx: BridgeContext, tool: string, target: Record<string, string>, recorded: Record<string, unknown>, work: () => Promise<unknown>): Promise<unknown> {
  const started = performance.now();
  const call = { params: target, query: {}, body: recorded, caller: ctx.caller, requestId: randomUUID(), tool };
  const route = { method: "POST" as const, path: `/mcp/agents/${tool}` };
  try {
    const result = await work();
    ctx.d.audit.record({ call, route, outcome: "ok", durationMs: performance.now() - started, tool });
    return result;
  } catch (err) {
    ctx.d.audit.record({ call, route, outcome: "error", errorCode: err instanceof ApiError ? err.code : "system.internal", durationMs: performance.now() - started, tool });
    throw err;
  }
}

/** The arguments as an audit row keeps them: a `text` as its size and hash, never its words. */
function withoutText(args: unknown): unknown {
  return withoutWords(args, ["text"]);
}

async function skillPutChange(ctx: BridgeContext, args: z.infer<typeof SkillPutArgs>): Promise<ProfileChange> {
  const root = await requireProfile(ctx, args.profile);
  const dir = skillDir(args);
  checkSkill(args.name, args.text);
  // Hermes finds a skill by its folder name alone: a second folder of the same name elsewhere would shadow one of them.
  const twin = (await listSkills(root)).find((s) => s.name === args.name && s.category !== (args.category ?? null));
  if (twin) throw new ApiError("teach.bad_skill", `profile ${args.profile} already has a skill named \`${args.name}\` (${twin.file}); Hermes finds skills by name, so put it there or delete that one first`, { name: args.name, existing: twin.file });
  const file = `${dir}/SKILL.md`;
  const exists = (await readProfileFile(root, file)) !== null;
  const edits: ProfileEdit[] = [{ op: "text", file, text: args.text }];
  return { profile: args.profile, root, edits, summary: `${exists ? "update" : "create"} skill ${dir.slice("skills/".length)} of Hermes profile ${args.profile}` };
}

async function skillDeleteChange(ctx: BridgeContext, args: z.infer<typeof SkillDeleteArgs>): Promise<ProfileChange> {
  const root = await requireProfile(ctx, args.profile);
  const dir = skillDir(args);
  if (!(await isFile(root, `${dir}/SKILL.md`))) throw new ApiError("teach.not_found", `profile ${args.profile} has no skill ${dir}/SKILL.md`, { profile: args.profile, file: `${dir}/SKILL.md` });
  return { profile: args.profile, root, edits: [{ op: "delete_dir", dir }], summary: `delete skill ${dir.slice("skills/".length)} (its whole folder) of Hermes profile ${args.profile}` };
}

const MEMORY_FILE = "memories/MEMORY.md";
const USER_FILE = "memories/USER.md";

/** The append of one entry to MEMORY.md, or `duplicate` when Hermes already holds that exact entry (nothing to write). */
async function memoryAddChange(ctx: BridgeContext, args: z.infer<typeof MemoryAddArgs>): Promise<{ change: ProfileChange; entries: number; chars: number; limit: number } | { duplicate: true }> {
  const root = await requireProfile(ctx, args.profile);
  const limit = memoryLimits(await readProfileFile(root, "config.yaml")).memory;
  const before = await readProfileFile(root, MEMORY_FILE);
  const appended = appendEntry(before, args.text, limit);
  if ("duplicate" in appended) return { duplicate: true };
  const change: ProfileChange = { profile: args.profile, root, edits: [{ op: "derived", file: MEMORY_FILE, before, text: appended.after }], summary: `add one memory entry to MEMORY.md of Hermes profile ${args.profile}` };
  return { change, entries: appended.entries, chars: appended.chars, limit };
}

async function proposal(change: ProfileChange, base: Readonly<Record<string, string | null>> | undefined): Promise<BridgeProposal> {
  const view = viewOf(await planChange(change, base));
  return { summary: view.summary, files: view.files, base: view.base };
}

export const TEACH_TOOLS: readonly BridgeToolDef[] = [
  {
    name: "profile_skill_list",
    defaultTier: "autonomous_read",
    asIs: true,
    description: "List a Hermes profile's skills: category (null for one directly under skills/), name, description from SKILL.md's front matter, and `problem` when Hermes would not load it.",
    input: ProfileArgs,
    run: async (ctx, args: z.infer<typeof ProfileArgs>) => {
      const skills = await listSkills(await requireProfile(ctx, args.profile));
      return { profile: args.profile, skills, count: skills.length };
    },
  },
  {
    name: "profile_skill_get",
    defaultTier: "autonomous_read",
    asIs: true,
    description: "Read one skill of a Hermes profile: SKILL.md's text, its parsed front matter, and its sha256 (send it back as `base` to put over exactly this version).",
    input: SkillArgs,
    run: async (ctx, args: SkillArgs) => {
      const root = await requireProfile(ctx, args.profile);
      const file = `${skillDir(args)}/SKILL.md`;
      const text = await readProfileFile(root, file);
      if (text === null) throw new ApiError("teach.not_found", `profile ${args.profile} has no skill ${file}`, { profile: args.profile, file });
      const head = splitSkill(text);
      return { profile: args.profile, category: args.category ?? null, name: args.name, file, text, sha256: sha256(text), ...("problem" in head ? { front_matter: null, problem: head.problem } : { front_matter: head.front }) };
    },
  },
  {
    name: "profile_skill_put",
    auditsItself: true,
    auditArgs: withoutText,
    defaultTier: "gated",
    description: "Create or replace one skill's SKILL.md in a Hermes profile (front matter with name = the folder name and a description; at most 64 KiB). Gated: an operator approves the diff first.",
    input: SkillPutArgs,
    propose: async (ctx, args: z.infer<typeof SkillPutArgs>) => proposal(await skillPutChange(ctx, args), args.base),
    run: (ctx, args: z.infer<typeof SkillPutArgs>) => write(ctx, "profile_skill_put", skillTarget(args), textRecord(args.text), async () => {
      return { committed: true, ...viewOf(await commitChange(await skillPutChange(ctx, args), args.base)) };
    }),
  },
  {
    name: "profile_skill_delete",
    auditsItself: true,
    defaultTier: "gated",
    description: "Delete one skill of a Hermes profile: its whole folder (SKILL.md and any references/, scripts/ … in it). Gated: an operator approves first.",
    input: SkillDeleteArgs,
    propose: async (ctx, args: z.infer<typeof SkillDeleteArgs>) => proposal(await skillDeleteChange(ctx, args), args.base),
    run: (ctx, args: z.infer<typeof SkillDeleteArgs>) => write(ctx, "profile_skill_delete", skillTarget(args), {}, async () => {
      return { committed: true, ...viewOf(await commitChange(await skillDeleteChange(ctx, args), args.base)) };
    }),
  },
  {
    name: "profile_memory_list",
    defaultTier: "autonomous_read",
    asIs: true,
    description: "Read a Hermes profile's memory: the entries of memories/MEMORY.md (the agent's notes) and memories/USER.md (about its user), each store's size, character limit and sha256.",
    input: ProfileArgs,
    run: async (ctx, args: z.infer<typeof ProfileArgs>) => {
      const root = await requireProfile(ctx, args.profile);
      const limits = memoryLimits(await readProfileFile(root, "config.yaml"));
      const store = async (file: string, limit: number) => {
        const text = await readProfileFile(root, file);
        const entries = memoryEntries(text);
        return { file, exists: text !== null, entries, count: entries.length, chars: memoryChars(entries), limit, sha256: text === null ? null : sha256(text) };
      };
      return { profile: args.profile, memory: await store(MEMORY_FILE, limits.memory), user: await store(USER_FILE, limits.user) };
    },
  },
  {
    name: "profile_memory_add",
    auditsItself: true,
    auditArgs: withoutText,
    defaultTier: "autonomous_write",
    description: "Append one entry to a Hermes profile's memories/MEMORY.md (Hermes's `§`-separated format); every other byte of the file stays as it was. An entry already there is not added twice.",
    input: MemoryAddArgs,
    propose: async (ctx, args: z.infer<typeof MemoryAddArgs>) => {
      const add = await memoryAddChange(ctx, args);
      if ("duplicate" in add) return { summary: `memory entry already in MEMORY.md of Hermes profile ${args.profile}: nothing to write`, files: [], base: {} };
      return proposal(add.change, args.base);
    },
    // Read, appended and written under the commit lock: entries added at once (two agents, or one in a loop) all land.
    run: (ctx, args: z.infer<typeof MemoryAddArgs>) => write(ctx, "profile_memory_add", { profile: args.profile }, textRecord(args.text), () => underCommitLock(async (commit) => {
      const add = await memoryAddChange(ctx, args);
      if ("duplicate" in add) return { committed: false, added: false, duplicate: true, profile: args.profile, file: MEMORY_FILE };
      const plan = await planChange(add.change, args.base);
      await commit(plan);
      return { committed: true, added: true, entries: add.entries, chars: add.chars, limit: add.limit, ...viewOf(plan) };
    })),
  },
  {
    name: "profile_persona_get",
    defaultTier: "autonomous_read",
    asIs: true,
    description: "Read a Hermes profile's persona: SOUL.md's text and sha256.",
    input: ProfileArgs,
    run: async (ctx, args: z.infer<typeof ProfileArgs>) => {
      const root = await requireProfile(ctx, args.profile);
      const text = await readProfileFile(root, "SOUL.md");
      if (text === null) throw new ApiError("teach.not_found", `profile ${args.profile} has no SOUL.md`, { profile: args.profile, file: "SOUL.md" });
      return { profile: args.profile, file: "SOUL.md", text, sha256: sha256(text) };
    },
  },
];
