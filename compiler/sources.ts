/**
 * The unit the compiler reads: a config tree as text, in memory. `load.ts`
 * fills one from disk; a ChangeSet is applied to a copy of one; tests and the
 * benchmark build them directly. Paths are relative to `root`, with `/`.
 */
export interface SourceTree {
  /** Absolute path of the config folder; relative paths inside files resolve against it. */
  readonly root: string;
  /** Tree-relative path → file text, for every `.toml` file of the tree. */
  readonly files: ReadonlyMap<string, string>;
}

export function sourceTree(root: string, files: Iterable<readonly [string, string]>): SourceTree {
  const sorted = [...files].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  return { root, files: new Map(sorted) };
}
