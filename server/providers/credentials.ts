import { chmod, mkdir, readFile, stat } from "node:fs/promises";
import { isAbsolute, join } from "node:path";
import { fingerprint } from "../../compiler/hash.js";
import { writeFileAtomic } from "../../reconciler/atomic.js";
import { SLOT_NAME_PATTERN } from "../../schema/names.js";
import { ApiError, storageFull } from "../errors.js";

/** Where a credential was found: systemd's `$CREDENTIALS_DIRECTORY`, or hal0's state folder. */
export type CredentialSource = "systemd" | "state";

/**
 * What one header value can carry: printable Latin-1, no control character or line break (a newline would start
 * another header; a character beyond U+00FF is not a byte). A write is refused otherwise, and a value from
 * elsewhere (an environment variable, systemd's folder, a file put by hand) that is not one is never sent.
 */
export const HEADER_VALUE_PATTERN = /^[\x20-\x7e\xa0-\xff]+$/;

/**
 * A stored credential; `value` is for the request that sends it, never for a reply or a log line. A file that
 * is there but cannot be read (a symlink loop, no permission) has no value and says why in `unreadable`: it is
 * still where the credential comes from (systemd's is not passed over for the state folder's), but nothing is sent.
 */
export type Credential =
  | { readonly value: string; readonly source: CredentialSource; readonly unreadable?: undefined }
  | { readonly value?: undefined; readonly source: CredentialSource; readonly unreadable: string };

/**
 * Provider credentials by name (`auth_credential = "<name>"` in upstreams.toml).
 * Two places, read in this order:
 *
 * 1. `$CREDENTIALS_DIRECTORY/<name>`: what systemd hands the service
 *    (`LoadCredential=` / `SetCredential=`), read-only. It wins because it is
 *    what the unit's author configured and hal0 cannot replace it: a write of a
 *    name systemd provides is refused (`provider.credential_systemd`) instead of
 *    landing in a file that would never be read.
 * 2. `<state>/credentials/<name>`: written by provider_credential_write, 0600
 *    in a 0700 folder, atomically (a temp file, fsync, rename).
 *
 * One trailing newline is not part of a value (`echo key > file`, systemd's
 * `SetCredential=`), and an empty file is no credential.
 */
export class CredentialStore {
  readonly dir: string;
  /** `$CREDENTIALS_DIRECTORY` when it is set to an absolute path (systemd always does). */
  readonly systemdDir: string | undefined;

  constructor(stateDir: string, env: NodeJS.ProcessEnv) {
    this.dir = join(stateDir, "credentials");
    const given = env.CREDENTIALS_DIRECTORY;
    this.systemdDir = given !== undefined && isAbsolute(given) ? given : undefined;
  }

  /** The credential `name`, from the first place that has it; undefined when none does. */
  async read(name: string): Promise<Credential | undefined> {
    checkName(name);
    if (this.systemdDir !== undefined) {
      const found = await readValue(join(this.systemdDir, name));
      if (found !== undefined) return { ...found, source: "systemd" };
    }
    const found = await readValue(join(this.dir, name));
    return found === undefined ? undefined : { ...found, source: "state" };
  }

  /**
   * Refuses a name systemd provides (hal0 would never read what it writes),
   * and a place no file can be written: a folder at `credentials/<name>`, or a
   * `credentials` that is not a folder (so a gated request is refused before it is queued).
   */
  async checkWritable(name: string): Promise<void> {
    checkName(name);
    if (this.systemdDir !== undefined && (await readValue(join(this.systemdDir, name))) !== undefined) {
      throw new ApiError("provider.credential_systemd", `credential ${name} comes from systemd ($CREDENTIALS_DIRECTORY), which hal0 reads first; change it in the unit (LoadCredential=${name}:…) instead`, { name, source: "systemd" });
    }
    const folder = await stat(this.dir).catch(() => undefined);
    if (folder !== undefined && !folder.isDirectory()) throw notStored(name, this.dir, `${this.dir} is not a folder`);
    const path = join(this.dir, name);
    if ((await stat(path).catch(() => undefined))?.isDirectory()) throw notStored(name, path, "a folder stands there");
  }

  /** Stores `value` as `<state>/credentials/<name>` (0600, folder 0700); returns its fingerprint, never the value. */
  async write(name: string, value: string): Promise<{ fingerprint: string; path: string }> {
    await this.checkWritable(name);
    const path = join(this.dir, name);
    try {
      await mkdir(this.dir, { recursive: true, mode: 0o700 });
      // A folder made before (or by hand) may be looser than mkdir's mode would make it.
      await chmod(this.dir, 0o700);
      await writeFileAtomic(path, value, 0o600);
    } catch (err) {
      throw storageFull(err) ?? notStored(name, path, (err as Error).message);
    }
    return { fingerprint: fingerprint(value), path };
  }
}

function notStored(name: string, path: string, why: string): ApiError {
  return new ApiError("provider.credential_write_failed", `credential ${name} could not be stored as ${path}: ${why}; nothing was written`, { name });
}

/** Credential names are upstream names: the grammar also keeps a name from leaving its folder. */
function checkName(name: string): void {
  if (!SLOT_NAME_PATTERN.test(name)) throw new ApiError("validation.invalid", `credential name ${JSON.stringify(name)} is not a name (lowercase a–z, digits, _ and -)`, { name });
}

/** A credential file's value; undefined when there is none (no file, an empty one); `unreadable` when it is there but cannot be read. */
async function readValue(path: string): Promise<{ value: string } | { unreadable: string } | undefined> {
  let text: string;
  try {
    text = await readFile(path, "utf8");
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code ?? "";
    if (["ENOENT", "ENOTDIR", "EISDIR"].includes(code)) return undefined;
    return { unreadable: `${path} cannot be read: ${code || (err as Error).message}` };
  }
  const value = text.replace(/\r?\n$/, "");
  return value === "" ? undefined : { value };
}
