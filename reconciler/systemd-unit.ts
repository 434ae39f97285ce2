import { spawn } from "node:child_process";
import { existsSync } from "node:fs";
import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { shellWord } from "./shell-word.js";

/**
 * The systemd unit of `hal0 serve` (`hal0 service install` writes it,
 * `hal0 doctor` checks it). What its sandboxing must leave open, and why:
 *
 * - `ProtectSystem=strict` makes every path read-only but those named in
 *   `ReadWritePaths=`: the state folder (database, records, logs), the config
 *   folder (API writes), and the model store (pulls) when it is elsewhere.
 * - `ProtectHome=read-only`, not `yes`: model files and runners often live
 *   under /home; a folder there that hal0 writes is in `ReadWritePaths=`. The
 *   Hermes home (`[hermes] home`, often `~/.hermes`) is there with systemd's
 *   `-` prefix: hal0 writes its profiles but never creates it, and a missing
 *   path must not keep the unit from starting.
 * - `PrivateTmp=yes`, unless a folder the service uses (or node, or hal0)
 *   lies under /tmp or /var/tmp: a private /tmp would hide it, and the unit
 *   would start on an empty folder or not at all.
 * - No `PrivateDevices=`: runners need /dev/kfd, /dev/dri and /dev/accel.
 * - No `MemoryDenyWriteExecute=`: node's JIT (and llama.cpp's) needs it.
 * - The process runtime's runners are children in the unit's cgroup: stopping
 *   the unit (or its restart after a crash) stops them too (`KillMode` stays
 *   control-group), and the next start brings them up again.
 * - The docker runtime's containers run under dockerd, outside the cgroup;
 *   hal0 only needs to connect to the engine's socket, which a read-only
 *   mount does not prevent (connecting is not writing the file system).
 */

export const UNIT_NAME = "hal0.service";
export const DEFAULT_UNIT_DIR = "/etc/systemd/system";

export interface UnitOptions {
  /** Absolute path of node. */
  readonly node: string;
  /** Absolute path of hal0's bin/hal0.cjs (the `hal0` command). */
  readonly bin: string;
  readonly config: string;
  readonly state: string;
  /** Other folders hal0 writes (the model store). */
  readonly writable?: readonly string[];
  /** Folders hal0 writes when they are there but never creates (the Hermes home): `-` prefixed. */
  readonly writableIfPresent?: readonly string[];
  /** `User=`; absent: root. */
  readonly user?: string;
  /** `Group=`: the user's primary group (absent: systemd's default, the user's own). */
  readonly group?: string;
  /** `PATH` as hal0 should see it (where runners are found). */
  readonly path?: string;
  readonly version?: string;
}

const TMP_ROOTS = ["/tmp", "/var/tmp"];

/** Whether `path` is `dir` or lies under it. */
export function within(path: string, dir: string): boolean {
  const d = dir.replace(/\/+$/, "");
  return path === d || path.startsWith(`${d}/`);
}

/** Of `paths`, those a private /tmp (`PrivateTmp=yes`) would hide from the service. */
export function underTmp(paths: readonly string[]): string[] {
  return [...new Set(paths.filter((p) => TMP_ROOTS.some((t) => within(p, t))))];
}

/** Of every path the unit's service uses (node, hal0, the folders), those a private /tmp would hide: the unit then leaves PrivateTmp= off. */
export function hiddenByPrivateTmp(o: UnitOptions): string[] {
  return underTmp([o.node, o.bin, o.state, o.config, ...(o.writable ?? []), ...(o.writableIfPresent ?? [])]);
}

/**
 * A path (or the PATH) of `o` a unit file cannot hold: one with a line break
 * or another control character. Quoting does not help: a line break ends the
 * directive, and the rest of the path would be read as a directive of its
 * own (`ExecStartPre=…`, run as the service's user); `ReadWritePaths=` knows
 * no escapes. Undefined when every one can be written.
 */
export function unwritablePath(o: UnitOptions): string | undefined {
  return [o.node, o.bin, o.config, o.state, ...(o.writable ?? []), ...(o.writableIfPresent ?? []), ...(o.path === undefined ? [] : [o.path])].find((p) => /[\x00-\x1f\x7f]/.test(p));
}

/** The unit's text; it throws for a path it cannot hold (see unwritablePath). */
export function renderUnit(o: UnitOptions): string {
  const bad = unwritablePath(o);
  if (bad !== undefined) throw new Error(`${JSON.stringify(bad)} has a line break or another control character, which a unit file cannot hold`);
  const rw = [...new Set([o.state, o.config, ...(o.writable ?? [])])];
  // A folder inside one already writable needs no line of its own.
  const optional = [...new Set(o.writableIfPresent ?? [])].filter((p) => !rw.some((w) => within(p, w))).map((p) => `-${p}`);
  const hidden = hiddenByPrivateTmp(o);
  const lines = [
    `# Written by 'hal0 service install'${o.version ? ` (hal0 ${o.version})` : ""}; run it again to rewrite this file. 'hal0 doctor' checks it.`,
    "[Unit]",
    "Description=hal0: the local AI box (REST API, MCP endpoints and the reconcile loop)",
    "After=network-online.target docker.service",
    "Wants=network-online.target",
    "",
    "[Service]",
    "Type=simple",
    `ExecStart=${[o.node, "--max-semi-space-size=2", o.bin, "serve", "--config", o.config, "--state", o.state].map((w) => quote(w, true)).join(" ")}`,
    // systemctl reload hal0: SIGHUP reads the config tree again and asks for a sweep.
    "ExecReload=/bin/kill -HUP $MAINPID",
    ...(o.path ? [`Environment=${quote(`PATH=${o.path}`)}`] : []),
    ...(o.user ? [`User=${o.user}`] : []),
    ...(o.user && o.group ? [`Group=${o.group}`] : []),
    "Restart=on-failure",
    "RestartSec=5",
    // The first SIGTERM drains: requests in flight and the sweep finish, then runners get stop_grace_s.
    "TimeoutStopSec=60",
    "UMask=0077",
    "NoNewPrivileges=yes",
    "ProtectSystem=strict",
    `ReadWritePaths=${[...rw, ...optional].map((w) => quote(w)).join(" ")}`,
    "ProtectHome=read-only",
    ...(hidden.length === 0 ? ["PrivateTmp=yes"] : [`# No PrivateTmp=: a private /tmp would hide ${hidden.join(", ")} from the service.`]),
    "ProtectKernelTunables=yes",
    "ProtectKernelModules=yes",
    "ProtectKernelLogs=yes",
    "ProtectControlGroups=yes",
    "ProtectClock=yes",
    "ProtectHostname=yes",
    "RestrictSUIDSGID=yes",
    "RestrictRealtime=yes",
    "RestrictNamespaces=yes",
    "LockPersonality=yes",
    "RestrictAddressFamilies=AF_UNIX AF_INET AF_INET6 AF_NETLINK",
    "",
    "[Install]",
    "WantedBy=multi-user.target",
    "",
  ];
  return lines.join("\n");
}

/**
 * A word of a unit's command line or path list: quoted when it needs it; `%`
 * escaped (a specifier everywhere), `$` only on a command line (`exec`), the
 * one place systemd expands variables: in `Environment=` and
 * `ReadWritePaths=` a `$$` stays two dollars, another path.
 */
function quote(word: string, exec = false): string {
  const escaped = exec ? word.replace(/%/g, "%%").replace(/\$/g, "$$$$") : word.replace(/%/g, "%%");
  return /[\s"'\\;]/.test(escaped) || escaped === "" ? `"${escaped.replace(/\\/g, "\\\\").replace(/"/g, '\\"')}"` : escaped;
}

/** Splits a unit value into words as systemd does (double or single quotes, backslash escapes), specifiers undone, and `$$` too on a command line (`exec`). */
export function unitWords(value: string, exec = false): string[] {
  const words: string[] = [];
  let word: string | undefined;
  let q: string | undefined;
  for (let i = 0; i < value.length; i++) {
    const c = value[i]!;
    if (q) {
      if (c === "\\" && i + 1 < value.length) word = (word ?? "") + value[++i];
      else if (c === q) q = undefined;
      else word = (word ?? "") + c;
    } else if (c === '"' || c === "'") {
      q = c;
      word ??= "";
    } else if (/\s/.test(c)) {
      if (word !== undefined) words.push(word);
      word = undefined;
    } else if (c === "\\" && i + 1 < value.length) word = (word ?? "") + value[++i];
    else word = (word ?? "") + c;
  }
  if (word !== undefined) words.push(word);
  return words.map((w) => (exec ? w.replace(/%%/g, "%").replace(/\$\$/g, "$") : w.replace(/%%/g, "%")));
}

export interface InstalledUnit {
  readonly file: string;
  readonly text: string;
  /** ExecStart's words. */
  readonly exec: readonly string[];
  /** The `--config` and `--state` ExecStart passes to hal0 serve. */
  readonly config?: string;
  readonly state?: string;
  /** `User=` (the last one, as systemd takes it); absent: root. */
  readonly user?: string;
}

/** The unit at `<dir>/hal0.service`, read and its ExecStart taken apart; undefined when there is none. */
export async function readUnit(dir = DEFAULT_UNIT_DIR): Promise<InstalledUnit | undefined> {
  const file = join(dir, UNIT_NAME);
  const text = await readFile(file, "utf8").catch(() => undefined);
  if (text === undefined) return undefined;
  const line = text.split("\n").find((l) => /^\s*ExecStart\s*=/.test(l));
  const exec = line === undefined ? [] : unitWords(line.slice(line.indexOf("=") + 1).trim(), true);
  const after = (flag: string) => {
    const i = exec.indexOf(flag);
    return i === -1 ? undefined : exec[i + 1];
  };
  const user = text.split("\n").filter((l) => /^\s*User\s*=/.test(l)).map((l) => l.slice(l.indexOf("=") + 1).trim()).at(-1);
  return { file, text, exec, config: after("--config"), state: after("--state"), ...(user ? { user } : {}) };
}

/**
 * The `hal0 service install` that writes `unit` again for this box: its
 * folders, its unit folder unless the default, and its `User=` (without
 * `--user` the unit written would run hal0 as root). Each word is quoted for
 * a shell, so the line can be pasted as it is.
 */
export function reinstallCommand(unit: InstalledUnit | undefined, o: { config: string; state: string; unitDir: string }): string {
  const words = ["hal0", "service", "install", "--config", o.config, "--state", o.state];
  if (o.unitDir !== DEFAULT_UNIT_DIR) words.push("--unit-dir", o.unitDir);
  if (unit?.user !== undefined) words.push("--user", unit.user);
  return words.map(shellWord).join(" ");
}

/** What the service at `unit` needs: folders it writes, folders it writes when they are there. */
export interface UnitNeeds {
  readonly writable: readonly string[];
  readonly writableIfPresent: readonly string[];
}

/**
 * What keeps an installed unit's service from doing its work, one sentence
 * each: a folder it writes that `ReadWritePaths=` leaves read-only, or one a
 * `PrivateTmp=yes` hides (a unit written by an older hal0, or edited).
 */
export function unitProblems(unit: InstalledUnit, needs: UnitNeeds, present: (path: string) => boolean = existsSync): string[] {
  const settings = (key: string) => unit.text.split("\n").filter((l) => new RegExp(`^\\s*${key}\\s*=`).test(l)).map((l) => l.slice(l.indexOf("=") + 1).trim());
  // Each line adds to the list; an empty one empties it (systemd's rule for path lists).
  const rw = settings("ReadWritePaths").reduce<string[]>((list, v) => (v === "" ? [] : [...list, ...unitWords(v).map((w) => w.replace(/^[-+]+/, ""))]), []);
  const problems: string[] = [];
  const wanted = [...needs.writable, ...needs.writableIfPresent.filter((p) => present(p))];
  const readOnly = [...new Set(wanted.filter((p) => !rw.some((w) => within(p, w))))];
  if (readOnly.length > 0) problems.push(`its ReadWritePaths= leave ${readOnly.join(", ")} read-only to the service`);
  const privateTmp = settings("PrivateTmp").at(-1);
  if (privateTmp !== undefined && /^(yes|true|on|1|disconnected)$/i.test(privateTmp)) {
    const hidden = underTmp([...unit.exec.filter((w) => w.startsWith("/")), ...wanted]);
    if (hidden.length > 0) problems.push(`its PrivateTmp=${privateTmp} hides ${hidden.join(", ")} from the service`);
  }
  return problems;
}

/** Where systemd-analyze is, if anywhere this process looks. */
export function systemdAnalyze(): string | undefined {
  return ["/usr/bin/systemd-analyze", "/bin/systemd-analyze"].find((p) => existsSync(p));
}

/** `systemd-analyze verify FILE` (offline: it needs no running systemd): its exit code and what it printed; undefined when it is not installed. */
export async function verifyUnit(file: string, timeoutMs = 10_000): Promise<{ code: number | null; output: string } | undefined> {
  const bin = systemdAnalyze();
  if (bin === undefined) return undefined;
  return new Promise((resolve) => {
    const child = spawn(bin, ["verify", file], { stdio: ["ignore", "pipe", "pipe"], timeout: timeoutMs });
    let output = "";
    child.stdout.on("data", (c: Buffer) => void (output += c.toString("utf8")));
    child.stderr.on("data", (c: Buffer) => void (output += c.toString("utf8")));
    child.once("error", (err) => resolve({ code: null, output: err.message }));
    child.once("close", (code) => resolve({ code, output: output.trim() }));
  });
}
