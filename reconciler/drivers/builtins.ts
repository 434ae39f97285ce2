import { createRequire } from "node:module";

/**
 * Built-ins a command may not need, loaded at first use: an idle `hal0 plan`
 * probes no port and starts no runner, so it loads neither node:http,
 * node:net nor node:child_process. (`require`, not `import()`: the bundled
 * CLI runs as one CommonJS script, and a dynamic import there would go
 * through node's ES module loader.)
 */
const require = createRequire(import.meta.url);

export const lazyHttp = (): typeof import("node:http") => require("node:http");
export const lazyNet = (): typeof import("node:net") => require("node:net");
export const lazyChildProcess = (): typeof import("node:child_process") => require("node:child_process");
