import { open, rename, rm } from "node:fs/promises";
import { basename, dirname, join } from "node:path";
import { randomBytes } from "node:crypto";

/** Writes `text` to `path` atomically: a temp file in the same folder, fsync, rename. */
export async function writeFileAtomic(path: string, text: string, mode = 0o644): Promise<void> {
  const tmp = join(dirname(path), `.${basename(path)}.${randomBytes(6).toString("hex")}.tmp`);
  const handle = await open(tmp, "wx", mode);
  try {
    await handle.writeFile(text);
    await handle.sync();
  } catch (err) {
    await handle.close();
    await rm(tmp, { force: true });
    throw err;
  }
  await handle.close();
  await rename(tmp, path).catch(async (err: unknown) => {
    await rm(tmp, { force: true });
    throw err;
  });
}
