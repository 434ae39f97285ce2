import { parse } from "smol-toml";
import { Settings } from "../../schema/index.js";
import type { FileEdit } from "../changeset.js";
import { same } from "../hash.js";

/**
 * A settings PUT as data: the body deep-merged into `hal0.toml` (tables
 * merge, lists and scalars replace, null removes the key), as one `set` edit
 * per leaf so the file's comments and layout survive. Pure. (The apply plan
 * of the leaf keys whose effective value moved is the reconciler's:
 * settings-plan.ts `applyPlanOf`.)
 */

export const SETTINGS_FILE = "hal0.toml";

type Doc = Record<string, unknown>;

function isTable(v: unknown): v is Doc {
  return v !== null && typeof v === "object" && !Array.isArray(v);
}

/**
 * One `set` edit per leaf of `patch`. A table in the patch is walked into
 * when the file holds a table (or nothing) there; over a scalar or list it
 * replaces the value whole. An empty table in the patch edits nothing. A
 * leaf that would not change the file is skipped: one equal to the file's
 * value, or, for a key the file lacks, equal to its effective (default)
 * value in `effective` — so the file stays sparse and a GET reply PUT back
 * writes nothing.
 */
export function mergeEdits(current: Doc, patch: Doc, effective: unknown, prefix: readonly string[] = []): FileEdit[] {
  const edits: FileEdit[] = [];
  for (const [key, value] of Object.entries(patch)) {
    const path = [...prefix, key];
    const here = current[key];
    const eff = isTable(effective) ? effective[key] : undefined;
    if (isTable(value) && (here === undefined || isTable(here))) edits.push(...mergeEdits(isTable(here) ? here : {}, value, eff, path));
    else if (value === null ? here !== undefined : !same(here === undefined ? eff : here, value)) edits.push({ file: SETTINGS_FILE, op: "set", path, value });
  }
  return edits;
}

/** `current` with `patch` deep-merged in, by the rules of `mergeEdits`; inputs untouched. */
export function deepMerge(current: Doc, patch: Doc): Doc {
  const out: Doc = { ...current };
  for (const [key, value] of Object.entries(patch)) {
    if (value === null) delete out[key];
    else if (isTable(value) && (out[key] === undefined || isTable(out[key]))) out[key] = deepMerge(isTable(out[key]) ? (out[key] as Doc) : {}, value);
    else out[key] = value;
  }
  return out;
}

/** The raw document of `hal0.toml` (absent or empty → `{}`); undefined when it is not TOML. */
export function readSettingsDoc(text: string | undefined): Doc | undefined {
  try {
    return text === undefined ? {} : (parse(text) as Doc);
  } catch {
    return undefined;
  }
}

/** The effective settings of a raw document (defaults filled), or undefined when it is invalid. */
export function effectiveSettings(doc: Doc | undefined): Settings | undefined {
  if (doc === undefined) return undefined;
  const r = Settings.safeParse(doc);
  return r.success ? r.data : undefined;
}
