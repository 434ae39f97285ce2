import { z } from "zod";
import { dockerHostProblem } from "./docker-host.js";
import { carriesCredentials } from "./url.js";
import { whenValid } from "./when.js";

/** `hal0.toml`: every section optional, every key defaulted; an empty file is valid. */

export const RUNTIMES = ["process", "docker", "swarm"] as const;
export const DRIFT_POLICIES = ["enforce", "warn"] as const;
export const MEMORY_ENGINES = ["embedded", "hindsight"] as const;

const Port = z.int().min(1).max(65535);

const Meta = z.strictObject({
  schema_version: z.literal(1).default(1),
});

export const AUTH_MODES = ["token", "off"] as const;

/** `[server] max_body_kb`: its default and bounds (below 64 KiB ordinary writes, a TOML file or a memory text sent whole, would not fit; above 64 MiB it bounds nothing useful). */
export const MAX_BODY_KB_MIN = 64;
export const MAX_BODY_KB_MAX = 65_536;
export const MAX_BODY_KB_DEFAULT = 1024;

/** `[slots] parallel`'s default: slots an apply launches or stops at once, per machine. */
export const PARALLEL_DEFAULT = 4;

/** Loopback names and addresses: where `[server] auth = "off"` may listen. */
export function isLoopbackHost(host: string): boolean {
  const h = host.replace(/^\[|\]$/g, "").toLowerCase();
  return h === "localhost" || h === "::1" || /^127(\.\d{1,3}){3}$/.test(h);
}

/**
 * An origin as a browser sends it in `Origin`: `http://` or `https://`, a
 * host and a port only when it is not the scheme's default, lower case, no
 * path (not even `/`); `undefined` when `value` is no http(s) URL at all.
 */
function originForm(value: string): string | undefined {
  try {
    const url = new URL(value);
    return url.protocol === "http:" || url.protocol === "https:" ? url.origin : undefined;
  } catch {
    return undefined;
  }
}

/** `[server] public_origins`: each entry exactly an origin a browser sends (else it would never match, and every page post would be refused). */
const PublicOrigin = z.string().min(1).superRefine((value, ctx) => {
  const form = originForm(value);
  if (form === value.toLowerCase()) return;
  ctx.addIssue({
    code: "custom",
    message: `${JSON.stringify(value)} is not an origin`,
    params: {
      code: "server.public_origin_invalid", target: "value",
      detail: form === undefined
        ? "A public origin is http:// or https://, a host name and a port when it is not the scheme's default: https://hal0.example.com, the address the browser shows."
        : `A browser sends this origin as ${JSON.stringify(form)} (no path or trailing slash, no user, no default port); write that.`,
    },
  });
});

const Server = z
  .strictObject({
    host: z.string().min(1).default("127.0.0.1"),
    port: Port.default(8080),
    allowed_hosts: z.array(z.string().min(1)).default([]),
    allowed_origins: z.array(z.string().min(1)).default([]),
    /** Where browsers reach the pages besides `http://<Host>` (an HTTPS reverse proxy's origin): a session's posts from these are its own page's. */
    public_origins: z.array(PublicOrigin).default([]),
    /** `token`: every request is identified by a bearer token or the web page's session; `off`: every loopback caller is an operator. */
    auth: z.enum(AUTH_MODES).default("token"),
    /** The largest request body the server reads, in KiB (REST and the MCP endpoints); a larger one is 413 `request.too_large`. */
    max_body_kb: z.int().min(MAX_BODY_KB_MIN).max(MAX_BODY_KB_MAX).default(MAX_BODY_KB_DEFAULT),
  })
  .superRefine((s, ctx) => {
    if (s.auth === "off" && !isLoopbackHost(s.host)) {
      ctx.addIssue({
        code: "custom",
        path: ["auth"],
        message: `auth = "off" needs a loopback host, not ${JSON.stringify(s.host)}`,
        params: { code: "server.auth_off_exposed", target: "value", detail: "With auth off every caller is trusted as an operator; that is only safe when [server] host is loopback (127.0.0.1, ::1, localhost). Use auth = \"token\" on any other address." },
      });
    }
  }, { when: whenValid("auth", "host") });

const Slots = z
  .strictObject({
    runtime: z.enum(RUNTIMES).default("process"),
    port_range_start: Port.default(8081),
    port_range_end: Port.default(8200),
    max_slots: z.int().min(0).max(1000).default(0),
    health_timeout_s: z.int().min(1).max(3600).default(180),
    stop_grace_s: z.int().min(0).max(600).default(20),
    /**
     * How many slots an apply launches or stops at once, per machine: the engine's (or the OS's)
     * share of each step; waiting for a runner's /health holds no place (docs/benchmark.md).
     */
    parallel: z.int().min(1).max(64).default(PARALLEL_DEFAULT),
    docker_host: z.string().default(""),
    pull: z.boolean().default(false),
    /**
     * How large a runner's log grows (MiB) before it moves aside: the process runtime's
     * runner.log to runner.log.1; a docker container's json-file / local log (max-size, two
     * files). 0: hal0 leaves the logs alone (the engine's own settings rule).
     */
    log_max_mb: z.int().min(0).max(4096).default(16),
  })
  .superRefine((s, ctx) => {
    if (s.port_range_end < s.port_range_start) {
      ctx.addIssue({
        code: "custom",
        path: ["port_range_end"],
        message: `port_range_end (${s.port_range_end}) is below port_range_start (${s.port_range_start})`,
        params: { code: "config.invalid_value", target: "value", detail: "The slot port range must not be empty: port_range_end must be at least port_range_start." },
      });
    }
  }, { when: whenValid("port_range_start", "port_range_end") })
  .superRefine((s, ctx) => {
    // Refused here, at its line, not only when the engine is first reached (an apply, a pull, the doctor).
    const problem = s.docker_host === "" ? undefined : dockerHostProblem(s.docker_host);
    if (problem !== undefined) {
      ctx.addIssue({
        code: "custom",
        path: ["docker_host"],
        message: problem,
        params: { code: "config.invalid_value", target: "value", detail: "[slots] docker_host is the local engine's socket (\"unix:///run/docker.sock\", or its path) or a loopback TCP address (\"tcp://127.0.0.1:2375\"); empty: $DOCKER_HOST, else the default socket." },
      });
    }
  }, { when: whenValid("docker_host") });

const Reconcile = z.strictObject({
  interval_s: z.int().min(1).max(86_400).default(120),
  drift: z.enum(DRIFT_POLICIES).default("enforce"),
});

const Hermes = z.strictObject({
  home: z.string().min(1).default("/var/lib/hal0/.hermes"),
  /** The `hermes` executable the agent bridge runs (a name on PATH or a path). */
  command: z.string().min(1).default("hermes"),
  /** A bridge run still going after this many seconds is stopped (failed, timed_out); agent_run_start's timeout_s overrides it. */
  run_timeout_s: z.int().min(1).max(604_800).default(1800),
});

const Memory = z
  .strictObject({
    enabled: z.boolean().default(true),
    engine: z.enum(MEMORY_ENGINES).default("embedded"),
    /** The Hindsight server's base URL (engine = "hindsight"). */
    url: z.string().default(""),
  })
  .superRefine((m, ctx) => {
    const bad = m.url !== "" && !/^https?:\/\/[^\s/]+/.test(m.url);
    if (!bad && m.url !== "" && carriesCredentials(m.url)) {
      // Not echoed: the message reaches whoever reads the diagnostics.
      ctx.addIssue({
        code: "custom",
        path: ["url"],
        message: "url carries a user name or password (user:password@host): hal0 cannot send them to Hindsight, and memory errors that name the engine's URL are read by every caller",
        params: { code: "config.invalid_value", target: "value", detail: "[memory] url is the Hindsight server's base URL without credentials, e.g. \"http://127.0.0.1:8888\"." },
      });
      return;
    }
    if (bad || (m.enabled && m.engine === "hindsight" && m.url === "")) {
      ctx.addIssue({
        code: "custom",
        path: ["url"],
        message: bad ? `url ${JSON.stringify(m.url)} is not an http(s) URL` : `engine = "hindsight" needs url`,
        params: { code: "config.invalid_value", target: "value", detail: "[memory] url is the Hindsight server's base URL, e.g. \"http://127.0.0.1:8888\"." },
      });
    }
  }, { when: whenValid("enabled", "engine", "url") });

const Bridge = z.strictObject({
  /** `/mcp/agents` (hal0-agents) is mounted; off, it answers 404 and its open sessions are closed. */
  enabled: z.boolean().default(true),
  /** At most this many Hermes runs at once; the rest wait, queued. */
  max_runs: z.int().min(1).max(16).default(2),
});

const Approvals = z.strictObject({
  ttl_s: z.int().min(1).max(31_536_000).default(86_400),
});

const Models = z.strictObject({
  roots: z.array(z.string().min(1)).default(["/var/lib/hal0/models"]),
  /** Where pulled models land; empty: the first of `roots`. */
  store: z.string().default(""),
  /** At most this many pulls download at once; the rest wait, queued. */
  pull_parallel: z.int().min(1).max(8).default(2),
  /** `hal0 apply` pulls a model that has hf_repo and no local file (the plan says so). */
  pull_on_apply: z.boolean().default(false),
});

export const Settings = z.strictObject({
  meta: Meta.prefault({}),
  server: Server.prefault({}),
  slots: Slots.prefault({}),
  reconcile: Reconcile.prefault({}),
  hermes: Hermes.prefault({}),
  memory: Memory.prefault({}),
  bridge: Bridge.prefault({}),
  approvals: Approvals.prefault({}),
  models: Models.prefault({}),
});
export type Settings = z.infer<typeof Settings>;
