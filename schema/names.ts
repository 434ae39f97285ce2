import { z } from "zod";

/**
 * Name grammars of DESIGN.md §7. Every name is plain ASCII, so look-alike
 * letters, zero-width characters and BOMs are refused by the pattern itself.
 */

/** Slot and profile names (a slot's name is its file stem). */
export const SLOT_NAME_PATTERN = /^[a-z0-9][a-z0-9_-]{0,31}$/;
/** Model ids, stack slugs and MCP server ids: dots allowed, never `..`. */
export const RESOURCE_ID_PATTERN = /^(?!.*\.\.)[a-z0-9][a-z0-9._-]{0,63}$/;
/** Caller identities (`X-hal0-Agent`, `[agents.<id>]` in policy.toml). */
export const AGENT_ID_PATTERN = /^[a-zA-Z0-9_-]{1,64}$/;
/** Environment variable names (secrets, auth_value_env). */
export const ENV_NAME_PATTERN = /^[A-Za-z_][A-Za-z0-9_]{0,127}$/;
/** A slot's child capability in capabilities.toml (`[selection.<slot>.<child>]`). */
export const CHILD_NAME_PATTERN = /^[a-z][a-z0-9_-]{0,31}$/;
/** MCP tool names as they appear in policy tables. */
export const TOOL_NAME_PATTERN = /^[a-z][a-z0-9_]{0,63}$/;

const SLOT_NAME = "1–32 characters: lowercase a–z, digits, `_` and `-`, starting with a letter or digit";
const RESOURCE_ID = "1–64 characters: lowercase a–z, digits, `.`, `_` and `-`, starting with a letter or digit, no `..`";
const AGENT_ID = "1–64 characters: ASCII letters, digits, `_` and `-`";
const ENV_NAME = "an environment variable name: ASCII letters, digits and `_`, not starting with a digit";
const CHILD_NAME = "a child name: 1–32 characters, lowercase a–z, digits, `_` and `-`, starting with a letter";
const TOOL_NAME = "a tool name: lowercase a–z, digits and `_`, starting with a letter";

// Each says its grammar when it refuses (a REST path or body field); the compiler explains a refused name itself (compiler/explain.ts).
export const SlotName = z.string().regex(SLOT_NAME_PATTERN, `a name of ${SLOT_NAME}`);
export const ProfileName = z.string().regex(SLOT_NAME_PATTERN, `a name of ${SLOT_NAME}`);
export const ResourceId = z.string().regex(RESOURCE_ID_PATTERN, `an id of ${RESOURCE_ID}`);
export const AgentId = z.string().regex(AGENT_ID_PATTERN, `an agent id of ${AGENT_ID}`);
export const EnvName = z.string().regex(ENV_NAME_PATTERN, ENV_NAME);
export const ChildName = z.string().regex(CHILD_NAME_PATTERN, CHILD_NAME);
export const ToolName = z.string().regex(TOOL_NAME_PATTERN, TOOL_NAME);

/** Which grammar a name pattern is, for messages that explain a refusal. */
export const NAME_GRAMMARS: ReadonlyArray<{ pattern: RegExp; describe: string }> = [
  { pattern: SLOT_NAME_PATTERN, describe: SLOT_NAME },
  { pattern: RESOURCE_ID_PATTERN, describe: RESOURCE_ID },
  { pattern: AGENT_ID_PATTERN, describe: AGENT_ID },
  { pattern: ENV_NAME_PATTERN, describe: ENV_NAME },
  { pattern: TOOL_NAME_PATTERN, describe: TOOL_NAME },
];
