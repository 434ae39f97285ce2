import { converge } from "../../reconciler/converge.js";
import { LockedError } from "../../reconciler/lock.js";
import { parseAddress } from "../../schema/index.js";
import { BRAIN_PROFILE } from "../../reconciler/hermes-wire.js";
import type { BoxService } from "../box.js";
import { serverState, type ServerState } from "./probe.js";

/**
 * The join report every /api/mcp mutation returns (seed 001 `hermes_sync`):
 * which Hermes profiles now carry the change, the hal0-brain profile
 * separately, what failed, and the server's state. It never fails the
 * request: failures are listed in `errors`.
 */
export interface HermesSync {
  /** Named profiles other than hal0-brain: all of them, and those whose file changed now. */
  readonly hermes: { readonly profiles: readonly string[]; readonly changed: readonly string[] };
  readonly brain: { readonly present: boolean; readonly changed: boolean };
  readonly errors: ReadonlyArray<{ readonly profile?: string; readonly code: string; readonly message: string }>;
  /** The installed server's state after the change (null when it is gone or none was named). */
  readonly probe: ServerState | null;
}

/**
 * Converges the Hermes profile files now, as the sweep would, under the same
 * state-folder lock (a sweep holding it is reported, and will converge them
 * itself). Only `hermes.*` changes are planned: slots are the sweep's business.
 */
export async function hermesSync(box: BoxService, serverId?: string): Promise<HermesSync> {
  const errors: Array<{ profile?: string; code: string; message: string }> = [];
  let profiles: string[] = [];
  let changed: string[] = [];
  let probe: ServerState | null = null;
  try {
    const model = await box.model();
    const record = serverId === undefined ? undefined : model.mcpServers[serverId];
    if (record) probe = await serverState(record);
    try {
      // Hermes files only: no runtime is observed (the sweep converges slots).
      const done = await converge({ model, state: box.state, hermesCredentials: box.options.hermesCredentials }, {
        holder: "hal0 serve (mcp hermes_sync)", plan: { only: { kinds: ["hermes"] } }, conditions: "skip",
      });
      profiles = Object.keys(done.observed.hermes_profiles ?? {}).sort();
      for (const w of done.plan.warnings) errors.push({ profile: profileOf(w.address), code: w.code, message: w.message });
      for (const r of done.results) {
        const profile = profileOf(r.address);
        if (!r.ok) errors.push({ profile, code: r.code ?? "hermes.write_failed", message: r.error ?? "the write failed" });
        // A removed profile's token was revoked: no file of it changed.
        else if (r.action !== "delete") changed.push(profile);
      }
    } catch (err) {
      if (!(err instanceof LockedError)) throw err;
      errors.push({ code: "apply.locked", message: "a sweep or apply holds the state folder; it converges the Hermes files itself" });
    }
  } catch (err) {
    errors.push({ code: (err as { code?: string }).code ?? "system.internal", message: (err as Error).message });
  }
  changed = changed.sort();
  return {
    hermes: { profiles: profiles.filter((p) => p !== BRAIN_PROFILE), changed: changed.filter((p) => p !== BRAIN_PROFILE) },
    brain: { present: profiles.includes(BRAIN_PROFILE), changed: changed.includes(BRAIN_PROFILE) },
    errors,
    probe,
  };
}

/** The named profile a `hermes.<p>` address (a warning's, a step's) is about. */
function profileOf(address: string): string {
  const parsed = parseAddress(address);
  return parsed?.kind === "hermes" ? (parsed.profile ?? "default") : address;
}
