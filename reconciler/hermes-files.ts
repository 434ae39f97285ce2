import { entryKind } from "../compiler/load.js";
import { readdir, readFile } from "node:fs/promises";
import { join } from "node:path";
import { replaceFileKeeping } from "./atomic.js";
import { applyHal0Keys } from "./hermes-wire.js";
import type { ObservedHermesProfile } from "./observed.js";

/**
 * Reads every named Hermes profile's `config.yaml` under `<home>/profiles/`:
 * the sweep's input for `hermes.<p>`. The default profile (`<home>/config.yaml`)
 * is not read here: it is converged only on demand (`hal0 agent reprovision
 * hermes --repair`). A missing home, a profile folder without a config.yaml,
 * or a folder name that cannot be an agent identity (`hermes__<p>` must match
 * `[A-Za-z0-9_-]{1,64}`) is skipped.
 */
export const PROFILE_NAME = /^[A-Za-z0-9_-]{1,56}$/;

export async function readHermesProfiles(home: string): Promise<Record<string, ObservedHermesProfile>> {
  const dir = join(home, "profiles");
  const entries = await readdir(dir, { withFileTypes: true }).catch((err: NodeJS.ErrnoException) => {
    if (err.code === "ENOENT" || err.code === "ENOTDIR") return [];
    throw err;
  });
  // A profile folder may be a symbolic link to one kept elsewhere: it counts as what it leads to.
  const names = entries.filter((e) => PROFILE_NAME.test(e.name) && entryKind(join(dir, e.name), e) === "folder").map((e) => e.name).sort();
  const texts = await Promise.all(names.map((name) => readHermesFile(join(dir, name, "config.yaml"))));
  const out: Record<string, ObservedHermesProfile> = {};
  names.forEach((name, i) => {
    if (texts[i] !== undefined) out[name] = { text: texts[i]! };
  });
  return out;
}

/** A Hermes config file's text; undefined when it does not exist. */
export async function readHermesFile(file: string): Promise<string | undefined> {
  try {
    return await readFile(file, "utf8");
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT" || (err as NodeJS.ErrnoException).code === "ENOTDIR") return undefined;
    throw err;
  }
}

/**
 * Sets hal0's keys in one Hermes file to `desired`, removing those of
 * `ownedIds` (and hal0's two servers) that are not desired: re-read, edited
 * in memory (`applyHal0Keys`), written atomically with the file's mode and,
 * where permitted, its owner; a symbolic link (a dotfiles checkout) stays a
 * link to the file written. An unchanged file is not written.
 */
export async function convergeHermesFile(file: string, desired: Readonly<Record<string, unknown>>, ownedIds: readonly string[]): Promise<boolean> {
  const text = await readFile(file, "utf8");
  const next = applyHal0Keys(text, desired, ownedIds);
  if (next === text) return false;
  await replaceFileKeeping(file, next);
  return true;
}
