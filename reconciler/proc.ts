import { readFile } from "node:fs/promises";

/**
 * Field 22 of /proc/<pid>/stat: the process's start time in clock ticks since
 * boot. A pid plus its start time names one process for its whole life, so a
 * reused pid is told apart. Undefined when the process does not exist.
 */
export async function processStartTime(pid: number): Promise<string | undefined> {
  try {
    const stat = await readFile(`/proc/${pid}/stat`, "utf8");
    // The command (field 2) is in parentheses and may contain spaces: split after the last ')'.
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    return fields[19];
  } catch {
    return undefined;
  }
}
