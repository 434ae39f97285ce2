export { main } from "./main.js";
export { configDir, stateDir } from "./paths.js";
export type { CliIo } from "./io.js";
