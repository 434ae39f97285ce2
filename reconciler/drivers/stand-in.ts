/**
 * What dockerode and docker-modem require as soon as they are imported and hal0
 * never uses (gRPC for BuildKit sessions, ssh2 for ssh:// engines, https for
 * https:// engines, zlib for build contexts): by the package that requires it,
 * with the classes read off it at import (each deferred until constructed).
 * docker-deps.ts puts a stand-in for each in the require cache; the bundle puts
 * one where the bundled packages require it (scripts/bundle.mjs).
 */
export const DOCKER_DEFERRED: Readonly<Record<string, { readonly from: "dockerode" | "docker-modem"; readonly classes: readonly string[] }>> = {
  "@grpc/grpc-js": { from: "dockerode", classes: [] },
  "@grpc/proto-loader": { from: "dockerode", classes: [] },
  ssh2: { from: "docker-modem", classes: ["Client"] },
  https: { from: "docker-modem", classes: [] },
  zlib: { from: "dockerode", classes: [] },
};

/**
 * A stand-in for a CommonJS module that loads it the first time anything on it
 * is used: every read, `in`, key listing and property set goes to the real
 * module, required then by `load`. A class read at import time (`require('ssh2').Client`)
 * is itself deferred until it is constructed. Used by docker-deps.ts (through
 * the require cache) and by the bundle (scripts/bundle.mjs puts one where
 * dockerode and docker-modem require those modules).
 */
export function standIn(load: () => Record<string | symbol, unknown>, constructors: readonly string[] = []): object {
  let real: Record<string | symbol, unknown> | undefined;
  const once = () => (real ??= load());
  const lazyClass = (key: string) => function (this: unknown, ...args: unknown[]) {
    return new (once()[key] as new (...a: unknown[]) => unknown)(...args);
  };
  const classes = Object.fromEntries(constructors.map((k) => [k, lazyClass(k)]));
  const stand: object = new Proxy({}, {
    get: (_t, key) => (typeof key === "string" && key in classes && !real ? classes[key] : once()[key]),
    // A property set on the stand-in itself goes to the real module; one set on an object that
    // inherits from it (docker-modem builds its https client so) lands on that object, as usual.
    set: (target, key, value, receiver): boolean => (receiver === stand ? Reflect.set(once(), key, value) : Reflect.set(target, key, value, receiver)),
    has: (_t, key) => key in once(),
    ownKeys: () => Reflect.ownKeys(once()),
    getOwnPropertyDescriptor: (_t, key) => {
      const d = Reflect.getOwnPropertyDescriptor(once(), key);
      return d ? { ...d, configurable: true } : undefined;
    },
  });
  return stand;
}
