import { createRequire } from "node:module";

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
 * module as always.
 */
const require = createRequire(import.meta.url);
const fromDockerode = createRequire(require.resolve("dockerode"));
const fromModem = createRequire(require.resolve("docker-modem"));

type Loader = () => Record<string | symbol, unknown>;

function deferred(resolveFrom: NodeJS.Require, name: string, constructors: readonly string[] = []): void {
  const path = resolveFrom.resolve(name);
  if (require.cache[path]) return;
  let real: Record<string | symbol, unknown> | undefined;
  const load: Loader = () => {
    if (!real) {
      delete require.cache[path];
      real = resolveFrom(name) as Record<string | symbol, unknown>;
    }
    return real;
  };
  // A class read at import time (`require('ssh2').Client`) is itself deferred until it is constructed.
  const lazyClass = (key: string) => function (this: unknown, ...args: unknown[]) {
    return new (load()[key] as new (...a: unknown[]) => unknown)(...args);
  };
  const classes = Object.fromEntries(constructors.map((k) => [k, lazyClass(k)]));
  const stand: object = new Proxy({}, {
    get: (_t, key) => (typeof key === "string" && key in classes && !real ? classes[key] : load()[key]),
    // A property set on the stand-in itself goes to the real module; one set on an object that
    // inherits from it (docker-modem builds its https client so) lands on that object, as usual.
    set: (target, key, value, receiver): boolean => (receiver === stand ? Reflect.set(load(), key, value) : Reflect.set(target, key, value, receiver)),
    has: (_t, key) => key in load(),
    ownKeys: () => Reflect.ownKeys(load()),
    getOwnPropertyDescriptor: (_t, key) => {
      const d = Reflect.getOwnPropertyDescriptor(load(), key);
      return d ? { ...d, configurable: true } : undefined;
    },
  });
  const Module = require("node:module") as { new (id: string): NodeJS.Module };
  const entry = new Module(path);
  entry.filename = path;
  entry.loaded = true;
  entry.exports = stand;
  require.cache[path] = entry;
}

deferred(fromDockerode, "@grpc/grpc-js");
deferred(fromDockerode, "@grpc/proto-loader");
deferred(fromModem, "ssh2", ["Client"]);
deferred(fromModem, "https");
deferred(fromDockerode, "zlib");
