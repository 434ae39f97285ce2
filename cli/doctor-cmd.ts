import { parseArgs } from "node:util";
import { doctorRows, type DoctorRow } from "../reconciler/doctor.js";
import { stateHermesCredentials } from "../server/identity/hermes-credentials.js";
import { compileTree } from "./agent-cmd.js";
import { EXIT_INVALID, EXIT_OK, type CliIo } from "./io.js";
import { stateDir } from "./paths.js";
import { BOX_OPTIONS } from "./plan-cmd.js";

export const DOCTOR_HELP = `hal0 doctor [--config DIR] [--state DIR] [--json]

Checks the box and prints one row per check (ok / warn / fail, with a hint):
tree, state_folder, runtime, hermes_profiles_mcp, hermes_default_memory,
hermes_brain_memory. Exit 0 when nothing fails, 1 otherwise. Changes nothing.`;

export async function runDoctor(args: string[], io: CliIo): Promise<number> {
  const { values } = parseArgs({ args, strict: true, allowPositionals: false, options: { ...BOX_OPTIONS, json: { type: "boolean" } } });
  const tree = await compileTree(values, io);
  const state = stateDir(values.state, io.env, io.cwd);
  const rows = await doctorRows({ ...tree, stateDir: state, env: io.env, hermesCredentials: stateHermesCredentials(state) });
  const failed = rows.some((r) => r.status === "fail");
  if (values.json) io.stdout.write(`${JSON.stringify({ ok: !failed, rows }, null, 2)}\n`);
  else io.stdout.write(`${rows.map(formatRow).join("\n")}\n`);
  return failed ? EXIT_INVALID : EXIT_OK;
}

function formatRow(r: DoctorRow): string {
  const head = `${r.status.padEnd(4)}  ${r.check.padEnd(22)} ${r.message}`;
  return r.hint ? `${head}\n${" ".repeat(29)}hint: ${r.hint}` : head;
}
