import type { CodeInfo } from "./codes.js";

/**
 * The codes of the HTTP edge (REST now, MCP next): what a non-2xx reply's
 * error envelope carries. Part of the one closed registry (`CODES` spreads
 * this); `http` is the reply's status.
 */
export const API_CODES = {
  // ── requests ─────────────────────────────────────────────────────────
  "request.invalid_json": { severity: "error", stage: "server", http: 400, meaning: "The request body is not valid JSON." },
  "request.not_an_object": { severity: "error", stage: "server", http: 400, meaning: "The request body is JSON but not an object." },
  "request.too_large": { severity: "error", stage: "server", http: 413, meaning: "The request body is larger than [server] max_body_kb (default 1024 KiB); the server stopped reading at the limit and nothing was written." },
  "request.too_deep": { severity: "error", stage: "server", http: 400, meaning: "The JSON body (or an MCP tool call's arguments) nests objects and arrays more than 64 levels deep; refused before anything reads it further." },
  "request.unsupported_media_type": { severity: "error", stage: "server", http: 415, meaning: "The request has a body whose Content-Type is not application/json (or a +json type); the API reads JSON bodies only." },
  "request.host_denied": { severity: "error", stage: "server", http: 421, meaning: "The Host header is not loopback nor in [server] allowed_hosts / HAL0_MCP_ALLOWED_HOSTS (DNS-rebinding guard)." },
  "request.origin_denied": { severity: "error", stage: "server", http: 421, meaning: "The Origin header is not loopback nor in [server] allowed_origins / HAL0_MCP_ALLOWED_ORIGINS." },
  // ── identity ─────────────────────────────────────────────────────────
  "auth.required": { severity: "error", stage: "server", http: 401, meaning: "This route or tool needs a credential (Authorization: Bearer hal0_…, or the web page's session); anonymous callers may only read what an autonomous-read tool reaches." },
  "auth.invalid_token": { severity: "error", stage: "server", http: 401, meaning: "The bearer token is not one hal0 minted, or it was revoked or rotated." },
  "auth.identity_mismatch": { severity: "error", stage: "server", http: 403, meaning: "X-hal0-Agent names another identity than the token's, or a request on an MCP session carries another token (or none) than the one that opened it." },
  "auth.operator_required": { severity: "error", stage: "server", http: 403, meaning: "Only an operator (a person's token or web session) may do this: approve, deny, manage tokens, routes no tool maps to, changing [server] auth." },
  "auth.scope_denied": { severity: "error", stage: "server", http: 403, meaning: "The token's scopes do not include this surface (mcp:admin, mcp:memory, rest); details.needed names the scope." },
  "auth.csrf": { severity: "error", stage: "server", http: 403, meaning: "A request authenticated by the web page's session cookie lacks the session's CSRF token, or comes from another origin." },
  "auth.login_invalid": { severity: "error", stage: "server", http: 401, meaning: "The login code or pasted token is unknown, used, expired, or not an operator's." },
  "auth.token_not_found": { severity: "error", stage: "server", http: 404, meaning: "No token has this id or name." },
  "auth.name_invalid": { severity: "error", stage: "server", http: 400, meaning: "A token's name is empty, longer than 64, or not letters, digits, - and _; or a scope is not mcp:admin, mcp:memory or rest." },
  "validation.invalid": { severity: "error", stage: "server", http: 422, meaning: "A path, query or body field is missing or has the wrong shape; details.fields lists each one." },
  "route.not_found": { severity: "error", stage: "server", http: 404, meaning: "No route has this path." },
  "route.method_not_allowed": { severity: "error", stage: "server", http: 405, meaning: "The path exists but not with this method; details.allowed lists the methods." },
  "server.port_in_use": { severity: "error", stage: "cli", http: 409, meaning: "hal0 serve cannot bind [server] host:port: another program holds it." },
  "server.listen_failed": { severity: "error", stage: "cli", http: 500, meaning: "hal0 serve cannot bind [server] host:port for another reason than a holder: a port below 1024 without the privilege, a host that is not an address of this machine or does not resolve." },
  "server.shutting_down": { severity: "error", stage: "server", http: 503, meaning: "hal0 serve is stopping: a request that arrived after SIGTERM/SIGINT is refused (Retry-After), while those in flight finish." },
  "system.internal": { severity: "error", stage: "server", http: 500, meaning: "An unexpected error; the server log has the request id." },
  // ── the tree and its writes ──────────────────────────────────────────
  "config.invalid": { severity: "error", stage: "server", http: 422, meaning: "The write would make the tree invalid; details.diagnostics lists each error and nothing was written." },
  "config.stale": { severity: "error", stage: "server", http: 409, meaning: "The write names a base revision, and files it edits moved since; details.files names them." },
  "config.write_failed": { severity: "error", stage: "server", http: 500, meaning: "Committing a change set failed; every file it touched was rolled back." },
  "config.unknown_revision": { severity: "error", stage: "server", http: 409, meaning: "The If-Match or base revision is not one this server handed out; re-read and retry." },
  // ── slots ────────────────────────────────────────────────────────────
  "slot.not_found": { severity: "error", stage: "server", http: 404, meaning: "No slots/<name>.toml (or stable id) names this slot; details.known lists the slots." },
  "slot.exists": { severity: "error", stage: "server", http: 409, meaning: "A slot with this name already exists (create, rename)." },
  "slot.pinned": { severity: "error", stage: "server", http: 409, meaning: "The slot is pinned: unloading or deleting it needs ?force=true." },
  "slot.illegal_transition": { severity: "error", stage: "server", http: 409, meaning: "The slot cannot do this in its current state (restart of a disabled slot)." },
  // ── models ───────────────────────────────────────────────────────────
  "model.not_found": { severity: "error", stage: "server", http: 404, meaning: "No [model.<id>] in models.toml has this id." },
  "model.already_exists": { severity: "error", stage: "server", http: 409, meaning: "A register names a model id models.toml already has; edit it instead." },
  "model.in_use": { severity: "error", stage: "server", http: 409, meaning: "The model is named by slots, stacks or capability selections (details.slots, details.stacks, details.selections); it cannot be removed." },
  "model.path_missing": { severity: "error", stage: "server", http: 404, meaning: "No file exists at the given model path." },
  "model.unsupported_format": { severity: "error", stage: "server", http: 422, meaning: "The file is not a readable GGUF v2/v3 file; details.reason says why (not_gguf, unsupported_version, truncated, too_large, malformed)." },
  // ── upstreams and capabilities ───────────────────────────────────────
  "upstream.not_found": { severity: "error", stage: "server", http: 404, meaning: "No [[upstream]] of upstreams.toml has this name; details.known lists them." },
  "upstream.exists": { severity: "error", stage: "server", http: 409, meaning: "An upstream with this name already exists (create, rename)." },
  "capability.unknown_section": { severity: "error", stage: "server", http: 400, meaning: "GET /api/capabilities?section= names no section; details.known lists backends, catalogs, selections." },
  // ── MCP tools ────────────────────────────────────────────────────────
  "mcp.invalid_arg": { severity: "error", stage: "server", http: 400, meaning: "A tool's path argument is not a string or an integer below 2^53, or is empty, `.`, `..`, holds `/`, a control or an invisible formatting character." },
  "mcp.missing_arg": { severity: "error", stage: "server", http: 400, meaning: "A tool call lacks a path argument its route needs." },
  "mcp.unknown_tool": { severity: "error", stage: "server", http: 404, meaning: "No hal0-admin tool has this name." },
  "mcp.tool_not_allowed": { severity: "error", stage: "server", http: 403, meaning: "Policy blocks this tool for this caller (policy.toml [tiers] or [agents.<id>])." },
  "mcp.memory_unconfigured": { severity: "error", stage: "server", http: 503, meaning: "A memory tool was called but hal0-memory is not available in this build or is disabled." },
  "mcp.rest_error": { severity: "error", stage: "server", http: 502, meaning: "A tool's route answered with something that is not hal0's error envelope." },
  "mcp.memory_schema": { severity: "error", stage: "server", http: 400, meaning: "A hal0-memory tool's arguments do not match its schema (a missing or mistyped field, an unknown one, `source`, `id` alone on memory_curate); error.detail lists each problem." },
  // ── installed MCP servers (/api/mcp) ─────────────────────────────────
  "mcp.not_found": { severity: "error", stage: "server", http: 404, meaning: "No installed MCP server (mcp-servers/<id>.toml) and no bundled one has this id." },
  "mcp.bundled": { severity: "error", stage: "server", http: 409, meaning: "The id is a server hal0 itself serves (hal0-admin, hal0-memory, hal0-agents): it cannot be installed over, changed or uninstalled." },
  "mcp.already_installed": { severity: "error", stage: "server", http: 409, meaning: "An MCP server with this id is already installed; uninstall it first or change it with PATCH." },
  "mcp.id_invalid": { severity: "error", stage: "server", http: 400, meaning: "A manifest's id is empty, longer than 64, or not lowercase letters, digits, - and _." },
  "mcp.url_invalid": { severity: "error", stage: "server", http: 400, meaning: "The url to fetch is empty, longer than 2048 characters, not a URL, carries credentials, is not https (plain http needs HAL0_MCP_FETCH_INSECURE_HTTP=1), or an HAL0_MCP_FETCH_ALLOW entry is not host:port." },
  "mcp.spec_unsupported": { severity: "error", stage: "server", http: 400, meaning: "The spec is none of oci://, npm:/npx:, uvx:/uv:, git+https:// or an https://…/manifest.json URL." },
  "mcp.ssrf_blocked": { severity: "error", stage: "server", http: 403, meaning: "The URL (or a redirect, or what its name resolves to) points at a loopback, private, link-local, CGNAT or otherwise internal address; hal0 does not fetch it." },
  "mcp.manifest_fetch_failed": { severity: "error", stage: "server", http: 502, meaning: "The manifest could not be fetched (connection failed, non-2xx reply, too many redirects, larger than 1 MiB)." },
  "mcp.manifest_invalid": { severity: "error", stage: "server", http: 422, meaning: "The manifest is not JSON or does not match the manifest schema; details.fields lists each problem." },
  "mcp.supervisor_unavailable": { severity: "error", stage: "server", http: 501, meaning: "Starting, stopping or probing a server needs a process supervisor hal0 does not have yet (start/stop/restart, a stdio server's test)." },
  "mcp.exposure_invalid": { severity: "error", stage: "server", http: 400, meaning: "The exposure body is empty or names a key other than hermes, brain, openwebui, opencode, or a value that is not a boolean." },
  "mcp.exposure_unsupported": { severity: "error", stage: "server", http: 501, meaning: "Exposing a server to openwebui or opencode is not supported yet." },
  "mcp.exposure_needs_supervisor": { severity: "error", stage: "server", http: 409, meaning: "A stdio server cannot be exposed to hermes or brain: nothing runs it to give it a url." },
  "mcp.exposure_policy_unenforced": { severity: "error", stage: "server", http: 409, meaning: "The server's [tools] policy has gated tools, which Hermes cannot hold for approval; exposing it to hermes or brain would bypass them." },
  // ── memory ───────────────────────────────────────────────────────────
  "memory.engine_unavailable": { severity: "error", stage: "server", http: 503, meaning: "hal0 cannot connect to the memory engine ([memory] url refused or timed out); retry after details.retry_after_s (5) seconds." },
  "memory.engine_error": { severity: "error", stage: "server", http: 502, meaning: "The memory engine answered with an error; details.status and details.body carry its reply (never reclassified as unavailable)." },
  "memory.not_found": { severity: "error", stage: "server", http: 404, meaning: "No memory unit, document, mental model, directive or operation with this id is visible to the caller." },
  "memory.operation_state": { severity: "error", stage: "server", http: 409, meaning: "The operation cannot do this in its state (cancel a finished one, retry one that did not fail); details.status is its state." },
  "memory.identity_required": { severity: "error", stage: "server", http: 403, meaning: "A private:<id> namespace needs an authenticated agent (an agent token); anonymous callers and operators have none." },
  "memory.dataset_forbidden": { severity: "error", stage: "server", http: 403, meaning: "The dataset is another caller's private:<id> namespace; only that caller (or an approved request) may use it." },
  "mcp.catalog_invalid": { severity: "error", stage: "server", http: 500, meaning: "The tool catalog does not match the route table and the tiers (a tool without a tier or in two, an alias of no route, a tier naming no tool); the server refuses to start." },
  // ── plans and approvals ──────────────────────────────────────────────
  "plan.not_found": { severity: "error", stage: "server", http: 404, meaning: "No plan has this id." },
  "approvals.not_found": { severity: "error", stage: "server", http: 404, meaning: "No approval request has this id." },
  "approvals.self_approval": { severity: "error", stage: "server", http: 403, meaning: "The operator deciding is the one who made the request; another operator must decide it." },
  "approvals.already_resolved": { severity: "error", stage: "server", http: 409, meaning: "The approval request was already approved, denied, expired or found stale." },
  "approvals.unavailable": { severity: "error", stage: "server", http: 503, meaning: "The approvals database cannot be opened." },
  // ── profiles and stacks ──────────────────────────────────────────────
  "profiles.not_found": { severity: "error", stage: "server", http: 404, meaning: "No profile (in profiles.toml or the seeds) has this name." },
  "profiles.exists": { severity: "error", stage: "server", http: 409, meaning: "A profile of this name already exists (a seed or profiles.toml); update it instead." },
  "profiles.in_use": { severity: "error", stage: "server", http: 409, meaning: "Slots or stacks still name this profile; details.slots and details.stacks list them." },
  "profiles.seed_immutable": { severity: "error", stage: "server", http: 409, meaning: "A built-in seed profile cannot be deleted; only an override of it in profiles.toml can." },
  "profiles.bad_envelope": { severity: "error", stage: "server", http: 400, meaning: "The .hal0profile.json envelope has the wrong kind, a checksum that does not match, or a profile that does not validate." },
  "profiles.envelope_too_new": { severity: "error", stage: "server", http: 400, meaning: "The profile envelope's version is newer than this hal0 reads." },
  "profiles.import_no_name": { severity: "error", stage: "server", http: 400, meaning: "Neither the envelope nor the request names the profile to import." },
  "stacks.not_found": { severity: "error", stage: "server", http: 404, meaning: "No stacks/<slug>.toml has this slug." },
  "stacks.exists": { severity: "error", stage: "server", http: 409, meaning: "A stack with this slug already exists." },
  "stacks.bad_envelope": { severity: "error", stage: "server", http: 400, meaning: "The .hal0stack.json envelope has the wrong kind, a checksum that does not match, or a stack that does not validate." },
  "stacks.envelope_too_new": { severity: "error", stage: "server", http: 400, meaning: "The stack envelope's version is newer than this hal0 reads." },
  "stacks.import_no_slug": { severity: "error", stage: "server", http: 400, meaning: "Neither the envelope nor the request names the slug to import the stack as." },
} as const satisfies Record<string, CodeInfo>;
