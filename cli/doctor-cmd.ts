import { resolve } from "node:path";
import { doctorRows, type DoctorRow } from "../reconciler/doctor.js";
import { redactText } from "../server/redact.js";
import { stateHermesCredentials } from "../server/identity/hermes-credentials.js";
import { EXIT_ERROR, EXIT_OK, jsonFailure, parseCommandArgs, type CliIo } from "./io.js";
import { compileTree, stateDir } from "./paths.js";
import { BOX_OPTIONS } from "./plan-cmd.js";

export const DOCTOR_HELP = `hal0 doctor [--config DIR] [--state DIR] [--unit-dir DIR] [--json]

Checks the box and prints one row per check (ok / warn / fail, with a hint):
tree, state_folder, runtime, runner:<prefix> (one per distinct runner: found, and what its
--version printed, 2 s at most), model_files (every enabled slot's model files exist and are
readable), slot_ports (warns for an enabled slot's port in the kernel's ephemeral range that is
not reserved), hermes_profiles_mcp, hermes_default_memory, hermes_brain_memory, service_unit (the
hal0.service 'hal0 service install' wrote, if any: serves this config and state folder, its
node and hal0 exist, 'systemd-analyze verify' is clean when installed). Changes nothing.
  --unit-dir DIR  where hal0.service is (default /etc/systemd/system)
  --json   print {ok, rows, diagnostics} (diagnostics: what the compiler said of the tree, as
           'hal0 validate --json' lists it); a failed check: {ok: false, exit_code, error_count,
           warning_count, diagnostics, rows}
Exit status: 0 no check fails, 1 a check fails or the doctor cannot run (config.not_found),
64 usage error.`;

export async function runDoctor(args: string[], io: CliIo): Promise<number> {
  const { values } = parseCommandArgs({ args, strict: true, allowPositionals: false, options: { ...BOX_OPTIONS, json: { type: "boolean" }, "unit-dir": { type: "string" } } });
  const tree = await compileTree(values, io);
  const state = stateDir(values.state, io.env, io.cwd);
  // A runner's --version answer is run with its slot's env and quoted in its row: every row is masked as the API's doctor_report is.
  const rows = (await doctorRows({ ...tree, stateDir: state, env: io.env, hermesCredentials: stateHermesCredentials(state), unitDir: values["unit-dir"] === undefined ? undefined : resolve(io.cwd, values["unit-dir"]) })).map((r) => ({ ...r, message: redactText(r.message), hint: redactText(r.hint) }));
  const failed = rows.some((r) => r.status === "fail");
  // A failed check is a failure document too (exit_code and the counts, as every command's --json failure), with the rows beside it.
  const failure = failed ? jsonFailure(EXIT_ERROR, tree.diagnostics) : undefined;
  if (values.json) io.stdout.write(`${JSON.stringify(failure ? { ...failure, rows } : { ok: true, rows, diagnostics: tree.diagnostics }, null, 2)}\n`);
  else {
    // One column for the messages: as wide as the longest check (a runner's row names its whole prefix), 22 at least.
    const width = Math.max(22, ...rows.map((r) => r.check.length));
    io.stdout.write(`${rows.map((r) => formatRow(r, width)).join("\n")}\n`);
  }
  return failed ? EXIT_ERROR : EXIT_OK;
}

function formatRow(r: DoctorRow, width: number): string {
  const head = `${r.status.padEnd(4)}  ${r.check.padEnd(width)} ${r.message}`;
  return r.hint ? `${head}\n${" ".repeat(width + 7)}hint: ${r.hint}` : head;
}
