import { packageVersion } from "../server/version.js";
import { EXIT_OK, parseCommandArgs, type CliIo } from "./io.js";

export const VERSION_HELP = `hal0 version [--json]   (also: hal0 --version)

Prints hal0's version and the node it runs on: 'hal0 0.1.0 (node v20.20.2, linux x64)'.
  --json   print {version, node, platform, arch}`;

/** `hal0 version` / `hal0 --version`: the package's version (its package.json, as the server reports it) and the node running it. */
export async function runVersion(args: string[], io: CliIo): Promise<number> {
  const { values } = parseCommandArgs({ args, strict: true, allowPositionals: false, options: { json: { type: "boolean" } } });
  const facts = { version: packageVersion(), node: process.version, platform: process.platform, arch: process.arch };
  io.stdout.write(values.json ? `${JSON.stringify(facts, null, 2)}\n` : `hal0 ${facts.version} (node ${facts.node}, ${facts.platform} ${facts.arch})\n`);
  return EXIT_OK;
}
