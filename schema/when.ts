import type { z } from "zod";

/**
 * The `when` of a cross-field refinement: it runs whenever the keys it reads
 * are valid, whatever else in the object is wrong. zod 4 skips a refinement
 * once the object has any issue (a wrong type three keys away), so without
 * this a file reports its first kind of problem and hides the rest until that
 * is fixed; with it, one run reports every independent error of a file.
 * Keys outside `keys` may hold raw, invalid values: the refinement must read
 * only `keys`. An object that is not an object (or has an issue at its own
 * level other than unknown keys) never runs it.
 */
export function whenValid(...keys: readonly string[]): (payload: z.core.ParsePayload) => boolean {
  return (payload) => {
    const value = payload.value;
    if (typeof value !== "object" || value === null || Array.isArray(value)) return false;
    return payload.issues.every((issue) => {
      if (issue.code === "unrecognized_keys") return true;
      const path = issue.path;
      return path !== undefined && path.length > 0 && !keys.includes(String(path[0]));
    });
  };
}
