import type Database from "better-sqlite3";
import { accessSync, constants, mkdirSync, statfsSync, statSync, unlinkSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";

/**
 * hal0's one way to open a SQLite file: the memory engine's `memory.db`
 * (embedded-db.ts) and the server's `hal0.db` (server/db.ts) both come here.
 * It lives in memory/ because that is the lowest layer that keeps a database:
 * server/ may import memory/, not the other way round.
 */

export type Db = Database.Database;

/** better-sqlite3 (a native addon) loads on the first open, not when a command merely imports this module. */
let sqlite: typeof Database | undefined;
function driver(): typeof Database {
  sqlite ??= createRequire(import.meta.url)("better-sqlite3") as typeof Database;
  return sqlite;
}

/**
 * Opens (creating it) `<stateDir>/<file>` in WAL mode (several processes may
 * read and write it: `hal0 serve`, `hal0 agent approvals`) and applies the
 * migrations it has not seen, each once, in its own transaction (setUp).
 */
export function openSqlite(stateDir: string, file: string, migrations: readonly string[]): Db {
  mkdirSync(stateDir, { recursive: true });
  const Sqlite = driver();
  const path = join(stateDir, file);
  let db: Db | undefined;
  try {
    db = new Sqlite(path);
    setUp(db, migrations);
    opened.add(path);
    return db;
  } catch (err) {
    db?.close();
    throw unopenable(path, err);
  }
}

/**
 * A database SQLite cannot open (a read-only folder, a folder or another
 * file where it should be, a damaged file), or finds damaged in use, is
 * `system.io` naming the file and SQLite's reason, as any file the system
 * refuses: never an internal error with a stack. A read-only file opens (its
 * reads work) and is refused at its first write: an opener that writes as it
 * opens (embedded-db.ts) refuses it with `unopenable` too.
 */
class DatabaseUnavailableError extends Error {
  readonly code = "system.io";
}

/**
 * A database a newer hal0 migrated (its user_version past the migrations
 * this one knows; an upgrade rolled back): refused before anything reads or
 * writes it, since this hal0 would write rows the newer schema's rules do
 * not expect, and the newer hal0 would not migrate them again.
 */
class NewerSchemaError extends Error {
  readonly code = "state.newer_schema";
  constructor(path: string, found: number, known: number) {
    super(`the database ${path} was written by a newer hal0 (its schema version is ${found}; this hal0 knows ${known}): run that hal0 again, or restore a backup taken before the upgrade`);
  }
}

/**
 * A database that could not be opened because its disk is full (SQLITE_FULL
 * as it was made or migrated: `memory.db` opened first on a full disk). It
 * keeps SQLite's code and names the file (`path`), so the server answers it
 * as every full disk (507 `server.storage_full`, server/errors.ts
 * storageFull) and a command as `system.io` naming the file (writeRefused).
 */
class DatabaseFullError extends Error {
  readonly code = "SQLITE_FULL";
  constructor(readonly path: string, said: string) {
    super(`could not open the database ${path}: database or disk is full (${said})`);
  }
}

/**
 * Below this many free bytes on its disk, a database that fails to open with an I/O error failed for want of
 * room: SQLite says SQLITE_IOERR_SHMSIZE when the WAL index (`-shm`, 32 KiB) cannot be given its pages, and
 * SQLITE_FULL only when a write of the file itself did not fit.
 */
const NEARLY_FULL_BYTES = 1024 * 1024;

/** Whether the disk holding `dir` has (almost) no room left for a user like hal0's. */
function nearlyFull(dir: string): boolean {
  try {
    const { bavail, bsize } = statfsSync(dir);
    return bavail * bsize < NEARLY_FULL_BYTES;
  } catch {
    return false;
  }
}

/**
 * `err`, thrown while opening `path`, as `system.io` naming the file when SQLite threw it (a full disk: a
 * DatabaseFullError naming it); any other error as it is.
 */
export function unopenable(path: string, err: unknown): unknown {
  const code = sqliteCode(err);
  if (code === undefined) return err;
  if (code === "SQLITE_FULL" || (code.startsWith("SQLITE_IOERR") && nearlyFull(dirname(path)))) return new DatabaseFullError(path, code);
  const reason = code.startsWith("SQLITE_NOTADB") ? "it is not a SQLite database" : code.startsWith("SQLITE_READONLY") ? "it is read-only" : (err as Error).message;
  return new DatabaseUnavailableError(`could not open the database ${path}: ${reason} (${code})`);
}

/**
 * A database found damaged while in use (SQLITE_CORRUPT, SQLITE_NOTADB: its
 * file overwritten or replaced under a running server) is `system.io` naming
 * the file, as when it cannot be opened; any other error is returned as it is
 * (a full disk stays SQLITE_FULL, which the server answers as such).
 */
export function damagedInUse(path: string, err: unknown): unknown {
  const code = sqliteCode(err);
  if (code === undefined || !(code.startsWith("SQLITE_CORRUPT") || code.startsWith("SQLITE_NOTADB"))) return err;
  const reason = code.startsWith("SQLITE_NOTADB") ? "it is no longer a SQLite database" : (err as Error).message;
  return new DatabaseUnavailableError(`the database ${path} is damaged: ${reason} (${code}); restore it from a backup, or move it away to start an empty one`);
}

/** Every database this process opened (a command opens one or two): what a write SQLite refused is named by. */
const opened = new Set<string>();

/**
 * A write SQLite refused for want of a disk that takes it (SQLITE_FULL; SQLITE_READONLY: a read-only mount,
 * a file or folder hal0 may not write; SQLITE_IOERR) as `system.io` naming the database (each this process
 * opened, when it opened more than one) and SQLite's reason; any other error as it is. For a command, whose
 * caller can act on the path and the reason, where an internal error with a stack would only say "a bug".
 */
export function writeRefused(err: unknown): unknown {
  if (err instanceof DatabaseFullError) return new DatabaseUnavailableError(err.message);
  const code = sqliteCode(err);
  if (code === undefined || !(code === "SQLITE_FULL" || code.startsWith("SQLITE_READONLY") || code.startsWith("SQLITE_IOERR"))) return err;
  const names = opened.size === 0 ? "the state folder's database" : `the database ${[...opened].join(" or ")}`;
  if (!code.startsWith("SQLITE_READONLY")) return new DatabaseUnavailableError(`could not write ${names}: ${(err as Error).message} (${code})`);
  // SQLite says "attempt to write a readonly database" for a read-only mount and a file hal0 may not write alike: which one it is, and what to do.
  if ([...opened].some((path) => folderRefuses(dirname(path)) === "EROFS")) {
    return new DatabaseUnavailableError(`could not write ${names}: its file system is read-only (${code}); remount it read-write, then retry`);
  }
  const uid = typeof process.getuid === "function" ? ` (uid ${process.getuid()})` : "";
  return new DatabaseUnavailableError(`could not write ${names}: hal0 may not write it (another user's, after a command run with sudo, or mode 0444; ${code}); give the user hal0 runs as${uid} read and write access to it and to its folder, then retry`);
}

/** The system's refusal to write in `dir` (EROFS, EACCES, …), or undefined when it may. */
function folderRefuses(dir: string): string | undefined {
  try {
    accessSync(dir, constants.W_OK);
    return undefined;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code ?? "EIO";
  }
}

/** SQLite's error code (`SQLITE_BUSY`, `SQLITE_CORRUPT_…`) of an error the driver threw, else undefined. */
export function sqliteCode(err: unknown): string | undefined {
  const code = (err as { code?: unknown } | null)?.code;
  return err instanceof Error && typeof code === "string" && code.startsWith("SQLITE_") ? code : undefined;
}

/**
 * Sets the connection up and applies the migrations `db` has not seen. The
 * wait for another process's lock (busy_timeout) comes first, since turning
 * a new file to WAL takes one. Each migration runs in a transaction that
 * takes the write lock before it reads `user_version` (BEGIN IMMEDIATE): two
 * processes opening an older file at once (`hal0 serve` and `hal0 agent
 * approvals`) apply it once, the second finding it done, where both reading
 * the version first made the second run it again (`duplicate column name`)
 * or be refused at its first write (SQLITE_BUSY). A file that is up to date
 * takes no write lock (a read-only one still opens); one a newer hal0
 * migrated is refused (state.newer_schema), touched by no migration.
 */
function setUp(db: Db, migrations: readonly string[]): void {
  db.pragma("busy_timeout = 5000");
  db.pragma("journal_mode = WAL");
  db.pragma("synchronous = NORMAL");
  db.pragma("foreign_keys = ON");
  const version = () => db.pragma("user_version", { simple: true }) as number;
  const at = version();
  if (at > migrations.length) throw new NewerSchemaError(db.name, at, migrations.length);
  if (at === migrations.length) return;
  const step = db.transaction((): boolean => {
    const at = version();
    if (at >= migrations.length) return false;
    db.exec(migrations[at]!);
    db.pragma(`user_version = ${at + 1}`);
    return true;
  });
  while (step.immediate());
}

/** A file's identity: its device and inode (bigint: an inode may pass 2^53). */
type FileId = { readonly dev: bigint; readonly ino: bigint };

function idOf(path: string): FileId | undefined {
  try {
    const st = statSync(path, { bigint: true });
    return { dev: st.dev, ino: st.ino };
  } catch {
    return undefined;
  }
}

function sameId(a: FileId | undefined, b: FileId | undefined): boolean {
  return a !== undefined && b !== undefined && a.dev === b.dev && a.ino === b.ino;
}

/**
 * Whether a database's path still names the file its handle opened. A
 * handle keeps reading and writing the file it opened: after `rm memory.db`
 * (or a backup moved over it) under a running server, its writes land in a
 * file no path names, lost at the next start. SQLite does not notice in WAL
 * mode, and opening the path again while the old `-wal` is there replays the
 * old file's pages onto the new one. So the engine asks before each call
 * (one stat, a few microseconds) and refuses once the path names another
 * file or none.
 */
export class DbFile {
  private readonly db: FileId | undefined;
  private readonly wal: FileId | undefined;
  private readonly shm: FileId | undefined;

  /** Records the identity of `path` and its `-wal` and `-shm` as the handle opened them (WAL mode: all three are there). */
  constructor(readonly path: string) {
    this.db = idOf(path);
    this.wal = idOf(`${path}-wal`);
    this.shm = idOf(`${path}-shm`);
  }

  /** `same` while the path names the opened file; `removed` when it names nothing; `replaced` when it names another file. */
  state(): "same" | "removed" | "replaced" {
    const now = idOf(this.path);
    if (now === undefined) return "removed";
    return sameId(now, this.db) ? "same" : "replaced";
  }

  /**
   * After the handle closed on a file that is no longer at its path: removes
   * the `-wal` and `-shm` beside the path when they are still the ones the
   * handle used (the old file's), so the next open does not replay the old
   * file's pages onto the file now there. Another file's are left alone.
   */
  dropOrphans(): void {
    for (const [suffix, id] of [["-wal", this.wal], ["-shm", this.shm]] as const) {
      const path = `${this.path}${suffix}`;
      if (!sameId(idOf(path), id)) continue;
      try {
        unlinkSync(path);
      } catch {
        // gone meanwhile, or a folder we may no longer write: the next start's open reports it
      }
    }
  }
}
