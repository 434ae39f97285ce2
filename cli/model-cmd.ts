import { basename } from "node:path";
import { CliError, cliDiagnostic, EXIT_ERROR, EXIT_OK, jsonFailure, parseCommandArgs, UsageError, type CliIo } from "./io.js";
import { localServer } from "./box.js";
import { BOX_OPTIONS } from "./plan-cmd.js";
import { stateDir } from "./paths.js";

export const MODEL_HELP = `hal0 model pull REPO FILE [--id ID] [--revision REV] [--draft FILE] [--draft-repo REPO]
                [--mmproj FILE] [--json] [--config DIR] [--state DIR]

Pulls FILE of the Hugging Face repository REPO (org/name) into [models] store (else the
first of [models] roots), verifies its sha256 against the Hub's, and registers it in
models.toml as ID (default: the file's stem, lowercased and fitted to the id grammar)
through the same pipeline as every change. --draft and --mmproj files come down with it
and are wired as the model's draft and mmproj. The Hub is $HF_ENDPOINT (default
https://huggingface.co) and $HF_TOKEN its token (sent to that host only). A pull that a
stopped hal0 left under way resumes from the bytes on disk (a Range request): hal0 serve
resumes it at its start, or, with no serve on the state folder, the next pull of the same
file under the same id. One model pull per state folder at a time (model.pull_busy).
Progress: a bar on a terminal, else (and with --json) one JSON line per update; a pull
that fails or is refused under --json ends with its failure document on one line too.
Exit status: 0 pulled and registered, 1 refused or failed (model.not_found,
model.already_exists, model.pull_failed with its reason: checksum, no_space, register, …),
64 usage error.`;

/** `hal0 model pull`: the pull runs in this process, on the same stores `hal0 serve` uses. */
export async function runModel(args: string[], io: CliIo): Promise<number> {
  const { values, positionals } = parseCommandArgs({
    args, strict: true, allowPositionals: true,
    options: { ...BOX_OPTIONS, id: { type: "string" }, revision: { type: "string" }, draft: { type: "string" }, "draft-repo": { type: "string" }, mmproj: { type: "string" }, json: { type: "boolean", default: false } },
  });
  const [verb, repo, file, ...extra] = positionals;
  if (verb !== "pull" || !repo || !file || extra.length > 0) throw new UsageError("expected: hal0 model pull REPO FILE");
  const { ApiError } = await import("../server/errors.js");
  const { invoke } = await import("../server/dispatch.js");
  const { proposeModelId, splitParts } = await import("../reconciler/host/model-scan.js");
  const { OWNER } = await import("../server/identity/tokens.js");
  const { acquirePullLock, serveHolder } = await import("../reconciler/lock.js");
  const { isLive } = await import("../server/pulls/store.js");
  const state = stateDir(values.state, io.env, io.cwd);
  const release = await acquirePullLock(state, `hal0 model pull ${repo} ${file}`);
  const hal0 = await localServer(values, io).catch(async (err: unknown) => {
    await release();
    throw err;
  });
  const pulls = hal0.pulls!;
  try {
    // The file's stem, as is: an id already registered is refused (model.already_exists), never renamed behind the person's back.
    const id = values.id ?? proposeModelId(basename(file), new Set());
    const left = pulls.store.get(id);
    // Under way in the database, with no hal0 serve here and this command the only pull: nobody works on it (a pull that was interrupted).
    if (left !== undefined && isLive(left) && (await serveHolder(state)) === undefined) {
      // A pull is recorded by the file it registers: a split model's first part, whichever part was named.
      if (left.hf_repo !== repo || left.hf_filename !== splitParts(file)[0]) {
        throw new CliError("model.already_exists", `a pull of model ${id} (${left.hf_repo} ${left.hf_filename}) was left under way by a hal0 that stopped; pull that again to resume it, or give this one another --id`);
      }
      io.stderr.write(`note: resuming the pull of ${id} that a hal0 which stopped left under way (${mib(left.bytes)} on disk)\n`);
      pulls.worker.resumeOne(id);
    } else {
      const route = hal0.routes.find((r) => r.method === "POST" && r.path === "/api/models/{model_id}/pull")!;
      const body = { hf_repo: repo, hf_filename: file, revision: values.revision, draft_filename: values.draft, draft_repo: values["draft-repo"], mmproj_filename: values.mmproj };
      try {
        // The person at the shell holds the state folder: an operator (as `hal0 agent approvals` decides).
        await invoke(hal0, route, { params: { model_id: id }, query: {}, body: JSON.parse(JSON.stringify(body)), caller: { kind: "operator", agent: OWNER, private: false, via: "cli" }, requestId: `cli-${process.pid}`, tool: "model_pull" });
      } catch (err) {
        if (err instanceof ApiError) throw new CliError(err.code, err.code === "validation.invalid" ? cliFieldMessage(err.details) ?? err.message : err.message);
        throw err;
      }
    }
    const done = await ended(pulls, id, reporter(io, values.json));
    // A failed pull is model.pull_failed, under --json too: its failure document after the progress lines, on one
    // line as they are, so a JSON-lines reader (`--json | tail -1 | jq`) reads it as it reads the last update.
    if (done.state !== "done") {
      const failure = new CliError("model.pull_failed", `${done.state}${done.reason ? ` (${done.reason})` : ""}: ${done.error ?? ""}`.trim());
      if (!values.json) throw failure;
      io.stdout.write(`${JSON.stringify(jsonFailure(EXIT_ERROR, [cliDiagnostic(failure.code, failure.message)]))}\n`);
      return EXIT_ERROR;
    }
    if (!values.json) io.stdout.write(`${id}: pulled ${done.hf_repo}/${done.hf_filename} (${mib(done.size ?? done.bytes)}, sha256 ${done.sha256}) → ${done.dest}; registered in models.toml\n`);
    return EXIT_OK;
  } finally {
    await hal0.close();
    await release();
  }
}

/** The pull route's fields as this command names them. */
const CLI_NAMES: Readonly<Record<string, string>> = {
  "path.model_id": "--id", "body.hf_repo": "REPO", "body.hf_filename": "FILE", "body.revision": "--revision",
  "body.draft_filename": "--draft", "body.draft_repo": "--draft-repo", "body.mmproj_filename": "--mmproj",
};

/** A refusal of the route's input, in the command line's words: `--id: an id of …` rather than `path.model_id: …`; undefined when a field has no name here. */
function cliFieldMessage(details: Record<string, unknown>): string | undefined {
  const fields = Array.isArray(details.fields) ? (details.fields as Array<{ loc?: unknown; msg?: unknown }>) : [];
  const parts = fields.map((f) => {
    const name = Array.isArray(f.loc) ? CLI_NAMES[f.loc.join(".")] : undefined;
    return name === undefined ? undefined : `${name}: ${String(f.msg)}`;
  });
  if (parts.length === 0 || parts.some((p) => p === undefined)) return undefined;
  return `invalid ${parts.length === 1 ? "argument" : "arguments"}: ${parts.join("; ")}`;
}

/** A bar redrawn in place on a terminal; one JSON line per update otherwise (and with --json). */
function reporter(io: CliIo, json: boolean): (p: PullView) => void {
  let last = "";
  return (p) => {
    if (json || io.stdout.isTTY !== true) {
      const line = JSON.stringify({ model_id: p.model_id, state: p.state, bytes: p.bytes, size: p.size, rate: p.rate, eta_s: p.eta_s, reason: p.reason, error: p.error });
      if (line !== last) io.stdout.write(`${line}\n`);
      last = line;
      return;
    }
    const width = 30;
    const frac = p.size ? Math.min(1, p.bytes / p.size) : 0;
    const bar = `${"#".repeat(Math.round(frac * width))}${".".repeat(width - Math.round(frac * width))}`;
    const rate = p.rate ? ` ${mib(p.rate)}/s` : "";
    const eta = p.eta_s !== null ? ` eta ${p.eta_s}s` : "";
    io.stdout.write(`\r\u001b[2K${p.model_id} [${bar}] ${(frac * 100).toFixed(0).padStart(3)}% ${mib(p.bytes)}/${p.size ? mib(p.size) : "?"}${rate}${eta} ${p.state}${p.state === "done" || p.state === "failed" ? "\n" : ""}`);
  };
}

function mib(n: number): string {
  return `${(n / 1024 / 1024).toFixed(1)} MiB`;
}

/**
 * `hal0 apply` with `[models] pull_on_apply`: installs the Hub models the
 * enabled slots use whose files are missing, in this process, before the
 * plan is made (each a change of its model's entry, like `hal0 model pull`).
 * Throws model.pull_failed when one does not finish.
 */
export async function installMissing(flags: { config?: string; state?: string }, io: CliIo, ids: readonly string[]): Promise<void> {
  const { OWNER } = await import("../server/identity/tokens.js");
  const hal0 = await localServer(flags, io);
  const pulls = hal0.pulls!;
  try {
    const show = reporter(io, false);
    for (const id of ids) {
      io.stdout.write(`model ${id}: not installed; pulling it first ([models] pull_on_apply = true)\n`);
      await pulls.startInstall(id, { kind: "operator", agent: OWNER, private: false, via: "cli" });
      const done = await ended(pulls, id, show);
      if (done.state !== "done") throw new CliError("model.pull_failed", `model ${id}: ${done.state}${done.reason ? ` (${done.reason})` : ""}: ${done.error ?? ""}`.trim());
    }
  } finally {
    await hal0.close();
  }
}

type PullView = import("../server/pulls/worker.js").PullView;

/** Waits for a pull to end (done, failed, cancelled), showing each update. */
function ended(pulls: import("../server/pulls/service.js").PullService, id: string, show: (p: PullView) => void): Promise<PullView> {
  const over = (p: PullView) => p.state === "done" || p.state === "failed" || p.state === "cancelled";
  return new Promise((resolve) => {
    const on = (p: PullView) => {
      if (p.model_id !== id) return;
      show(p);
      if (over(p)) resolve(p);
    };
    pulls.worker.events.on("state", on);
    pulls.worker.events.on("progress", on);
    const now = pulls.status(id);
    if (over(now)) resolve(now);
  });
}
