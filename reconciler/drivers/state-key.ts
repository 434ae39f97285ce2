import { randomBytes } from "node:crypto";
import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { writeFileAtomic } from "../atomic.js";

/**
 * A key of the box kept in the state folder: 32 random bytes as hex in
 * `<state>/<file>` (0600). Made by the first start that needs it — so a
 * plan, which starts nothing, writes nothing — and read from then on. Never
 * in argv, a plan, a reply or a log.
 */
export class StateKey {
  private key?: string;
  private ensuring?: Promise<string>;

  constructor(private readonly stateDir: string, private readonly file: string) {}

  get path(): string {
    return join(this.stateDir, this.file);
  }

  /** The key when one was made; undefined before the first start that needs it. */
  async read(): Promise<string | undefined> {
    if (this.key !== undefined) return this.key;
    const text = await readFile(this.path, "utf8").catch(() => undefined);
    const key = text?.trim();
    if (key !== undefined && /^[0-9a-f]{64}$/.test(key)) this.key = key;
    return this.key;
  }

  /** The key, made and kept when there is none yet. Calls at once (slots started side by side) share one key. */
  ensure(): Promise<string> {
    this.ensuring ??= (async () => {
      const found = await this.read();
      if (found !== undefined) return found;
      const key = randomBytes(32).toString("hex");
      await writeFileAtomic(this.path, `${key}\n`, 0o600);
      this.key = key;
      return key;
    })().finally(() => (this.ensuring = undefined));
    return this.ensuring;
  }

  /** The key already read (sync, for a caller that observed first); undefined when none was. */
  known(): string | undefined {
    return this.key;
  }
}
