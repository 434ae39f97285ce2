import { readFileSync } from "node:fs";
import type { Socket as NetSocket } from "node:net";
import { readFile, readdir, readlink } from "node:fs/promises";
import type { SlotHealth } from "../observed.js";
import { lazyHttp, lazyNet } from "./builtins.js";

/**
 * What the runtimes ask the host: Linux /proc readers, then loopback
 * probes. Every /proc function answers "unknown" (undefined, or an empty list)
 * instead of throwing when a process vanishes or a file can't be read: /proc
 * changes under our feet.
 */

export interface ProcStat {
  /** One letter: R, S, D, Z (zombie), X (dead), T, … */
  readonly state: string;
  /** Field 5: the process group; a runner hal0 starts leads its own group (pgid = pid). */
  readonly pgid: number;
  /** Field 22: clock ticks after boot at which the process started. With the pid it names one process for the boot's lifetime. */
  readonly startTime: number;
}

/**
 * Fields 3, 5 and 22 of /proc/<pid>/stat; undefined when there is no such process.
 * Read synchronously: a /proc read never waits on a disk, and observe reads one
 * per slot, where fs.promises' four thread-pool hops per file cost ~10× more.
 */
export async function procStat(pid: number): Promise<ProcStat | undefined> {
  return procStatNow(pid);
}

/** `procStat` for a caller that cannot wait (a synchronous store): the same read. */
export function procStatNow(pid: number): ProcStat | undefined {
  let text: string;
  try {
    text = readFileSync(`/proc/${pid}/stat`, "utf8");
  } catch {
    return undefined;
  }
  // Field 2 (comm) is parenthesised and may itself hold spaces and parentheses:
  // the fields after it start after the *last* ")".
  const rest = text.slice(text.lastIndexOf(")") + 2).split(" ");
  const state = rest[0];
  const pgid = Number(rest[5 - 3]);
  const startTime = Number(rest[22 - 3]);
  if (state === undefined || !Number.isSafeInteger(pgid) || !Number.isSafeInteger(startTime)) return undefined;
  return { state, pgid, startTime };
}

/** The process exists and has not exited (a zombie has exited; it only waits to be reaped). */
export function isLive(stat: ProcStat | undefined): stat is ProcStat {
  return stat !== undefined && stat.state !== "Z" && stat.state !== "X";
}

/** Sends `signal` to `target` (a pid, or a process group as its negated id); false when there is no such process or group. */
export function killQuietly(target: number, signal: NodeJS.Signals | 0 = "SIGKILL"): boolean {
  try {
    process.kill(target, signal);
    return true;
  } catch {
    return false;
  }
}

let thisBoot: string | null | undefined;

/**
 * This boot's id (`/proc/sys/kernel/random/boot_id`, new at every boot);
 * undefined when it cannot be read. A start time counts clock ticks after
 * boot, so pid + start time name one process for one boot only: a record
 * kept across a restart of the host may name, by chance, a process of the
 * new boot with the same pid and start time.
 */
export function bootId(): string | undefined {
  if (thisBoot === undefined) {
    try {
      thisBoot = readFileSync("/proc/sys/kernel/random/boot_id", "utf8").trim() || null;
    } catch {
      thisBoot = null;
    }
  }
  return thisBoot ?? undefined;
}

/** A record written in boot `recorded` (undefined: by an older hal0, which did not say) may name a process of this boot. */
export function sameBoot(recorded: string | undefined): boolean {
  const now = bootId();
  return recorded === undefined || now === undefined || recorded === now;
}

/** `pid` is alive and is the very process that started at `startTime` (not a later one given a reused pid). */
export async function isOurs(pid: number, startTime: number): Promise<boolean> {
  const stat = await procStat(pid);
  return isLive(stat) && stat.startTime === startTime;
}

/** The command line of `pid`, its words joined with spaces (the kernel name in brackets for a kernel thread). */
export async function commandOf(pid: number): Promise<string | undefined> {
  const raw = await readFile(`/proc/${pid}/cmdline`, "utf8").catch(() => undefined);
  if (raw === undefined) return undefined;
  const words = raw.split("\0").filter((w) => w !== "");
  if (words.length > 0) return words.join(" ");
  const comm = await readFile(`/proc/${pid}/comm`, "utf8").catch(() => undefined);
  return comm === undefined ? undefined : `[${comm.trim()}]`;
}

/** TCP states in /proc/net/tcp*: 0A is LISTEN. */
const TCP_LISTEN = "0A";

/** Socket inodes listening on `port` (any address, IPv4 or IPv6) in this network namespace. */
export async function listeningInodes(port: number): Promise<Set<string>> {
  const inodes = new Set<string>();
  for (const table of ["/proc/net/tcp", "/proc/net/tcp6"]) {
    const text = await readFile(table, "utf8").catch(() => "");
    // Rows after the header: sl local_address rem_address st … uid timeout inode.
    for (const line of text.split("\n").slice(1)) {
      const cols = line.trim().split(/\s+/);
      const local = cols[1];
      if (local === undefined || cols[3] !== TCP_LISTEN) continue;
      const hexPort = local.slice(local.lastIndexOf(":") + 1);
      if (parseInt(hexPort, 16) === port && cols[9] !== undefined && cols[9] !== "0") inodes.add(cols[9]);
    }
  }
  return inodes;
}

/**
 * The lowest pid holding one of `inodes` open (a forked server shares its
 * listening socket; the lowest pid is usually the parent), by scanning
 * /proc/<pid>/fd. Processes we may not inspect are skipped.
 */
export async function socketOwner(inodes: ReadonlySet<string>): Promise<number | undefined> {
  if (inodes.size === 0) return undefined;
  const links = new Set([...inodes].map((inode) => `socket:[${inode}]`));
  const pids = (await readdir("/proc").catch(() => [] as string[]))
    .filter((entry) => /^[0-9]+$/.test(entry))
    .map(Number)
    .sort((a, b) => a - b);
  for (const pid of pids) {
    const fds = await readdir(`/proc/${pid}/fd`).catch(() => [] as string[]);
    const targets = await Promise.all(fds.map((fd) => readlink(`/proc/${pid}/fd/${fd}`).catch(() => "")));
    if (targets.some((target) => links.has(target))) return pid;
  }
  return undefined;
}

/**
 * Who holds `port` on this host when something accepts connections on it:
 * the owner of its listening socket, from /proc; `{}` when that can't be
 * found. A container on the host network is a host process here too.
 */
export async function portHolderOf(port: number, timeoutMs: number): Promise<{ pid?: number; command?: string } | undefined> {
  if (!(await acceptsConnections(port, timeoutMs))) return undefined;
  const pid = await socketOwner(await listeningInodes(port));
  if (pid === undefined) return {};
  const command = await commandOf(pid);
  return command === undefined ? { pid } : { pid, command };
}

/** The `slot.port_in_use` message for `holder`, as both runtimes word it. */
export function portInUseMessage(port: number, holder: { pid?: number; command?: string }): string {
  if (holder.pid === undefined) return `port ${port} is already in use (the program holding it could not be found)`;
  return `port ${port} is already in use by pid ${holder.pid}${holder.command === undefined ? "" : ` (${holder.command})`}`;
}

// ── Loopback probes ─────────────────────────────────────────────────────────
// Both settle within their timeout and never throw, and neither keeps a socket
// open afterwards (no agent, no keep-alive), so a probe never holds a runner
// or the caller's event loop. node:net and node:http load at the first probe
// (builtins.ts): a command that probes nothing does not load them.

const LOOPBACK = "127.0.0.1";

/** Something accepts TCP connections on 127.0.0.1:`port` (or `host`:`port`: a swarm node's address). */
export function acceptsConnections(port: number, timeoutMs: number, host: string = LOOPBACK): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = lazyNet().connect({ host, port });
    const done = (answer: boolean) => {
      socket.destroy();
      resolve(answer);
    };
    socket.setTimeout(timeoutMs, () => done(false));
    socket.once("connect", () => done(!refusedSelf(socket, port)));
    socket.on("error", () => done(false));
  });
}

/**
 * Whether `socket`, connecting to `port` on loopback with nothing listening,
 * was given `port` itself as its own (ephemeral) port and so connected to
 * itself (TCP's simultaneous open): a slot's port in the ephemeral range
 * (32768-60999) is met now and then by a probe before its runner listens.
 * That was read as something listening (slot.port_in_use, "the program
 * holding it could not be found"), and the socket held the port, so the
 * runner's bind failed ("address already in use"), then its closed
 * connection's TIME-WAIT kept the port for a minute. Such a socket is reset
 * (no TIME-WAIT): nothing listens.
 */
function refusedSelf(socket: NetSocket, port: number): boolean {
  if (socket.localPort !== port || socket.remotePort !== port || socket.localAddress !== socket.remoteAddress) return false;
  socket.resetAndDestroy();
  return true;
}

/** The HTTP status of `GET http://127.0.0.1:<port><path>` (or at `at.host`, with `at.headers`); undefined when nothing answers in time. */
export function httpStatus(port: number, path: string, timeoutMs: number, at: { readonly host?: string; readonly headers?: Readonly<Record<string, string>> } = {}): Promise<number | undefined> {
  return new Promise((resolve) => {
    const req = lazyHttp().request({ host: at.host ?? LOOPBACK, port, path, method: "GET", agent: false, headers: { ...at.headers, connection: "close" } }, (res) => {
      clearTimeout(deadline);
      res.on("error", () => {});
      resolve(res.statusCode);
      // Only the status is wanted: the connection ends here, the body not waited for (a runner trickling it would hold the socket open).
      req.destroy();
    });
    // `timeoutMs` for the whole answer up to its status line and headers, not between two bytes of it:
    // a runner that trickles its headers must not hold a sweep for longer.
    const deadline = setTimeout(() => req.destroy(), timeoutMs);
    // Connected to itself (refusedSelf): reset, the request fails as when nothing listens.
    req.on("socket", (socket) => socket.once("connect", () => refusedSelf(socket, port)));
    req.on("error", () => {
      clearTimeout(deadline);
      resolve(undefined); // `on`: a second error after the deadline must not go unhandled
    });
    req.end();
  });
}

/** A slot's health from its `GET /health` status: 200 ok, 503 loading (llama-server while it loads the model), else down. */
export function healthOf(status: number | undefined): SlotHealth {
  if (status === 200) return "ok";
  if (status === 503) return "loading";
  return "down";
}
