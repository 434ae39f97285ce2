import { randomUUID } from "node:crypto";
import { existsSync, readdirSync } from "node:fs";
import { join } from "node:path";
import { z } from "zod";
import { ApiError } from "../../errors.js";
import { redactText } from "../../redact.js";
import type { BridgeContext, BridgeToolDef } from "../tool.js";
import { mayReachProfile, requireProfile } from "../access.js";
import { entryKind } from "../../../compiler/load.js";
import { PROFILE_NAME } from "../../../reconciler/hermes-files.js";
import { resolveHermesHome } from "../../../reconciler/hermes-plan.js";
import { withoutWords } from "../teach/pipeline.js";
import { finalOutput, profileHome, SESSION_ID } from "./hermes-adapter.js";
import { RUN_STATES, type RunRow, type RunService } from "./service.js";
import type { SkillChanges } from "./skills-diff.js";

/**
 * The nine run tools of hal0-agents (seed 000's agent bridge): start a Hermes
 * run of a profile, follow it (status, events with a cursor, wait, result),
 * continue its session, cancel it, list runs, list the profiles. A caller
 * reaches only the profiles of its admission (`ctx.profiles`): another
 * profile is refused, a run of another profile is not found. Starts,
 * messages and cancels are audited.
 */

const PROFILE = z.string().regex(PROFILE_NAME, "a Hermes profile name: letters, digits, - and _, at most 56");
const RUN_ID = z.string().regex(/^run_[0-9a-f]{16}$/, "a run id (run_<16 hex>)");
/** No leading `-`: it goes on Hermes's command line after `--resume`. */
const SESSION = z.string().regex(SESSION_ID, "a Hermes session id (letters, digits, _ . : -, not starting with -)");
const TOOLSET = z.string().regex(/^[a-z0-9][a-z0-9_-]{0,63}$/, "a toolset name (lowercase letters, digits, - and _)");
const PROMPT = z.string().min(1).max(32_000).regex(/^[^\0]*$/, "no NUL characters");

const startInput = z.strictObject({
  profile: PROFILE.describe("The Hermes profile to run (agent_profile_list)."),
  prompt: PROMPT.describe("What to ask Hermes (one-shot: `hermes chat -q`)."),
  toolsets: z.array(TOOLSET).max(32).optional().describe("Hermes toolsets to enable (`-t a,b`); absent: the profile's own."),
  max_turns: z.int().min(1).max(1000).optional().describe("At most this many agent turns (`--max-turns`)."),
  resume: SESSION.optional().describe("A Hermes session id to continue (`--resume`)."),
  timeout_s: z.int().min(1).max(604_800).optional().describe("Stop the run after this many seconds: at most, and by default, [hermes] run_timeout_s (1800 unless the operator set another)."),
});
const runIdInput = z.strictObject({ run_id: RUN_ID });

export const RUN_TOOLS: readonly BridgeToolDef[] = [
  {
    name: "agent_profile_list",
    defaultTier: "autonomous_read",
    description: "The Hermes profiles (<[hermes] home>/profiles/*) this caller may run.",
    input: z.strictObject({}),
    run: async (ctx) => {
      const root = await home(ctx);
      return { profiles: (await profilesOf(ctx)).filter((p) => mayReachProfile(ctx, p)).map((name) => profileView(root, name)) };
    },
  },
  {
    name: "agent_run_start",
    auditsItself: true,
    auditArgs: withoutPrompt,
    defaultTier: "autonomous_write",
    description: "Starts a headless Hermes run of a profile (queued while [bridge] max_runs run). Returns {run_id, state}; follow it with agent_run_events / agent_run_wait.",
    input: startInput,
    run: (ctx, raw) => audited(ctx, "agent_run_start", raw, undefined, async () => {
      const a = parse(startInput, raw);
      const runs = service(ctx);
      const limit = runs.defaultTimeoutS();
      if (a.timeout_s !== undefined && a.timeout_s > limit) {
        const msg = `at most [hermes] run_timeout_s (${limit}), when the box stops any run`;
        throw new ApiError("validation.invalid", `invalid arguments: timeout_s: ${msg}`, { fields: [{ loc: ["timeout_s"], msg, type: "too_big" }], max: limit });
      }
      await checkProfile(ctx, a.profile);
      const row = await runs.start({ profile: a.profile, prompt: a.prompt, toolsets: a.toolsets, maxTurns: a.max_turns, timeoutS: a.timeout_s, resume: a.resume, caller: actor(ctx) });
      return { run_id: row.id, state: row.state, run: view(row) };
    }),
  },
  {
    name: "agent_run_status",
    defaultTier: "autonomous_read",
    description: "A run's record: state (queued, running, done, failed, cancelled, interrupted), times, exit, session id.",
    input: runIdInput,
    run: async (ctx, raw) => ({ run: view(runOf(ctx, parse(runIdInput, raw).run_id)) }),
  },
  {
    name: "agent_run_events",
    defaultTier: "autonomous_read",
    description: "A run's output from byte cursor `after` (0: the start), in whole lines, at most 64 KiB a call. Ask again from `next` until `done`.",
    input: z.strictObject({ run_id: RUN_ID, after: z.int().min(0).optional().describe("The `next` of the previous call; absent: 0.") }),
    run: async (ctx, raw) => {
      const a = parse(z.strictObject({ run_id: RUN_ID, after: z.int().min(0).optional() }), raw);
      const row = runOf(ctx, a.run_id);
      const ev = service(ctx).events(row.id, a.after ?? 0);
      return { run_id: row.id, state: row.state, lines: ev.lines.map(redactText), next: ev.next, done: ev.done, dropped: ev.dropped };
    },
  },
  {
    name: "agent_run_wait",
    defaultTier: "autonomous_read",
    description: "Waits until the run ends or `timeout_s` passes (at most 300), then returns its record; `done` says which.",
    input: z.strictObject({ run_id: RUN_ID, timeout_s: z.number().min(0).max(300).describe("How long to wait, in seconds (at most 300).") }),
    run: async (ctx, raw) => {
      const a = parse(z.strictObject({ run_id: RUN_ID, timeout_s: z.number().min(0).max(300) }), raw);
      runOf(ctx, a.run_id);
      const row = (await service(ctx).wait(a.run_id, a.timeout_s * 1000))!;
      return { run: view(row), done: ended(row) };
    },
  },
  {
    name: "agent_run_message",
    auditsItself: true,
    auditArgs: withoutPrompt,
    defaultTier: "autonomous_write",
    description: "Continues an ended run's Hermes session with `text`: a new run of the same profile resuming its session id (`--resume`). Returns the new {run_id, state}.",
    input: z.strictObject({ run_id: RUN_ID, text: PROMPT }),
    run: (ctx, raw) => audited(ctx, "agent_run_message", raw, (raw as { run_id?: string })?.run_id, async () => {
      const a = parse(z.strictObject({ run_id: RUN_ID, text: PROMPT }), raw);
      const prev = runOf(ctx, a.run_id);
      if (!ended(prev)) throw new ApiError("run.active", `run ${prev.id} is still ${prev.state}; message it once it has ended`, { run_id: prev.id, state: prev.state });
      if (prev.session_id === null) throw new ApiError("run.no_session", `run ${prev.id} ended (${prev.state}) without a Hermes session id to continue`, { run_id: prev.id, state: prev.state });
      await checkProfile(ctx, prev.profile);
      const row = await service(ctx).start({
        profile: prev.profile, prompt: a.text, toolsets: JSON.parse(prev.toolsets) as string[], maxTurns: prev.max_turns ?? undefined,
        timeoutS: Math.min(prev.timeout_s, service(ctx).defaultTimeoutS()), resume: prev.session_id, parentRun: prev.id, caller: actor(ctx),
      });
      return { run_id: row.id, state: row.state, continues: prev.id, session_id: prev.session_id, run: view(row) };
    }),
  },
  {
    name: "agent_run_cancel",
    auditsItself: true,
    defaultTier: "autonomous_write",
    description: "Stops a queued or running run (its whole process group) and returns its record; an ended run is returned as it is.",
    input: runIdInput,
    run: (ctx, raw) => audited(ctx, "agent_run_cancel", raw, (raw as { run_id?: string })?.run_id, async () => {
      const row = runOf(ctx, parse(runIdInput, raw).run_id);
      return { run: view(await service(ctx).cancel(row.id)) };
    }),
  },
  {
    name: "agent_run_list",
    defaultTier: "autonomous_read",
    description: "Runs of the profiles this caller may reach, newest first (at most 200), optionally of one profile or state.",
    input: z.strictObject({ profile: PROFILE.optional(), state: z.enum(RUN_STATES).optional() }),
    run: async (ctx, raw) => {
      const a = parse(z.strictObject({ profile: PROFILE.optional(), state: z.enum(RUN_STATES).optional() }), raw);
      return { runs: service(ctx).list({ profile: a.profile, state: a.state, profiles: ctx.profiles }).map(view) };
    },
  },
  {
    name: "agent_run_result",
    defaultTier: "autonomous_read",
    description: "A run's answer: its output (the last 64 KiB, Hermes's session id line left out), session id, exit code and error; `done` false while it still runs.",
    input: runIdInput,
    run: async (ctx, raw) => {
      const row = runOf(ctx, parse(runIdInput, raw).run_id);
      const tail = service(ctx).tail(row.id);
      return {
        run_id: row.id, state: row.state, done: ended(row), exit_code: row.exit_code, session_id: row.session_id, error: row.error,
        output: redactText(finalOutput(tail.text)), truncated: tail.truncated,
      };
    },
  },
];

// ── helpers ──────────────────────────────────────────────────────────────

function parse<T extends z.ZodType>(schema: T, raw: unknown): z.infer<T> {
  const r = schema.safeParse(raw ?? {});
  if (r.success) return r.data;
  const fields = r.error.issues.map((i) => ({ loc: i.path.map(String), msg: i.message, type: i.code }));
  throw new ApiError("validation.invalid", `invalid arguments: ${fields.map((f) => `${f.loc.join(".") || "(arguments)"}: ${f.msg}`).join("; ")}`, { fields });
}

function service(ctx: BridgeContext): RunService {
  const runs = ctx.d.runs;
  if (!runs) throw new ApiError("run.unavailable", "this server runs no Hermes runs");
  return runs;
}

function actor(ctx: BridgeContext): string {
  return `${ctx.caller.kind}:${ctx.caller.agent}`;
}

async function home(ctx: BridgeContext): Promise<string> {
  // A relative home is the config folder's, as the wiring reads it (never hal0's working folder).
  return resolveHermesHome((ctx.d.box.lastSettings() ?? (await ctx.d.box.model()).settings).hermes.home, ctx.d.box.root);
}

/** The profile folders under `[hermes] home`/profiles (a link to a folder counts), sorted. */
async function profilesOf(ctx: BridgeContext): Promise<string[]> {
  const dir = join(await home(ctx), "profiles");
  try {
    // A profile folder may be a symbolic link to one kept elsewhere (the Hermes wiring counts it too).
    return readdirSync(dir, { withFileTypes: true }).filter((e) => PROFILE.safeParse(e.name).success && entryKind(join(dir, e.name), e) === "folder").map((e) => e.name).sort();
  } catch {
    return [];
  }
}

function profileView(hermesHome: string, name: string): { name: string; config: boolean; soul: boolean } {
  const root = profileHome(hermesHome, name);
  return { name, config: existsSync(join(root, "config.yaml")), soul: existsSync(join(root, "SOUL.md")) };
}

/** Refuses a profile out of the caller's reach (before saying whether it exists), then one that is not there. */
async function checkProfile(ctx: BridgeContext, profile: string): Promise<void> {
  requireProfile(ctx, profile);
  const known = await profilesOf(ctx);
  if (!known.includes(profile)) throw new ApiError("run.profile_not_found", `no Hermes profile ${profile}`, { profile, known: known.filter((p) => mayReachProfile(ctx, p)) });
}

/** The run, when it exists and its profile is within the caller's reach; else `run.not_found`. */
function runOf(ctx: BridgeContext, id: string): RunRow {
  const row = service(ctx).get(id);
  if (!row || !mayReachProfile(ctx, row.profile)) throw new ApiError("run.not_found", `no run ${id}`, { run_id: id });
  return row;
}

function ended(row: RunRow): boolean {
  return row.state !== "queued" && row.state !== "running";
}

/** A run as the tools show it: no pid, the prompt redacted like any reply. */
function view(row: RunRow) {
  return {
    run_id: row.id, profile: row.profile, state: row.state, reason: row.reason, prompt: redactText(row.prompt), toolsets: JSON.parse(row.toolsets) as string[],
    max_turns: row.max_turns, timeout_s: row.timeout_s, resume: row.resume, continues: row.parent_run, session_id: row.session_id, caller: row.caller,
    created_at: row.created_at, started_at: row.started_at, ended_at: row.ended_at, exit_code: row.exit_code, signal: row.signal, error: row.error, output_bytes: row.log_bytes,
    // What Hermes itself did to the profile's skills/ while the run ran (skill_manage, its file tools): null until it ends, or when not known.
    skill_changes: row.skill_changes === null ? null : (JSON.parse(row.skill_changes) as SkillChanges),
  };
}

/**
 * The arguments as an audit row keeps them: a prompt (a start's `prompt`, a
 * message's `text`) as its size and hash, never its words. Any caller reads
 * the audit log; the prompt is for those the run's profile admits.
 */
export function withoutPrompt(args: unknown): unknown {
  return withoutWords(args, ["prompt", "text"]);
}

/** Runs a start / message / cancel and records it in the audit log (success or refusal), as the admin tools' calls are. */
async function audited<T extends object>(ctx: BridgeContext, tool: string, args: unknown, target: string | undefined, fn: () => Promise<T>): Promise<T> {
  const started = performance.now();
  const call = { params: target === undefined ? {} : { run_id: target }, query: {}, body: withoutPrompt(args), caller: ctx.caller, requestId: randomUUID(), tool };
  const route = { method: "POST", path: "/mcp/agents" } as const;
  try {
    const out = await fn();
    // A start's row names the run it made (its target), so a run's history is one query.
    const made = (out as { run_id?: string }).run_id;
    const params = target === undefined && made !== undefined ? { run_id: made } : call.params;
    ctx.d.audit.record({ call: { ...call, params }, route, outcome: "ok", durationMs: performance.now() - started, tool });
    return out;
  } catch (err) {
    ctx.d.audit.record({ call, route, outcome: "error", errorCode: err instanceof ApiError ? err.code : "system.internal", durationMs: performance.now() - started, tool });
    throw err;
  }
}
