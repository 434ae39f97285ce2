import { watch, type FSWatcher } from "node:fs";
import { join } from "node:path";

/** What `watchFolders` hands back: stop watching. */
export interface FolderWatch {
  close(): void;
}

/**
 * Watches each of `folders` (its entries, not deeper) with node's own
 * `fs.watch` (inotify on Linux) and calls `onEvent` with the path of the entry
 * each event names (the folder itself when an event names none, or when the
 * watch fails: the folder went away). An event costs its callback and nothing
 * more: chokidar, which this replaces, read the whole folder again (a stat of
 * every entry) after each event, so a write of n files into a folder of m
 * files (a stack applied, a plan of many slot files) cost n × m stats, in each
 * watcher of the tree.
 *
 * A folder that does not exist, or cannot be watched, is left out; an event
 * in the folder above it (its making) tells the caller to watch anew. A watch
 * stays with the folder it found (inotify follows the inode): one removed or
 * replaced, or a link switched to another folder, needs a new watch — the
 * callers watch anew on an event naming a folder, and check the tree for
 * what no event told.
 */
export function watchFolders(folders: readonly string[], onEvent: (path: string) => void, options: { persistent?: boolean } = {}): FolderWatch {
  const watchers: FSWatcher[] = [];
  let closed = false;
  for (const folder of folders) {
    let watcher: FSWatcher;
    try {
      watcher = watch(folder, { persistent: options.persistent ?? true }, (_event, name) => {
        if (!closed) onEvent(name === null || name === "" ? folder : join(folder, name.toString()));
      });
    } catch {
      continue;
    }
    // A watch that fails (its folder removed, a permission taken away) is an event on the folder; unheard it would end the process.
    watcher.on("error", () => {
      watcher.close();
      if (!closed) onEvent(folder);
    });
    watchers.push(watcher);
  }
  return {
    close() {
      closed = true;
      for (const w of watchers) w.close();
    },
  };
}
