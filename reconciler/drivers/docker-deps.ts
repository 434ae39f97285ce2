import { createRequire } from "node:module";
import { DOCKER_DEFERRED, standIn } from "./stand-in.js";

/**
 * dockerode loads gRPC (for BuildKit sessions) and docker-modem loads ssh2
 * (for ssh:// engines) as soon as they are imported: ~0.3 s of a CLI
 * command's ~0.8 s, for code hal0 never runs (it builds no images and talks
 * to unix:// or tcp:// engines). Likewise node's https (with tls, ~4-5 ms:
 * docker-modem reads it for https:// engines) and zlib (dockerode gzips a
 * build context with it). Imported by docker.ts before dockerode, this
 * puts a stand-in for each of those modules in the require cache (node
 * consults it for a built-in named without `node:` too); the real module
 * loads the first time anything on it is used, so behaviour is the same if
 * dockerode ever does use it. Code that names `node:https` gets the real
 * module as always. The bundled CLI does not run this: its build puts the
 * same stand-ins where dockerode and docker-modem require those modules
 * (scripts/bundle.mjs), with no module lookup on the file system at start.
 */
const require = createRequire(import.meta.url);
const fromDockerode = createRequire(require.resolve("dockerode"));
const fromModem = createRequire(require.resolve("docker-modem"));

function deferred(resolveFrom: NodeJS.Require, name: string, constructors: readonly string[] = []): void {
  const path = resolveFrom.resolve(name);
  if (require.cache[path]) return;
  const load = () => {
    delete require.cache[path];
    return resolveFrom(name) as Record<string | symbol, unknown>;
  };
  const Module = require("node:module") as { new (id: string): NodeJS.Module };
  const entry = new Module(path);
  entry.filename = path;
  entry.loaded = true;
  entry.exports = standIn(load, constructors);
  require.cache[path] = entry;
}

for (const [name, { from, classes }] of Object.entries(DOCKER_DEFERRED)) deferred(from === "dockerode" ? fromDockerode : fromModem, name, classes);
