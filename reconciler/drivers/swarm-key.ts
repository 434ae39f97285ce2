import { randomBytes } from "node:crypto";
import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { writeFileAtomic } from "../atomic.js";

/**
 * The box's API key for the swarm runtime's runners: 32 random bytes as hex,
 * kept in `<state>/swarm-api-key` (0600). Made by the first start of a swarm
 * slot — so a plan, which starts nothing, writes nothing — and then passed to
 * every runner as a Swarm secret; hal0's probes and reads of a slot send it.
 * It is never in argv, a plan, a reply or a log.
 */
export class SwarmKey {
  private key?: string;
  private ensuring?: Promise<string>;

  constructor(private readonly stateDir: string) {}

  get path(): string {
    return join(this.stateDir, "swarm-api-key");
  }

  /** The key when one was made; undefined before the first swarm start. */
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
