import { spawnSync } from "node:child_process";
import { existsSync } from "node:fs";
import { chown, mkdir, rmdir, stat } from "node:fs/promises";
import { dirname, join, resolve } from "node:path";
import { writeFileAtomic } from "../reconciler/atomic.js";
import { hermesHome } from "../reconciler/hermes-plan.js";
import { storeDir } from "../reconciler/host/model-scan.js";
import { packageRoot } from "../reconciler/package-root.js";
import { DEFAULT_UNIT_DIR, hiddenByPrivateTmp, renderUnit, UNIT_NAME, unwritablePath, verifyUnit, within } from "../reconciler/systemd-unit.js";
import { CliError, EXIT_OK, parseCommandArgs, UsageError, type CliIo } from "./io.js";
import { compileTree, stateDir } from "./paths.js";
import { BOX_OPTIONS } from "./plan-cmd.js";

export const SERVICE_HELP = `hal0 service install [--config DIR] [--state DIR] [--unit-dir DIR] [--user NAME] [--print]

Writes the systemd unit of 'hal0 serve' (hal0.service): ExecStart runs this node and this
hal0 with --config and --state as absolute paths, Restart=on-failure, and a sandbox
(NoNewPrivileges, ProtectSystem=strict with ReadWritePaths= the state and config folders,
the model store and the Hermes home, ProtectHome=read-only, PrivateTmp unless a folder lies
under /tmp, kernel and cgroup protections).
PATH is the one this command runs with, so runners are found as 'hal0 doctor' finds them.
Creates the state folder (0700) if missing; with --user, as that user's, and names each
folder the service writes that the user cannot. Starts nothing: run
'systemctl daemon-reload && systemctl enable --now hal0' yourself. 'hal0 doctor' checks it.
  --unit-dir DIR   where to write hal0.service (default ${DEFAULT_UNIT_DIR})
  --user NAME      User= of the service, Group= its primary group (default: root)
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
  // The tree need not compile to install the unit; when it does, the model store it names is
  // writable too, and the Hermes home (hal0 writes its profiles) when it is there.
  const tree = await compileTree(values, io);
  const state = stateDir(values.state, io.env, io.cwd);
  const writable: string[] = [];
  const writableIfPresent: string[] = [];
  if (tree.model) {
    const store = storeDir(tree.model);
    if (!within(store, state) && !within(store, tree.root)) writable.push(store);
    writableIfPresent.push(hermesHome(tree.model));
  }
  const user = values.user === undefined ? undefined : serviceUser(values.user);
  const options = {
    node: process.execPath, bin: join(packageRoot(), "bin", "hal0.cjs"), config: tree.root, state, writable, writableIfPresent,
    user: user?.name, group: user?.group, path: io.env.PATH, version: (await import("../server/version.js")).packageVersion(),
  };
  const bad = unwritablePath(options);
  if (bad !== undefined) {
    throw new CliError("service.install_failed", `${JSON.stringify(bad)} has a line break or another control character: a unit file cannot hold it (the rest of the line would be read as a directive of its own); move or rename the folder`);
  }
  const text = renderUnit(options);
  const hidden = hiddenByPrivateTmp(options);
  if (hidden.length > 0) {
    io.stderr.write(`hal0 service: the unit leaves PrivateTmp= off: a private /tmp would hide ${hidden.join(", ")} from the service (most systems also empty /tmp at boot: keep the box elsewhere)\n`);
  }
  if (values.print) {
    io.stdout.write(text);
    return EXIT_OK;
  }
  const dir = values["unit-dir"] === undefined ? DEFAULT_UNIT_DIR : resolve(io.cwd, values["unit-dir"]);
  const file = join(dir, UNIT_NAME);
  const info = await stat(dir).catch(() => undefined);
  if (!info?.isDirectory()) throw new CliError("service.install_failed", `cannot write ${file}: ${dir} is not a folder`);
  // The folders this install made, removed again when it fails: a failed install leaves nothing behind.
  const made: string[] = [];
  let doing = "";
  let making: string | undefined;
  try {
    // ReadWritePaths= must exist when the unit starts, and hal0 cannot make them under
    // ProtectSystem=strict; one made here for a --user service is that user's.
    for (const [folder, mode] of [[state, 0o700], ...writable.map((w) => [w, 0o755] as const)] as const) {
      doing = `make ${folder}`;
      making = folder;
      const first = await mkdir(folder, { recursive: true, mode });
      if (first === undefined) continue;
      for (let at = folder; ; at = dirname(at)) {
        made.push(at);
        if (at === first || dirname(at) === at) break;
      }
      if (user) await chown(folder, user.uid, user.gid);
    }
    doing = `write ${file}`;
    making = undefined;
    await writeFileAtomic(file, text, 0o644);
  } catch (err) {
    // Deepest first, so a folder is empty when its turn comes (rmdir: never one that holds anything).
    for (const folder of made.sort((a, b) => b.length - a.length)) await rmdir(folder).catch(() => undefined);
    const undone = made.length > 0 ? " (the folders this install made are removed again)" : "";
    throw new CliError("service.install_failed", `cannot ${doing}: ${refusal(err)}${undone}${deniedAdvice(err, making, values, io)}`);
  }
  io.stdout.write(`wrote ${file}\n`);
  if (user) {
    for (const folder of [state, tree.root, ...writable, ...writableIfPresent.filter((p) => existsSync(p))]) {
      if (cannotWrite(user.name, folder)) io.stderr.write(`hal0 service: ${user.name}, the service's user, cannot write ${folder}: chown -R ${user.name}: ${folder}\n`);
    }
  }
  const verified = await verifyUnit(file);
  if (verified === undefined) io.stderr.write("hal0 service: systemd-analyze is not installed; the unit was not verified\n");
  else if (verified.code !== 0 || verified.output !== "") io.stderr.write(`hal0 service: systemd-analyze verify ${file} (exit ${verified.code}):\n${verified.output}\n`);
  io.stdout.write("next: systemctl daemon-reload && systemctl enable --now hal0\n");
  return EXIT_OK;
}

/**
 * What to do about a refusal (permission denied) a user who is not root meets:
 * the unit folder (default /etc/systemd/system) and hal0's default state
 * folder are root's, so `hal0 service install` run as oneself said only
 * "permission denied". "" for root, and for another refusal.
 */
function deniedAdvice(err: unknown, folder: string | undefined, values: { state?: string }, io: CliIo): string {
  const code = (err as NodeJS.ErrnoException)?.code;
  if ((code !== "EACCES" && code !== "EPERM") || process.getuid?.() === 0) return "";
  if (folder !== undefined && values.state === undefined && !io.env.HAL0_STATE && !io.env.HAL0_HOME) {
    return `; it is hal0's default state folder (no --state was given): run this as root (sudo), or name the state folder with --state DIR`;
  }
  if (folder !== undefined) return `; run this as root (sudo), or make ${folder} first as a user who may`;
  return "; a system unit is written by root: run this as root (sudo); --print shows the unit and writes nothing";
}

/**
 * `--user NAME` as this machine knows it (`id`, so NSS users count): a unit
 * naming an unknown user does not start. Its group is the user's primary
 * group by name (nobody's is nogroup on Debian, a user's may be users): a
 * `Group=` naming a group that is not there does not start either (216/GROUP).
 */
function serviceUser(name: string): { name: string; uid: number; gid: number; group: string } {
  const id = (flag: string) => spawnSync("id", [flag, name], { encoding: "utf8", timeout: 10_000 });
  const [u, g, gn] = [id("-u"), id("-g"), id("-gn")];
  if (u.status !== 0 || g.status !== 0) throw new CliError("service.install_failed", `no user ${name} on this machine (id -u ${name}: ${(u.stderr || u.error?.message || "").trim()})`);
  // A primary group with no name (no entry in the group database) is written as its number, which systemd takes too.
  const group = gn.status === 0 && gn.stdout.trim() !== "" ? gn.stdout.trim() : g.stdout.trim();
  return { name, uid: Number(u.stdout.trim()), gid: Number(g.stdout.trim()), group };
}

/**
 * Whether `user` is refused writing into `folder`, asked of the system itself
 * (runuser with the user's groups, so ACLs, groups and every parent folder
 * count). Only root can ask; otherwise, and for root itself, nothing is said.
 */
function cannotWrite(user: string, folder: string): boolean {
  if (process.getuid?.() !== 0 || user === "root") return false;
  const r = spawnSync("runuser", ["-u", user, "--", "test", "-w", folder, "-a", "-x", folder], { timeout: 10_000 });
  return r.status === 1;
}

/** Why the file system refused, as 'permission denied (EACCES)': node's message without the syscall and the path (a temp file's, for the unit). */
function refusal(err: unknown): string {
  const e = err as NodeJS.ErrnoException;
  const reason = typeof e?.code === "string" ? new RegExp(`^${e.code}: ([^,]+),`).exec(String(e.message))?.[1] : undefined;
  return reason === undefined ? String((err as Error)?.message ?? err) : `${reason} (${e.code})`;
}
