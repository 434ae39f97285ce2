import { mkdir, readdir, readFile, rm } from "node:fs/promises";
import { join, resolve } from "node:path";
import { HAL0_SCHEMA_ID, renderJsonSchemas } from "../schema/index.js";
import { writeFileAtomic } from "../reconciler/index.js";
import { EXIT_OK, parseCommandArgs, type CliIo } from "./io.js";
import { packageRoot } from "../reconciler/package-root.js";
import { refuseNonFolder } from "./paths.js";

export const SCHEMA_HELP = `hal0 schema [--out DIR]

Writes one JSON Schema (draft-07) per file kind, for editors (Taplo / Even Better TOML),
and removes a schema an earlier hal0 wrote there for a file kind there is no more (its $id
is https://hal0.dev/schema/…); any other file in DIR is left as it is.
  --out DIR   where to write them (default: the package's schema/json/)`;

/** `hal0 schema`: writes every file kind's JSON Schema, and removes stale ones. */
export async function runSchema(args: string[], io: CliIo): Promise<number> {
  const { values } = parseCommandArgs({ args, options: { out: { type: "string" } }, strict: true, allowPositionals: false });
  const out = refuseNonFolder(values.out ? resolve(io.cwd, values.out) : join(packageRoot(), "schema", "json"), "--out");
  await mkdir(out, { recursive: true });
  const schemas = renderJsonSchemas();
  for (const [name, text] of schemas) await writeFileAtomic(join(out, name), text);
  // Only hal0's own stale schemas go: --out may name a folder that holds other schemas too (an editor's, another tool's).
  for (const name of await readdir(out)) {
    if (name.endsWith(".schema.json") && !schemas.has(name) && (await writtenByHal0(join(out, name)))) await rm(join(out, name));
  }
  io.stdout.write(`wrote ${schemas.size} JSON Schemas to ${out}\n`);
  return EXIT_OK;
}

/** Whether `file` is a JSON Schema hal0 wrote: its `$id` is under hal0's (jsonSchemaOf). */
async function writtenByHal0(file: string): Promise<boolean> {
  try {
    const id = (JSON.parse(await readFile(file, "utf8")) as { $id?: unknown } | null)?.$id;
    return typeof id === "string" && id.startsWith(HAL0_SCHEMA_ID);
  } catch {
    return false;
  }
}
