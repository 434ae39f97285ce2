import { resolve } from "node:path";

/** The config folder: `--config`, else $HAL0_CONFIG, else $HAL0_HOME/etc/hal0, else /etc/hal0. */
export function configDir(flag: string | undefined, env: Readonly<Record<string, string | undefined>>, cwd: string): string {
  if (flag) return resolve(cwd, flag);
  if (env.HAL0_CONFIG) return resolve(cwd, env.HAL0_CONFIG);
  if (env.HAL0_HOME) return resolve(cwd, env.HAL0_HOME, "etc/hal0");
  return "/etc/hal0";
}

/** The state folder: `--state`, else $HAL0_STATE, else $HAL0_HOME/var/lib/hal0, else /var/lib/hal0. */
export function stateDir(flag: string | undefined, env: Readonly<Record<string, string | undefined>>, cwd: string): string {
  if (flag) return resolve(cwd, flag);
  if (env.HAL0_STATE) return resolve(cwd, env.HAL0_STATE);
  if (env.HAL0_HOME) return resolve(cwd, env.HAL0_HOME, "var/lib/hal0");
  return "/var/lib/hal0";
}
