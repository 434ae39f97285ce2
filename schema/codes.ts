import { API_CODES } from "./codes-api.js";

/**
 * The closed registry of every code hal0 emits: compiler diagnostics now,
 * REST and MCP errors as those layers land. A code never disappears silently:
 * `test/schema/codes.test.ts` snapshots the keys. `http` is the status a REST
 * reply carries when the code reaches the HTTP edge; `severity` is the
 * compiler's default for it.
 */
export interface CodeInfo {
  readonly severity: "error" | "warning";
  /** Who emits it: the compiler (a diagnostic of the tree), the argv check (the compiler, given a runner's facts: compiler/runner-check.ts), the runtime (plan and apply), the CLI, or the server (REST and MCP replies). */
  readonly stage: "compile" | "runner" | "runtime" | "cli" | "server";
  readonly http: number;
  /** One line, for the README and `hal0 validate --explain`. */
  readonly meaning: string;
}

export const CODES = {
  // ── the tree as a whole ──────────────────────────────────────────────
  "config.not_found": { severity: "error", stage: "cli", http: 404, meaning: "The config folder does not exist or is not a folder." },
  "config.empty": { severity: "error", stage: "runtime", http: 409, meaning: "The sweep (hal0 serve, hal0 reconcile) found a config folder that holds no .toml file while slots hal0 started still run, as a volume unmounted under it leaves its empty mount point: it stops nothing and changes nothing until the files are back; hal0 serve's reads answer from the last tree that compiled and its writes are refused. To stop every slot, run hal0 down (or hal0 apply, which shows the plan first)." },
  "init.not_empty": { severity: "error", stage: "cli", http: 409, meaning: "hal0 init DIR: DIR is a file or a folder that is not empty (dot entries such as .git do not count); init writes the example box only into a new or empty folder, and writes nothing here." },
  // ── the command line ─────────────────────────────────────────────────
  "cli.usage": { severity: "error", stage: "cli", http: 400, meaning: "A command line hal0 cannot read: an unknown command or option (the message names the closest known one), a missing or extra argument; exit 64." },
  "cli.not_a_folder": { severity: "error", stage: "cli", http: 400, meaning: "A folder the command line names (the state folder: --state, $HAL0_STATE or $HAL0_HOME; schema --out; init DIR) is a file, lies below one, or is (or lies below) a symbolic link to nothing; the command reads and writes nothing there." },
  "cli.not_a_file": { severity: "error", stage: "cli", http: 400, meaning: "A file the command line names to write (plan --out) is a folder or no regular file (a device such as /dev/stdout, a pipe), or the folder it goes in does not exist or is a file; the command refuses before it observes anything, and writes nothing." },
  "state.foreign": { severity: "error", stage: "cli", http: 400, meaning: "The state folder (--state, $HAL0_STATE, $HAL0_HOME) already holds other files and none of hal0's (/, a home folder, a project's folder): hal0 closes its state folder to 0700 and writes its tokens and records there, so it refuses this one and leaves it as it is (nothing written, its mode unchanged). Name a folder of its own; hal0 makes it." },
  "state.shared": { severity: "error", stage: "cli", http: 400, meaning: "The state folder (--state, $HAL0_STATE, $HAL0_HOME) is one anybody may write (world-writable, such as /tmp): hal0 keeps its state folder 0700 for the tokens and the runners' env in it, and closing a shared folder would break it for everyone else, so the command refuses and writes nothing. Name a folder of its own (a new one inside it is fine)." },
  "state.not_found": { severity: "error", stage: "cli", http: 404, meaning: "The state folder has no database (hal0.db): no hal0 serve has run there. hal0 bridge reads and writes the serve's tokens, and hal0 web mints a login code there, so they refuse rather than make a database no server reads; name the serve's state folder (--state, $HAL0_STATE)." },
  "system.io": { severity: "error", stage: "cli", http: 500, meaning: "A file or folder a command needed could not be read, written or made; the message names the path and the system's reason (permission denied, no space left, a read-only file system)." },
  "config.read_error": { severity: "error", stage: "compile", http: 500, meaning: "A file of the tree could not be read, is not UTF-8 text, or is larger than 1 MiB (hal0 reads none of it)." },
  "config.parse_error": { severity: "error", stage: "compile", http: 400, meaning: "A file is not valid TOML, or nests keys more than 64 tables and arrays deep; the position is where the parser stopped (the key too deep)." },
  "config.unknown_file": { severity: "warning", stage: "compile", http: 400, meaning: "A .toml file that hal0 does not read; it is ignored." },
  "config.invalid_name": { severity: "error", stage: "compile", http: 400, meaning: "A file name or table key breaks its name grammar (DESIGN.md §7)." },
  "config.too_many_diagnostics": { severity: "warning", stage: "compile", http: 400, meaning: "The tree has more diagnostics than the 200 hal0 lists at once: this last one counts the rest (an error when any of them is one). Fix those listed and check again." },
  "config.unknown_key": { severity: "error", stage: "compile", http: 400, meaning: "A key the file kind does not have; the detail names the closest known key." },
  "config.missing_key": { severity: "error", stage: "compile", http: 400, meaning: "A required key is absent." },
  "config.invalid_type": { severity: "error", stage: "compile", http: 400, meaning: "A value has the wrong TOML type (a string where an integer belongs, …)." },
  "server.auth_off_exposed": { severity: "error", stage: "compile", http: 400, meaning: "[server] auth = \"off\" with a [server] host that is not loopback: every caller would be trusted as an operator." },
  "server.public_origin_invalid": { severity: "error", stage: "compile", http: 400, meaning: "A [server] public_origins entry is not an origin as a browser sends it (http:// or https://, a host, a port only when not the default, no path)." },
  "config.invalid_value": { severity: "error", stage: "compile", http: 400, meaning: "A value is not one of the allowed ones, or does not match its format." },
  "config.out_of_range": { severity: "error", stage: "compile", http: 400, meaning: "A number, string or list is below or above its allowed range." },
  // ── slots ────────────────────────────────────────────────────────────
  "slot.tuning_key_denied": { severity: "error", stage: "compile", http: 400, meaning: "A tuning key at a slot's root; tuning lives in the slot's [tune] table." },
  "slot.legacy_shape": { severity: "error", stage: "compile", http: 400, meaning: "A slot written in an old shape ([model] or [slot] table); the hint shows the current one." },
  "slot.unknown_profile": { severity: "error", stage: "compile", http: 400, meaning: "A slot names a profile that is neither in profiles.toml nor a seed." },
  "slot.unknown_model": { severity: "error", stage: "compile", http: 400, meaning: "A slot names a model that models.toml does not define." },
  "slot.model_required": { severity: "error", stage: "compile", http: 400, meaning: "An enabled llm, embedding or reranking slot names no model." },
  "slot.model_type_mismatch": { severity: "error", stage: "compile", http: 400, meaning: "A slot serves a model of another type (an llm model in an embedding slot, …)." },
  "slot.device_unsupported": { severity: "warning", stage: "compile", http: 400, meaning: "A slot's device is not among the devices its model lists." },
  "slot.port_conflict": { severity: "error", stage: "compile", http: 409, meaning: "Two enabled slots, or a slot and the hal0 server, use the same port." },
  "slot.port_out_of_range": { severity: "error", stage: "compile", http: 400, meaning: "A slot's port is outside [slots] port_range_start..port_range_end." },
  "slot.max_slots_exceeded": { severity: "error", stage: "compile", http: 409, meaning: "More enabled slots than [slots] max_slots allows." },
  "slot.npu_exclusivity_violation": { severity: "error", stage: "compile", http: 409, meaning: "More than one enabled llm slot placed on the NPU." },
  "slot.tune_unavailable": { severity: "warning", stage: "compile", http: 400, meaning: "A tune value the slot's model cannot honour; the effective value is shown instead." },
  // ── profiles ─────────────────────────────────────────────────────────
  "profile.api_key_repeated": { severity: "warning", stage: "compile", http: 400, meaning: "Profile flags or slot extra_args give `--api-key` more than once: a flag given twice keeps its last value, so the runner gets the last key alone and a client with another answers 401; give several keys as one comma-separated value (`--api-key k1,k2`) or in a key file (`--api-key-file`, which repeats)." },
  "profile.device_class_mismatch": { severity: "error", stage: "compile", http: 400, meaning: "A slot's device does not fit its profile's device_class or backend." },
  "profile.flag_reserved": { severity: "error", stage: "compile", http: 400, meaning: "Profile flags or slot extra_args set a flag hal0 owns (model, host, port, context, type, reasoning, or one with which llama-server picks or downloads a model file itself: --model-url, --docker-repo, --hf-repo, a model preset, …), under any of its spellings, or an env sets the LLAMA_ARG_* variable llama-server reads for one." },
  "profile.image_required": { severity: "error", stage: "compile", http: 400, meaning: "The docker runtime needs an image on every profile an enabled slot uses." },
  // ── models ───────────────────────────────────────────────────────────
  "model.defaults_removed": { severity: "error", stage: "compile", http: 422, meaning: "A model carries a defaults table; tuning moved to profiles and slots." },
  "model.tune_key_removed": { severity: "error", stage: "compile", http: 422, meaning: "A model carries a tuning key; tuning moved to profiles and slots." },
  "model.source_required": { severity: "error", stage: "compile", http: 400, meaning: "A model has neither a path nor hf_repo and hf_filename." },
  // ── stacks ───────────────────────────────────────────────────────────
  "stack.unknown_slot": { severity: "error", stage: "compile", http: 400, meaning: "A stack entry names a slot that has no slots/<name>.toml." },
  "stack.unknown_model": { severity: "error", stage: "compile", http: 400, meaning: "A stack entry names a model that models.toml does not define." },
  "stack.unknown_profile": { severity: "error", stage: "compile", http: 400, meaning: "A stack entry names an unknown profile." },
  "stack.duplicate_slot": { severity: "error", stage: "compile", http: 400, meaning: "A stack names the same slot twice." },
  // ── upstreams ────────────────────────────────────────────────────────
  "upstream.duplicate_name": { severity: "error", stage: "compile", http: 409, meaning: "Two upstreams share a name." },
  "upstream.name_reserved": { severity: "error", stage: "compile", http: 400, meaning: "The upstream name `hal0` is reserved for the box's own composite upstream." },
  "upstream.unknown_slot": { severity: "error", stage: "compile", http: 400, meaning: "An upstream of kind slot names a slot that does not exist." },
  "upstream.slot_name_required": { severity: "error", stage: "compile", http: 400, meaning: "An upstream of kind slot has no slot_name." },
  "upstream.url_required": { severity: "error", stage: "compile", http: 400, meaning: "A remote upstream has no url." },
  "upstream.auth_env_required": { severity: "error", stage: "compile", http: 400, meaning: "An upstream with bearer or header auth names neither auth_credential nor auth_value_env." },
  "upstream.auth_source_conflict": { severity: "error", stage: "compile", http: 400, meaning: "An upstream names both auth_credential and auth_value_env; its credential comes from one of them." },
  // ── installed MCP servers ────────────────────────────────────────────
  "mcp.id_reserved": { severity: "error", stage: "compile", http: 409, meaning: "An installed MCP server takes a bundled id (hal0-admin, hal0-memory, hal0-agents)." },
  "mcp.tools_invalid": { severity: "error", stage: "compile", http: 400, meaning: "A tool appears in more than one of [tools] allow / gated / blocked." },
  "mcp.url_required": { severity: "error", stage: "compile", http: 400, meaning: "A streamable-http or sse MCP server has no url." },
  "mcp.command_required": { severity: "error", stage: "compile", http: 400, meaning: "A stdio MCP server has no command." },
  // ── bundled agents ───────────────────────────────────────────────────
  "agent.name_mismatch": { severity: "error", stage: "compile", http: 400, meaning: "An agent file's [agent] name differs from its file name (agents/<name>.toml)." },
  "agent.url_required": { severity: "error", stage: "compile", http: 400, meaning: "An agent's [mcp.servers.<id>] has no url and is not builtin." },
  "agent.builtin_unknown": { severity: "error", stage: "compile", http: 400, meaning: "An agent marks a server builtin that hal0 does not serve (builtin ids: hal0-admin, hal0-memory, hal0-agents)." },
  "agent.auth_env_required": { severity: "error", stage: "compile", http: 400, meaning: "An agent server's auth kind \"bearer-from-env\" names no env variable." },
  "agent.tools_overlap": { severity: "error", stage: "compile", http: 400, meaning: "An agent file puts a tool on more than one of [tools] allow / gated / blocked." },
  // ── policy ───────────────────────────────────────────────────────────
  "policy.unknown_tool": { severity: "error", stage: "compile", http: 400, meaning: "policy.toml names a tool hal0 does not have; the detail names the closest one." },
  "policy.tool_in_two_tiers": { severity: "error", stage: "compile", http: 400, meaning: "policy.toml puts one tool in two tiers of the same table." },
  "policy.loosen_denied": { severity: "error", stage: "compile", http: 400, meaning: "policy.toml moves a never-loosen tool (a delete, config_write, …) to a looser tier." },
  "policy.agent_file_refuses": { severity: "warning", stage: "compile", http: 400, meaning: "policy.toml's [agents.hermes__<P>] puts a tool in a tier that agents/<P>.toml refuses (blocked, on no list, or of a server it does not list); the file wins and the tool stays refused for that identity." },
  // ── capabilities ─────────────────────────────────────────────────────
  "capability.unknown_slot": { severity: "error", stage: "compile", http: 400, meaning: "A [selection.<slot>] of capabilities.toml names a slot that has no slots/<name>.toml." },
  "capability.unknown_child": { severity: "error", stage: "compile", http: 400, meaning: "A selection names a child capability the slot's type does not have (an image slot has upscaler, refiner, vae, controlnet, lora; …)." },
  "capability.unknown_model": { severity: "error", stage: "compile", http: 400, meaning: "A selection names a model that models.toml does not define." },
  "capability.invalid_selection": { severity: "error", stage: "compile", http: 400, meaning: "A selection's model is of another type than its child needs (an llm model as an image upscaler, …)." },
  "capability.unknown_backend": { severity: "error", stage: "compile", http: 400, meaning: "A selection names a backend that no [[backend]] of capabilities.toml declares." },
  "capability.illegal_backend_model_pair": { severity: "error", stage: "compile", http: 400, meaning: "A selection's backend cannot run its model: the backend's kind does not serve the model's type, or no device suits both." },
  "capability.device_unsupported": { severity: "error", stage: "compile", http: 400, meaning: "A selection without a backend names a device its model does not list in models.toml (a selection with a backend: capability.illegal_backend_model_pair)." },
  "capability.backend_disabled": { severity: "warning", stage: "compile", http: 400, meaning: "An enabled selection names a [[backend]] that has enabled = false: the selection has no runtime until the backend is enabled or the selection is turned off." },
  "capability.duplicate_id": { severity: "error", stage: "compile", http: 409, meaning: "Two [[backend]] or two [[catalog]] rows of capabilities.toml share an id." },
  // ── runtime, plans and apply ─────────────────────────────────────────
  "slot.port_in_use": { severity: "error", stage: "runtime", http: 409, meaning: "A slot's port is held by a process hal0 did not start, by a container hal0 started as a slot and someone renamed by hand, by a runner hal0 started for a slot that no record names, or by another hal0 box's runner or container on this host; the message names the holder (and that box)." },
  "slot.spawn_failed": { severity: "error", stage: "runtime", http: 500, meaning: "A slot's runner could not be started or exited before it was healthy." },
  "slot.image_missing": { severity: "error", stage: "runtime", http: 409, meaning: "A slot's docker image is not on the engine ([slots] pull is false, or the pull failed), or, under the swarm runtime, not on the node Swarm gave its task (hal0 never pulls for Swarm); the message names it." },
  "slot.health_failed": { severity: "error", stage: "runtime", http: 503, meaning: "A slot's runner did not answer GET /health with 200 within [slots] health_timeout_s." },
  "slot.log_unreadable": { severity: "error", stage: "runtime", http: 409, meaning: "slot_logs (or logs_tail ?slot=) of a docker slot whose container logs to a driver the engine cannot read back (log-driver none, or one with its local cache turned off; the message quotes the engine), of a swarm slot whose log the manager cannot gather (its task's node is down: the message quotes the manager), or of a process slot whose runner.log is not a regular file (a symbolic link, a folder, a pipe)." },
  "slot.apply_failed": { severity: "error", stage: "runtime", http: 500, meaning: "An apply step failed for another reason; the message says which." },
  "slot.crash_loop": { severity: "warning", stage: "runtime", http: 503, meaning: "A slot died within 10 min of becoming ready and was started again, more than once in a row: each further restart waits longer (10 s, 20 s, 40 s … up to 5 min; the slot is Degraded, CrashLoop) until it runs 10 min; a new spec or a reload restarts it at once." },
  "slot.not_running": { severity: "warning", stage: "runtime", http: 409, meaning: "A slot hal0 started is no longer running (it died, or its pid now belongs to another program); apply starts it again." },
  "slot.placement_ignored": { severity: "warning", stage: "compile", http: 400, meaning: "A slot sets `[placement] node` or `labels`, which only the swarm runtime reads; on one box they are ignored." },
  "slot.unplaced": { severity: "warning", stage: "runtime", http: 503, meaning: "Swarm holds a slot's task: its node is down, or no node matches its placement (a label no node carries, a node without room). hal0 reports it (the slot is Degraded) instead of re-creating it; apply of such a slot fails with this code." },
  "slot.rescheduled": { severity: "warning", stage: "runtime", http: 409, meaning: "Swarm moved a slot placed by labels to another node (its node went down or was drained); the plan names both nodes." },
  "slot.changed_by_hand": { severity: "warning", stage: "runtime", http: 409, meaning: "A running slot's container or service is not what hal0 created: its env, command, image, restart policy, network, published ports, mounts or devices were changed by hand (or, on Swarm, its task runs on a node its placement no longer allows); the message names what, and the plan replaces it (or only reports it under drift = \"warn\")." },
  "slot.drifted": { severity: "warning", stage: "runtime", http: 409, meaning: "A slot hal0 started stopped or was changed behind its back, and its drift policy is \"warn\": reported, not fixed." },
  "slot.runner_missing": { severity: "warning", stage: "runtime", http: 404, meaning: "An enabled slot's runner cannot be run: not on PATH nor in hal0's bin/, a path that does not exist (the message lists what was searched), or a file without execute permission; apply would fail to start it (validate warns, --strict errors; Stalled RunnerNotFound / RunnerNotExecutable)." },
  "slot.runner_flag_unknown": { severity: "error", stage: "runner", http: 400, meaning: "A flag (or LLAMA_ARG_* variable in env) the slot's runner does not know, by its own --help, or a --flag=value word (llama-server has no such form): it would exit 1 at start; the detail names the closest flag it knows, or the flag and value as two words. Located at the profile flags, extra_args or env key that wrote it." },
  "slot.runner_flag_removed": { severity: "error", stage: "runner", http: 400, meaning: "A flag the slot's runner has removed: it would exit 1 at start; the detail quotes the runner's own replacement hint." },
  "slot.runner_flag_value": { severity: "error", stage: "runner", http: 400, meaning: "A flag's value is outside the set the runner lists (`--spec-type mtp`, `-fa maybe`), is not a number its help allows for a numeric flag (`--parallel abc`, `--threads 1.5`, `--ctx-size -5`, `--poll 200`), is missing, or is given to a flag that takes none in this runner (`-fa on` on an older build)." },
  "slot.runner_flag_deprecated": { severity: "warning", stage: "runner", http: 400, meaning: "A flag the slot's runner deprecates: it still runs, with a warning; the detail names the replacement (`--no-mmap` → `--load-mode none`). hal0 never rewrites flags or extra_args." },
  "slot.runner_unchecked": { severity: "warning", stage: "runtime", http: 409, meaning: "A plan note: a slot's runner was not probed (not installed yet, or not runnable), so its argv is written in the newest known llama-server dialect and not checked; or the runner is not llama-server (TTS, FLM, ComfyUI, whisper), whose flags hal0 does not check." },
  "model.not_installed": { severity: "warning", stage: "runtime", http: 409, meaning: "A plan note: a model an enabled slot uses names hf_repo and hf_filename but its file is not on this host; hal0 apply pulls it first when [models] pull_on_apply = true, else hal0 model pull fetches it." },
  "slot.ctx_exceeds_training": { severity: "warning", stage: "runtime", http: 400, meaning: "A slot's ctx_size is above the context its GGUF says the model was trained for (<arch>.context_length): the runner warns of a possible training context overflow." },
  "slot.model_fact_mismatch": { severity: "warning", stage: "runtime", http: 400, meaning: "A models.toml fact (architecture, context_length) that the model file's GGUF header contradicts; the message names both values." },
  "slot.model_missing": { severity: "warning", stage: "runtime", http: 404, meaning: "An enabled slot's model file (or its draft, mmproj or chat template file, when the argv uses them) does not exist: the runner would exit at load (Stalled ModelMissing)." },
  "slot.model_unreadable": { severity: "warning", stage: "runtime", http: 409, meaning: "An enabled slot's model file (or draft, mmproj, chat template file) exists but is not a readable regular file (Stalled ModelUnreadable)." },
  "slot.unmanaged": { severity: "warning", stage: "runtime", http: 409, meaning: "A running slot has a runtime record but is neither in the inventory nor desired: hal0 leaves it alone." },
  "plan.invalid": { severity: "error", stage: "runtime", http: 400, meaning: "A saved plan file is not a hal0 plan (or of another format_version)." },
  "plan.stale": { severity: "error", stage: "runtime", http: 409, meaning: "A saved plan no longer matches the config or the observed box; the message names each resource that moved." },
  "runtime.unavailable": { severity: "error", stage: "runtime", http: 503, meaning: "[slots] runtime = \"docker\" and no Docker engine answers at [slots] docker_host, else $DOCKER_HOST, else the default socket; the message names the address." },
  "state.corrupt": { severity: "error", stage: "runtime", http: 500, meaning: "inventory.json, hal0's record of what it started, or hermes-managed.json, its record of what it wrote into each Hermes profile, does not parse (or holds an entry that is no record, a slot of inventory.json with no known runtime): hal0 stops rather than forget what it owns (hal0 down still stops the box over a damaged hermes-managed.json). The message names the file; restore it, or move it away to start over (the runners then show as unmanaged; in each Hermes profile, hal0 takes as its own only the entries it finds exactly as it would write them)." },
  "state.db_replaced": { severity: "error", stage: "server", http: 503, meaning: "hal0.db was removed, or another file moved over it, while hal0 serve runs: every call is refused (nothing read or written, not lost to a file no path names nor mixed into the new one) until hal0 serve restarts and opens the file now there. docs/operations.md says how to restore a backup." },
  "state.folder_gone": { severity: "error", stage: "runtime", http: 500, meaning: "The state folder of a running hal0 serve (or hal0 reconcile loop) was removed (or moved away): its database, tokens and locks went with it. hal0 serve logs this once, puts back in a new folder the records of the runners it started (inventory.json, each slot's runtime.json) so hal0 status and hal0 down still find them, and exits 1, leaving the runners running; start it again to go on with a new database and operator token. hal0 reconcile does the same (one line on stderr, the records put back, exit 1)." },
  "state.database_gone": { severity: "error", stage: "runtime", http: 500, meaning: "hal0.db was removed or replaced (a file moved over it, a backup restored by a rename) while hal0 serve ran: the server's open database is no longer that file, so what it records would be lost or go to the wrong file. hal0 serve logs this once and exits 1, leaving its runners running; started again, it opens the file now there (a new one when it was removed)." },
  "state.db_busy": { severity: "error", stage: "server", http: 503, meaning: "hal0.db is held by another process's write past SQLite's 5 s wait (a sqlite3 shell or a database browser left inside a transaction), so hal0 could not write to it. End that transaction or close that program, then retry; details.retry_after_s says when." },
  "state.newer_schema": { severity: "error", stage: "runtime", http: 500, meaning: "A database of the state folder (hal0.db, memory.db) was brought up to a newer schema by a newer hal0 than this one, or inventory.json was written in a newer format (after an upgrade was rolled back): this hal0 would read and write tables or records it does not know, so it refuses to open it and changes nothing. The message names the file and both schema versions; run the newer hal0 again, or restore a backup taken before the upgrade." },
  "apply.locked": { severity: "error", stage: "runtime", http: 409, meaning: "Another apply holds the state folder's lock; the message names its holder." },
  "apply.interrupted": { severity: "error", stage: "runtime", http: 409, meaning: "hal0 apply, down or reconcile --once got SIGINT or SIGTERM (or hal0 serve began to stop, for its sweep or a slot restart in flight): a step it had not started yet (\"not started\"), or a start whose wait for /health it ended, its runner left running for the next apply or sweep to check, or a docker start whose image pull it stopped, nothing created. No outcome is recorded for either." },
  "hermes.invalid_yaml": { severity: "warning", stage: "runtime", http: 422, meaning: "A Hermes profile's config.yaml is not YAML hal0 can edit (it cannot be read: a folder, a pipe, a loop of links, permission denied, not UTF-8 text, reached through a symbolic link whose owner is not root, hal0's user or the file's owner; a parse error; or a root or mcp_servers that is not a block mapping); hal0 leaves it alone, and the rest of the box converges." },
  "hermes.home_unobservable": { severity: "warning", stage: "runtime", http: 409, meaning: "[hermes] home is missing, empty or cannot be read (an unmounted disk, a folder briefly gone): hal0 cannot tell whether a profile it wired was removed, so no profile's token is revoked until the home can be read again." },
  "hermes.drifted": { severity: "warning", stage: "runtime", http: 409, meaning: "hal0's keys in a Hermes profile's config.yaml were edited by hand and [reconcile] drift = \"warn\": reported, not undone; hal0's own later changes still reach the keys nobody edited (a three-way merge with what it last wrote)." },
  "hermes.drift_conflict": { severity: "warning", stage: "runtime", http: 409, meaning: "Under [reconcile] drift = \"warn\", hal0 wants to change a key of a Hermes profile's config.yaml that was also edited by hand: the hand edit is kept and that change of hal0's is not made; the message names the keys." },
  "hermes.entry_taken": { severity: "warning", stage: "runtime", http: 409, meaning: "A Hermes profile's config.yaml has an mcp_servers entry hal0 did not write under the id of an installed MCP server exposed to it (the person's own server of that name): hal0 leaves the entry as it is and does not wire that server into the profile." },
  "hermes.not_found": { severity: "error", stage: "runtime", http: 404, meaning: "No Hermes home at [hermes] home, or no default profile (<home>/config.yaml) in it: hal0 agent reprovision hermes reports it as a warning, --repair refuses (hal0 does not create Hermes' files)." },
  "hermes.write_failed": { severity: "error", stage: "runtime", http: 500, meaning: "A Hermes profile's config.yaml could not be read, edited or written; the message says why." },
  // ── bundled agents' tool calls ───────────────────────────────────────
  "agent.unknown_server": { severity: "error", stage: "server", http: 403, meaning: "The agent's file has no enabled [mcp.servers.<id>] for the server of this tool call; it is refused." },
  "agent.tool_blocked": { severity: "error", stage: "server", http: 403, meaning: "The agent's [tools] blocked lists this tool; it is refused." },
  "agent.unknown_tool": { severity: "error", stage: "server", http: 403, meaning: "The tool is on none of the agent's [tools] allow / gated / blocked lists; unknown tools are refused." },
  "agent.workspace_escape": { severity: "error", stage: "server", http: 403, meaning: "A filesystem-style argument (path, paths, file, dir, cwd, source, target, …) leads outside the agent's workspace: `..`, an absolute path, `~`, or a symlink out; details.arg names it." },
  ...API_CODES,
} as const satisfies Record<string, CodeInfo>;

export type Code = keyof typeof CODES;

export function isCode(value: string): value is Code {
  return Object.hasOwn(CODES, value);
}
