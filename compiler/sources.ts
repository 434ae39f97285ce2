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

/**
 * The largest file hal0 reads: 1 MiB, far above any file it reads (a
 * models.toml of a thousand models is ~200 KiB). A larger one is
 * `config.read_error` whether it is on disk (`load.ts`, which does not read
 * it) or a change's text (`validate.ts`): compiling megabytes of keys takes
 * seconds each, and a 50 MB file minutes and gigabytes.
 */
export const MAX_FILE_BYTES = 1024 * 1024;
