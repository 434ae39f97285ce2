import { mkdir, stat } from "node:fs/promises";
import { join, resolve } from "node:path";
import { writeFileAtomic } from "../reconciler/atomic.js";
import { packageRoot } from "../reconciler/package-root.js";
import { DEFAULT_UNIT_DIR, renderUnit, UNIT_NAME, verifyUnit } from "../reconciler/systemd-unit.js";
import { CliError, EXIT_OK, parseCommandArgs, UsageError, type CliIo } from "./io.js";
import { compileTree, stateDir } from "./paths.js";
import { BOX_OPTIONS } from "./plan-cmd.js";

export const SERVICE_HELP = `hal0 service install [--config DIR] [--state DIR] [--unit-dir DIR] [--user NAME] [--print]

Writes the systemd unit of 'hal0 serve' (hal0.service): ExecStart runs this node and this
hal0 with --config and --state as absolute paths, Restart=on-failure, and a sandbox
(NoNewPrivileges, ProtectSystem=strict with ReadWritePaths= the state and config folders
and the model store, ProtectHome=read-only, PrivateTmp, kernel and cgroup protections).
PATH is the one this command runs with, so runners are found as 'hal0 doctor' finds them.
Creates the state folder (0700) if missing. Starts nothing: run
'systemctl daemon-reload && systemctl enable --now hal0' yourself. 'hal0 doctor' checks it.
  --unit-dir DIR   where to write hal0.service (default ${DEFAULT_UNIT_DIR})
  --user NAME      User= and Group= of the service (default: root)
  --print          print the unit on stdout and write nothing
When systemd-analyze is installed, the written unit is checked with 'systemd-analyze verify'
and what it says is printed on stderr.
Exit status: 0 written (or printed), 1 config.not_found or service.install_failed, 64 usage error.`;

/** `hal0 service install`: the unit for this hal0, these folders and this PATH. */
export async function runService(args: string[], io: CliIo): Promise<number> {
  const { values, positionals } = parseCommandArgs({
    args, strict: true, allowPositionals: true,
    options: { ...BOX_OPTIONS, "unit-dir": { type: "string" }, user: { type: "string" }, print: { type: "boolean" } },
  });
  if (positionals.length !== 1 || positionals[0] !== "install") throw new UsageError("expected: hal0 service install [--unit-dir DIR] [--print]");
  if (values.user !== undefined && !/^[a-z_][a-z0-9_-]{0,31}$/i.test(values.user)) throw new UsageError(`--user must be a user name, not ${JSON.stringify(values.user)}`);
  // The tree need not compile to install the unit; when it does, the model store it names is writable too.
  const tree = await compileTree(values, io);
  const state = stateDir(values.state, io.env, io.cwd);
  const writable: string[] = [];
  if (tree.model) {
    const { storeDir } = await import("../server/pulls/service.js");
    const store = storeDir(tree.model);
    if (!store.startsWith(`${state}/`) && !store.startsWith(`${tree.root}/`)) writable.push(store);
  }
  const text = renderUnit({
    node: process.execPath, bin: join(packageRoot(), "bin", "hal0.cjs"), config: tree.root, state, writable,
    user: values.user, path: io.env.PATH, version: (await import("../server/version.js")).packageVersion(),
  });
  if (values.print) {
    io.stdout.write(text);
    return EXIT_OK;
  }
  const dir = values["unit-dir"] === undefined ? DEFAULT_UNIT_DIR : resolve(io.cwd, values["unit-dir"]);
  const file = join(dir, UNIT_NAME);
  try {
    const info = await stat(dir).catch(() => undefined);
    if (!info?.isDirectory()) throw new Error(`${dir} is not a folder`);
    // ReadWritePaths= must exist when the unit starts, and hal0 cannot make them under ProtectSystem=strict.
    await mkdir(state, { recursive: true, mode: 0o700 });
    for (const w of writable) await mkdir(w, { recursive: true });
    await writeFileAtomic(file, text, 0o644);
  } catch (err) {
    throw new CliError("service.install_failed", `cannot write ${file}: ${(err as Error).message}`);
  }
  io.stdout.write(`wrote ${file}\n`);
  const verified = await verifyUnit(file);
  if (verified === undefined) io.stderr.write("hal0 service: systemd-analyze is not installed; the unit was not verified\n");
  else if (verified.code !== 0 || verified.output !== "") io.stderr.write(`hal0 service: systemd-analyze verify ${file} (exit ${verified.code}):\n${verified.output}\n`);
  io.stdout.write("next: systemctl daemon-reload && systemctl enable --now hal0\n");
  return EXIT_OK;
}
