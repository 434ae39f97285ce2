import { mkdir, readdir, readFile, rm, rmdir, stat, writeFile } from "node:fs/promises";
import { dirname, join, resolve } from "node:path";
import { classifyPath } from "../schema/index.js";
import { packageRoot } from "../reconciler/package-root.js";
import { CliError, EXIT_OK, parseCommandArgs, refuseUnexpanded, UsageError, type CliIo } from "./io.js";
import { refuseNonFolder } from "./paths.js";

export const INIT_HELP = `hal0 init DIR

Writes the example box into DIR, a new or empty folder (dot entries such as .git do not
count: 'git init DIR' first is fine): every file kind of the tree,
commented (hal0.toml, profiles.toml, models.toml, slots/, stacks/, mcp-servers/, agents/,
…), and the tiny stand-in model files its models.toml names (models/, relative paths).
Each file's first line is '#:schema <this package>/schema/json/<kind>.schema.json', an
absolute path, so Taplo (Even Better TOML) checks and completes it in an editor. Its
slots run hal0's stand-in runner (hal0-fake-llama-server), so 'hal0 apply' starts them
on any machine; point the profiles at a real llama-server to serve models. A .gitignore
keeps the suggested state folder (DIR/.state: the database and operator.token) out of git.
Exit status: 0 written (the next steps are printed), 1 DIR is a file or a folder that
is not empty (init.not_empty; nothing is written), DIR cannot be made: it lies below a
file, or it is (or lies below) a symbolic link to nothing (cli.not_a_folder; nothing is
made), or a write was refused (system.io: a
full disk, a folder hal0 may not write; what was written of the box is removed again),
64 usage error.`;

/** Folders whose files may carry an installed server's env: 0700, files 0600 (as the server writes them). */
const PRIVATE_FOLDERS = new Set(["mcp-servers"]);

/** `hal0 init DIR`: the example box (this package's fixtures/box) with `#:schema` lines to this package's JSON Schemas. */
export async function runInit(args: string[], io: CliIo): Promise<number> {
  const { positionals } = parseCommandArgs({ args, strict: true, allowPositionals: true, options: {} });
  if (positionals.length === 0) throw new UsageError("missing DIR: hal0 init DIR writes the example box into DIR");
  if (positionals.length > 1) throw new UsageError(`one folder only, got ${positionals.length}: hal0 init DIR`);
  refuseUnexpanded(positionals[0]!, "hal0 init");
  const dir = resolve(io.cwd, positionals[0]!);
  await refuseUnlessEmpty(dir);
  // Below a file, or through a symbolic link to nothing: cli.not_a_folder, naming which part (mkdir said only ENOENT or ENOTDIR).
  refuseNonFolder(dir, "folder");
  const root = packageRoot();
  const source = join(root, "fixtures", "box");
  const schemas = join(root, "schema", "json");
  // Everything is read before anything is written: a broken package writes nothing.
  const files = await Promise.all((await listFiles(source)).map(async (rel) => ({ rel, bytes: await readFile(join(source, rel)) })));
  // What this init made (folders, files), removed again when a write fails: a box half-written is none, and
  // it left DIR not empty, so `hal0 init DIR` refused to run again once there was room.
  const made: string[] = [];
  let writing = dir;
  let ignored: boolean;
  try {
    // Folders 0755 as the files are 0644, whatever the umask allows (it can only take more away): under
    // `umask 000` they were 0777, so anyone on the machine could replace slots/chat.toml (a runner's argv).
    made.push(...madeFolders(await mkdir(dir, { recursive: true, mode: 0o755 }), dir));
    for (const { rel, bytes } of files) {
      const top = rel.split("/")[0]!;
      const restricted = PRIVATE_FOLDERS.has(top) && rel.includes("/");
      writing = dirname(join(dir, rel));
      made.push(...madeFolders(await mkdir(writing, { recursive: true, mode: restricted ? 0o700 : 0o755 }), writing));
      const kind = rel.endsWith(".toml") ? classifyPath(rel)?.kind : undefined;
      const data = kind ? withSchemaLine(bytes.toString("utf8"), join(schemas, kind.jsonSchema)) : bytes;
      writing = join(dir, rel);
      // `wx`: a file that appeared meanwhile is never overwritten.
      await writeNew(writing, data, restricted ? 0o600 : 0o644);
      made.push(writing);
    }
    // The state folder the next steps suggest is inside DIR: it holds operator.token, which a `git add .` must not take.
    writing = join(dir, ".gitignore");
    ignored = await writeNew(writing, GITIGNORE, 0o644).then(() => true, (err: NodeJS.ErrnoException) => {
      if (err.code === "EEXIST") return false;
      throw err;
    });
  } catch (err) {
    // Only what this init made: its files, then its folders once empty (anything another hand put there stays).
    for (const path of made.reverse()) await rm(path).catch(() => rmdir(path)).catch(() => undefined);
    // A write through a file handle (a full disk: ENOSPC) names no path: it is the file being written (system.io, exit 1).
    const e = err as NodeJS.ErrnoException;
    if (typeof e?.code === "string" && typeof e.syscall === "string" && e.path === undefined) e.path = writing;
    if (made.length > 0) io.stderr.write(`hal0 init: the example box was not written; what was written of it is removed again\n`);
    throw err;
  }
  const box = `--config ${quote(dir)} --state ${quote(join(dir, ".state"))}`;
  // Run by `npx hal0 init` (the README's way, from a clone): hal0 is on no PATH, so a next step
  // copied as `hal0 apply …` was "command not found"; they are written as it was run.
  const hal0 = io.env.npm_command === "exec" ? "npx hal0" : "hal0";
  io.stdout.write(`Wrote the example box to ${dir} (${files.length} files).

Next:
  ${hal0} validate --config ${quote(dir)}    check it (every file kind, every rule)
  ${hal0} apply --yes ${box}    start its slots (the stand-in runner)
  ${hal0} serve ${box}    the REST API, the operator's pages and the reconcile loop
  ${hal0} down ${box}    stop the slots again
Each file's #:schema line points at ${schemas}: open the folder in an editor with Taplo.
${ignored ? "The .gitignore keeps .state/ (the database and operator.token) out of git." : `note: ${join(dir, ".gitignore")} was there and is left as it is: add /.state/ to it, as .state holds operator.token.`}
`);
  return EXIT_OK;
}

/** Writes a file that is not there yet (`wx`); one this made and could not finish (a full disk) is removed. */
async function writeNew(file: string, data: string | Buffer, mode: number): Promise<void> {
  await writeFile(file, data, { flag: "wx", mode }).catch(async (err: NodeJS.ErrnoException) => {
    if (err.code !== "EEXIST") await rm(file, { force: true }).catch(() => undefined);
    throw err;
  });
}

/** The folders a recursive mkdir of `target` made: from `first` (what it returned; undefined: none) down to `target`. */
function madeFolders(first: string | undefined, target: string): string[] {
  if (first === undefined) return [];
  const folders = [target];
  while (folders[0] !== first && dirname(folders[0]!) !== folders[0]) folders.unshift(dirname(folders[0]!));
  return folders;
}

/** What hal0 init writes at DIR's top besides the example box: the state folder its next steps name stays out of git. */
const GITIGNORE = `# hal0's state folder, as hal0 init's next steps name it: the database and operator.token, not config.
/.state/
`;

/**
 * `init.not_empty` when `dir` is a file or a folder with anything in it but
 * dot entries (a `.git` of \`git init DIR\`, a .gitignore: the loader does
 * not read them, and hal0 writes none of them but a .gitignore that is not
 * there yet); a missing folder is made.
 */
async function refuseUnlessEmpty(dir: string): Promise<void> {
  const info = await stat(dir).catch(() => undefined);
  if (info === undefined) return;
  if (!info.isDirectory()) throw new CliError("init.not_empty", `${dir} is a file; hal0 init writes into a new or empty folder`);
  const entries = (await readdir(dir)).filter((name) => !name.startsWith("."));
  if (entries.length > 0) {
    const shown = entries.sort().slice(0, 3).join(", ");
    throw new CliError("init.not_empty", `${dir} is not empty (${shown}${entries.length > 3 ? ", …" : ""}); hal0 init writes into a new or empty folder and never overwrites`);
  }
}

/** Every file under `dir`, as `/`-separated paths relative to it, sorted. */
async function listFiles(dir: string, prefix = ""): Promise<string[]> {
  const out: string[] = [];
  for (const entry of await readdir(join(dir, prefix), { withFileTypes: true })) {
    const rel = prefix === "" ? entry.name : `${prefix}/${entry.name}`;
    if (entry.isDirectory()) out.push(...(await listFiles(dir, rel)));
    else if (entry.isFile()) out.push(rel);
  }
  return out.sort();
}

/** `text` with its first line `#:schema <target>`: the example's relative line replaced, or one added. */
export function withSchemaLine(text: string, target: string): string {
  const line = `#:schema ${target}`;
  return /^#:schema[ \t]/.test(text) ? text.replace(/^#:schema[^\n]*/, line) : `${line}\n${text}`;
}

function quote(path: string): string {
  return /^[A-Za-z0-9_./-]+$/.test(path) ? path : `'${path.replace(/'/g, "'\\''")}'`;
}
