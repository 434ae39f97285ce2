import { constants } from "node:fs";
import { mkdir, open } from "node:fs/promises";
import { join } from "node:path";
import { writeFileAtomic } from "../atomic.js";
import { slotPaths } from "./runtime-record.js";

/**
 * How much of the output of the containers hal0 removed a slot keeps
 * (`<state>/slots/<name>/container.log`): the newest 64 KiB, across
 * removals, whole lines only.
 */
export const CONTAINER_LOG_MAX_BYTES = 64 * 1024;

/**
 * Where the docker runtime keeps the last output of a slot's containers it
 * removed (crashed, replaced or stopped): the engine deletes a container's
 * log with it, and slot_logs shows these lines before the current container's.
 */
export function containerLogPath(stateDir: string, name: string): string {
  return join(slotPaths(stateDir, name).dir, "container.log");
}

/**
 * Appends `lines` (a removed container's last output, each masked by `mask`)
 * and a line saying which container they came from to the slot's
 * container.log, keeping its newest CONTAINER_LOG_MAX_BYTES; written
 * atomically (0600: a runner's output), its folder made as the process
 * runtime makes it. What was there is read only when it is a regular file
 * (never through a link), and only its newest CONTAINER_LOG_MAX_BYTES.
 */
export async function saveContainerLog(stateDir: string, name: string, lines: readonly string[], footer: string, mask: (line: string) => string): Promise<void> {
  const file = containerLogPath(stateDir, name);
  const before = await keptTail(file);
  const added = Buffer.from([...lines.map(mask), footer].map((line) => `${line}\n`).join(""), "utf8");
  let all = Buffer.concat([before, added]);
  if (all.length > CONTAINER_LOG_MAX_BYTES) {
    all = all.subarray(all.length - CONTAINER_LOG_MAX_BYTES);
    const newline = all.indexOf(10);
    all = newline === -1 ? Buffer.alloc(0) : all.subarray(newline + 1); // a cut first line is dropped
  }
  await mkdir(slotPaths(stateDir, name).dir, { recursive: true, mode: 0o700 });
  await writeFileAtomic(file, all, 0o600);
}

/** The newest CONTAINER_LOG_MAX_BYTES of `file` when it is a regular file; else nothing (what replaces it is). */
async function keptTail(file: string): Promise<Buffer> {
  const handle = await open(file, constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK).catch(() => undefined);
  if (handle === undefined) return Buffer.alloc(0);
  try {
    const stat = await handle.stat();
    if (!stat.isFile()) return Buffer.alloc(0);
    const from = Math.max(0, stat.size - CONTAINER_LOG_MAX_BYTES);
    const { buffer, bytesRead } = await handle.read(Buffer.alloc(stat.size - from), 0, stat.size - from, from);
    return buffer.subarray(0, bytesRead);
  } finally {
    await handle.close();
  }
}

/**
 * The saves of each slot's container.log under way, one at a time per slot in
 * the order asked, so two removals close together (a replace, then a stop)
 * append both, never one over the other. The docker and swarm drivers keep one
 * each.
 */
export class LogSaves {
  private readonly pending = new Map<string, Promise<void>>();

  /** Runs `save` after the slot's earlier saves; resolves when it has run. */
  after(name: string, save: () => Promise<void>): Promise<void> {
    const next = (this.pending.get(name) ?? Promise.resolve()).then(save);
    this.pending.set(name, next);
    void next.then(() => {
      if (this.pending.get(name) === next) this.pending.delete(name);
    });
    return next;
  }
}
