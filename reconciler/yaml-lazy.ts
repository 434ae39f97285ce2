import { createRequire } from "node:module";

type Yaml = typeof import("yaml");
let loaded: Yaml | undefined;

/**
 * The `yaml` package, loaded on first use (~70 ms): most commands never read a
 * Hermes file. Loading a module is the only thing this does; no other I/O.
 */
export function yaml(): Yaml {
  return (loaded ??= createRequire(import.meta.url)("yaml") as Yaml);
}
