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
