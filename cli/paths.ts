import { lstatSync, readlinkSync, realpathSync, statSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { compile, ConfigNotFoundError, configNotFoundMessage, loadTree, type Model, type SourceTree } from "../compiler/index.js";
import type { Diagnostic } from "../schema/index.js";
import { nearestExisting } from "../reconciler/atomic.js";
import { foreignEntries, isShared, StateFolderForeignError } from "../reconciler/state-folder.js";
import { CliError, InvalidConfigError, type CliIo } from "./io.js";

/** The config folder: `--config`, else $HAL0_CONFIG, else $HAL0_HOME/etc/hal0, else /etc/hal0. */
export function configDir(flag: string | undefined, env: Readonly<Record<string, string | undefined>>, cwd: string): string {
  if (flag) return resolve(cwd, flag);
  if (env.HAL0_CONFIG) return resolve(cwd, env.HAL0_CONFIG);
  if (env.HAL0_HOME) return resolve(cwd, env.HAL0_HOME, "etc/hal0");
  return "/etc/hal0";
}

/**
 * What a refusal adds when the config folder was not named by `--config`
 * (a first start, `hal0 serve` alone, met only "config folder not found:
 * /etc/hal0"): where the folder came from, and what to do; "" when `--config`
 * named it (the user typed the path the message shows).
 */
export function configAdvice(flag: string | undefined, env: Readonly<Record<string, string | undefined>>): string {
  if (flag) return "";
  const from = env.HAL0_CONFIG ? "the folder $HAL0_CONFIG names" : env.HAL0_HOME ? "$HAL0_HOME/etc/hal0" : "hal0's default: no --config was given, and $HAL0_CONFIG and $HAL0_HOME are unset";
  return ` (${from}); name the box's folder with --config DIR, or write the example box into a new folder with hal0 init DIR`;
}

/**
 * What a refusal of the file system in the state folder `dir` adds (permission
 * denied, a read-only file system): where the folder came from, and what to
 * do. hal0's default /var/lib/hal0 is root's: a user's first `hal0 serve
 * --config ~/box` without --state met only "could not mkdir /var/lib/hal0:
 * permission denied".
 */
export function stateAdvice(flag: string | undefined, env: Readonly<Record<string, string | undefined>>, dir: string, readOnly: boolean): string {
  const from = flag ? "--state" : env.HAL0_STATE ? "$HAL0_STATE" : env.HAL0_HOME ? "$HAL0_HOME/var/lib/hal0" : undefined;
  if (from === undefined) {
    return `; ${dir} is hal0's default state folder (no --state was given, and $HAL0_STATE and $HAL0_HOME are unset): name one you may write with --state DIR (hal0 init's next steps use DIR/.state)`;
  }
  return `; hal0 reads and writes its state folder ${dir} (${from}): ${readOnly ? "remount it read-write" : "run hal0 as a user who may, such as its owner"}, or name another with --state DIR`;
}

/**
 * The state folder: `--state`, else $HAL0_STATE, else $HAL0_HOME/var/lib/hal0,
 * else /var/lib/hal0. A path that is a file, or lies below one, is CliError
 * `cli.not_a_folder` before the command reads or writes anything.
 */
export function stateDir(flag: string | undefined, env: Readonly<Record<string, string | undefined>>, cwd: string): string {
  const dir = refuseNonFolder(statePath(flag, env, cwd), "state folder");
  // hal0 makes its state folder 0700 (tokens, the runners' env): a shared one (/tmp, --state /tmp by mistake) was chmodded 0700 too, breaking it for everyone else.
  if (isShared(dir)) throw new CliError("state.shared", `state folder ${dir} is one anybody may write (world-writable); hal0 keeps its state folder 0700 and will not close a shared one: name a folder of its own, such as ${join(dir, "hal0")}`);
  // `--state /`, a home folder: closed to 0700, / locked every other user out. Refused before anything is read or written.
  const foreign = foreignEntries(dir);
  if (foreign !== undefined) throw new StateFolderForeignError(dir, foreign);
  return dir;
}

/** Where the state folder is (as `stateDir`), unchecked: for `hal0 validate`, which only reads the runner cache there when it can. */
export function statePath(flag: string | undefined, env: Readonly<Record<string, string | undefined>>, cwd: string): string {
  if (flag) return resolve(cwd, flag);
  if (env.HAL0_STATE) return resolve(cwd, env.HAL0_STATE);
  if (env.HAL0_HOME) return resolve(cwd, env.HAL0_HOME, "var/lib/hal0");
  return "/var/lib/hal0";
}

/**
 * `dir` when it is a folder, or when it can be made one (the nearest part of
 * it that exists is a folder); else CliError `cli.not_a_folder`, naming `what`
 * (the command writes nothing).
 */
export function refuseNonFolder(dir: string, what: string): string {
  // A symbolic link to nothing (its target moved, or not made yet): making the folder through it failed as "no such file or directory", naming the link.
  const dangling = danglingLink(dir);
  if (dangling !== undefined) {
    const { at, target } = dangling;
    throw new CliError("cli.not_a_folder", `${what} ${dir} ${at === dir ? "is" : `cannot be made: ${at} is`} a symbolic link to ${target}, which does not exist; make that folder first, or name another`);
  }
  const nearest = nearestExisting(dir);
  if (nearest === undefined || nearest.info.isDirectory()) return dir;
  throw new CliError("cli.not_a_folder", nearest.at === dir ? `${what} ${dir} is a file, not a folder` : `${what} ${dir} cannot be made: ${nearest.at} is a file, not a folder`);
}

/** The nearest part of `dir` (itself or a folder above) that is a symbolic link leading nowhere, with where it points; undefined when the nearest part that is there is not one. */
function danglingLink(dir: string): { readonly at: string; readonly target: string } | undefined {
  for (let at = dir; ; at = dirname(at)) {
    let link: ReturnType<typeof lstatSync> | undefined;
    try {
      if (statSync(at, { throwIfNoEntry: false }) !== undefined) return undefined;
      link = lstatSync(at, { throwIfNoEntry: false });
    } catch {
      return undefined; // below a file (ENOTDIR: nearestExisting names it), a loop of links (ELOOP: the write names it)
    }
    if (link?.isSymbolicLink()) return { at, target: resolve(dirname(at), readlinkSync(at)) };
    if (dirname(at) === at) return undefined;
  }
}

/**
 * A file the command will write (`plan --out`): `file` when it is a regular
 * file or can be made one in a folder that exists; else (a folder, a device
 * such as /dev/stdout, a pipe) CliError `cli.not_a_file`
 * naming `what`, before the command observes or writes anything.
 */
export function refuseNonFile(given: string, what: string): string {
  // A symbolic link is followed: the file it leads to is checked and written (the link stays), each message naming what was given.
  const file = linkedFile(given, what);
  const info = statOrNone(file);
  if (info?.isDirectory()) throw new CliError("cli.not_a_file", `${what} ${given} is a folder; name the file to write`);
  // The file is replaced whole (a temp renamed over it): over /dev/stdout or a pipe that put a plain file where the device's link was.
  if (info !== undefined && !info.isFile()) throw new CliError("cli.not_a_file", `${what} ${given} is not a regular file (a device, a pipe or a socket); the plan is saved by replacing its file whole, so name a regular file (--json prints the plan on stdout)`);
  const folder = statOrNone(dirname(file));
  if (folder === undefined) throw new CliError("cli.not_a_file", `${what} ${given} cannot be written: its folder ${dirname(file)} does not exist`);
  if (!folder.isDirectory()) throw new CliError("cli.not_a_file", `${what} ${given} cannot be written: ${dirname(file)} is a file, not a folder`);
  return file;
}

/**
 * The file a symbolic link `file` leads to (`file` itself when it is none):
 * the plan is written there and the link stays a link, as a tree's files are
 * written. A rename over the link would put a plain file in its place — over
 * `/dev/stdout` too when stdout goes to a file, since its link then leads to a
 * regular file. So a link that leads through a process's open files
 * (`/dev/stdout`, `/dev/fd/1`, `/proc/self/fd/1`: a descriptor, not a file of
 * the disk) is refused, whatever it leads to now; so is a loop of links.
 */
function linkedFile(file: string, what: string): string {
  const followed = followLinks(file);
  if (followed.throughProc) throw new CliError("cli.not_a_file", `${what} ${file} is not a regular file (a device, a pipe or a socket); the plan is saved by replacing its file whole, so name a regular file (--json prints the plan on stdout)`);
  if (followed.end === undefined) throw new CliError("cli.not_a_file", `${what} ${file} cannot be written: its symbolic links lead round in a loop`);
  return followed.end;
}

/**
 * The symbolic links from `file` on, followed: where they end (undefined past
 * 40 links: a loop), or the first of them that lies in /proc (one of this
 * process's open descriptors: /dev/stdout → /proc/self/fd/1), where following stops.
 */
function followLinks(file: string): { end: string | undefined; throughProc: boolean } {
  let at = file;
  for (let hops = 0; ; hops++) {
    if (underProc(at)) return { end: at, throughProc: true };
    const info = lstatOrNone(at);
    if (!info?.isSymbolicLink()) return { end: at, throughProc: false };
    if (hops === 40) return { end: undefined, throughProc: false };
    at = resolve(dirname(at), readlinkSync(at));
  }
}

/**
 * Why a file the command reads whole (`apply --plan FILE`) is none it can
 * read as one: a named pipe (mkfifo: the read waited for a writer that may
 * never come, for ever), a device (/dev/zero never ends) or a socket.
 * Undefined for a regular file or a folder, for what is not there (the read
 * says so), and for a pipe the command was handed open (`--plan /dev/stdin`,
 * `--plan <(hal0 plan --json)`: a descriptor under /proc), whose writer is the
 * one that opened it.
 */
export function notReadableWhole(file: string): string | undefined {
  let info: ReturnType<typeof statSync>;
  try {
    info = statOrNone(file);
  } catch {
    return undefined; // not permitted, a loop of links: the read says which
  }
  if (info === undefined || info.isFile() || info.isDirectory()) return undefined;
  // A pipe reached through /proc (/dev/stdin → /proc/self/fd/0) is one this process was handed open.
  if (info.isFIFO()) return followLinks(file).throughProc ? undefined : "it is a named pipe (a fifo), not a file: reading it would wait for a writer for as long as none comes";
  return info.isSocket() ? "it is a socket, not a file" : "it is a device, not a file";
}

/** Whether `path` lies in /proc (its folder resolved through any links: /dev/fd is /proc/self/fd). */
function underProc(path: string): boolean {
  let folder: string;
  try {
    folder = realpathSync(dirname(path));
  } catch {
    folder = dirname(path); // a folder not there: the later checks say so
  }
  return folder === "/proc" || folder.startsWith("/proc/");
}

function lstatOrNone(path: string): ReturnType<typeof lstatSync> {
  return orNone(() => lstatSync(path, { throwIfNoEntry: false }));
}

/** `stat` of `path`, or undefined when nothing is there (also when a part of it is a file: ENOTDIR). */
function statOrNone(path: string): ReturnType<typeof statSync> {
  return orNone(() => statSync(path, { throwIfNoEntry: false }));
}

/** What `look` finds, or undefined when a part of the path is a file (ENOTDIR): nothing is there either. */
function orNone<T>(look: () => T | undefined): T | undefined {
  try {
    return look();
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOTDIR") return undefined;
    throw err;
  }
}

/** The config folder read and compiled (`agent`, `doctor`, `web`, and every command through `openBox`): the compiled tree (a model only when it has no error) and everything the compiler said. */
export interface CompiledTree {
  readonly root: string;
  readonly model?: Model;
  readonly diagnostics: Diagnostic[];
  /** A tree with errors whose hal0.toml validated: its settings (CompileResult.settings). */
  readonly settings?: Model["settings"];
  readonly texts: ReadonlyMap<string, string>;
  /** What was compiled (to compile again with observed facts: runner-observe.ts). */
  readonly tree: SourceTree;
  readonly carried: readonly Diagnostic[];
}

/**
 * Loads and compiles the config folder; a missing folder is CliError
 * `config.not_found` (exit 1, not a usage error). Loads no reconciler code.
 */
export async function compileTree(flags: { config?: string }, io: CliIo): Promise<CompiledTree> {
  const loaded = await readTree(flags, io);
  const { model, diagnostics, settings } = compile(loaded.tree, loaded.diagnostics);
  return { root: loaded.root, model, diagnostics, ...(settings && { settings }), texts: loaded.tree.files, tree: loaded.tree, carried: loaded.diagnostics };
}

/** `root` when it is a folder; else CliError `config.not_found`, before anything (a state folder, a loop) is started for it. */
export function requireConfigFolder(root: string): string {
  if (!statOrNone(root)?.isDirectory()) throw new CliError("config.not_found", configNotFoundMessage(root));
  return root;
}

/** The config folder read (not compiled); a missing folder is CliError `config.not_found`. */
export async function readTree(flags: { config?: string }, io: CliIo): Promise<{ readonly root: string; readonly tree: SourceTree; readonly diagnostics: Diagnostic[] }> {
  const root = configDir(flags.config, io.env, io.cwd);
  const loaded = await loadTree(root).catch((err: unknown) => {
    if (err instanceof ConfigNotFoundError) throw new CliError("config.not_found", configNotFoundMessage(root));
    throw err;
  });
  return { root, tree: loaded.tree, diagnostics: loaded.diagnostics };
}

/** The compiled tree, or InvalidConfigError (exit 1; `main` prints its diagnostics, or the JSON failure under --json). */
export async function compileOrThrow(flags: { config?: string }, io: CliIo): Promise<CompiledTree & { model: Model }> {
  const tree = await compileTree(flags, io);
  if (!tree.model) throw new InvalidConfigError(tree.root, tree.diagnostics, tree.texts);
  return { ...tree, model: tree.model };
}
