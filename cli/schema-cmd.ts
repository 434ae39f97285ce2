import { mkdir, readdir, rm } from "node:fs/promises";
import { join, resolve } from "node:path";
import { renderJsonSchemas } from "../schema/index.js";
import { writeFileAtomic } from "../reconciler/index.js";
import { EXIT_OK, parseCommandArgs, type CliIo } from "./io.js";
import { packageRoot } from "../reconciler/package-root.js";
import { refuseNonFolder } from "./paths.js";

export const SCHEMA_HELP = `hal0 schema [--out DIR]

Writes one JSON Schema (draft-07) per file kind, for editors (Taplo / Even Better TOML).
  --out DIR   where to write them (default: the package's schema/json/)`;

/** `hal0 schema`: writes every file kind's JSON Schema, and removes stale ones. */
export async function runSchema(args: string[], io: CliIo): Promise<number> {
  const { values } = parseCommandArgs({ args, options: { out: { type: "string" } }, strict: true, allowPositionals: false });
  const out = refuseNonFolder(values.out ? resolve(io.cwd, values.out) : join(packageRoot(), "schema", "json"), "--out");
  await mkdir(out, { recursive: true });
  const schemas = renderJsonSchemas();
  for (const [name, text] of schemas) await writeFileAtomic(join(out, name), text);
  for (const name of await readdir(out)) {
    if (name.endsWith(".schema.json") && !schemas.has(name)) await rm(join(out, name));
  }
  io.stdout.write(`wrote ${schemas.size} JSON Schemas to ${out}\n`);
  return EXIT_OK;
}
