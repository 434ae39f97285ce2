import { parse as parseYaml } from "yaml";
import { ApiError } from "../../errors.js";

/**
 * The two Hermes file formats the teaching tools write, as Hermes Agent's own
 * tools read and write them (tools/skill_manager_tool.py, tools/memory_tool.py
 * in NousResearch/hermes-agent):
 *
 * - SKILL.md: opens with `---`, a YAML mapping closed by a `---` line, then
 *   the instructions. Hermes requires `name` and `description` (at most 1024
 *   characters) and a non-empty body; we also require `name` to be the skill's
 *   folder name (Hermes finds a skill by its folder, so a different `name`
 *   would show the agent a skill it cannot address).
 * - MEMORY.md / USER.md: entries joined by `\n§\n` (a line holding only the
 *   section sign); entries may span lines; blank ones are ignored. Hermes's
 *   `add` counts the store's size as the entries joined by that separator.
 */

/** Hermes's skill-name rule (`VALID_NAME_RE`, at most 64): also the rule for a category folder. */
export const SKILL_NAME = /^[a-z0-9][a-z0-9._-]{0,63}$/;
/** hal0's bound on one SKILL.md (Hermes's own is 100 000 characters). */
export const MAX_SKILL_BYTES = 64 * 1024;
export const MAX_DESCRIPTION = 1024;
export const ENTRY_DELIMITER = "\n§\n";
/** Hermes's default character limits (config.yaml `memory.memory_char_limit` / `memory.user_char_limit`). */
export const DEFAULT_MEMORY_LIMIT = 2200;
export const DEFAULT_USER_LIMIT = 1375;

export interface SkillHead {
  readonly front: Readonly<Record<string, unknown>>;
  readonly body: string;
}

/** The front matter and body of a SKILL.md, or why Hermes would not load it (as Hermes splits it). */
export function splitSkill(text: string): SkillHead | { problem: string } {
  const content = text.replace(/^\ufeff/, "");
  if (!content.startsWith("---")) return { problem: "SKILL.md must start with a YAML front matter block (`---`)" };
  const end = /\n---\s*\n/.exec(content.slice(3));
  if (!end) return { problem: "the front matter is not closed by a `---` line" };
  let front: unknown;
  try {
    front = parseYaml(content.slice(3, end.index + 3));
  } catch (err) {
    return { problem: `the front matter is not YAML: ${(err as Error).message.split("\n")[0]}` };
  }
  if (typeof front !== "object" || front === null || Array.isArray(front)) return { problem: "the front matter must be a YAML mapping (key: value lines)" };
  return { front: front as Record<string, unknown>, body: content.slice(end.index + end[0].length + 3) };
}

/** Refuses (teach.too_large, teach.bad_skill) a SKILL.md Hermes would not load as skill `name`. */
export function checkSkill(name: string, text: string): SkillHead {
  const bytes = Buffer.byteLength(text, "utf8");
  if (bytes > MAX_SKILL_BYTES) throw new ApiError("teach.too_large", `SKILL.md is ${bytes} bytes; the limit is ${MAX_SKILL_BYTES}`, { bytes, limit: MAX_SKILL_BYTES });
  const head = splitSkill(text);
  if ("problem" in head) throw new ApiError("teach.bad_skill", head.problem, { name });
  const { front, body } = head;
  if (front.name !== name) throw new ApiError("teach.bad_skill", `the front matter's name must be \`${name}\` (the skill's folder), not ${JSON.stringify(front.name ?? null)}`, { name, front_matter_name: front.name ?? null });
  if (typeof front.description !== "string" || front.description.trim() === "") throw new ApiError("teach.bad_skill", "the front matter needs a description (a non-empty string)", { name });
  if (front.description.length > MAX_DESCRIPTION) throw new ApiError("teach.bad_skill", `the description is ${front.description.length} characters; Hermes allows ${MAX_DESCRIPTION}`, { name, limit: MAX_DESCRIPTION });
  if (body.trim() === "") throw new ApiError("teach.bad_skill", "SKILL.md needs instructions after the front matter", { name });
  return head;
}

/** A memory file's entries as Hermes reads them. */
export function memoryEntries(text: string | null): string[] {
  if (text === null || text.trim() === "") return [];
  return text.split(ENTRY_DELIMITER).map((e) => e.trim()).filter((e) => e !== "");
}

/** The store's size as Hermes's limit counts it. */
export function memoryChars(entries: readonly string[]): number {
  return entries.length === 0 ? 0 : entries.join(ENTRY_DELIMITER).length;
}

/**
 * `before` with one entry appended and every byte of `before` kept: the
 * separator reuses a trailing newline the file already ends with, and a file
 * that ended with a newline ends with one again. Checked: a non-empty entry
 * with no `§` line of its own (it would read back as two), within `limit`
 * for itself and for the store after it.
 */
export function appendEntry(before: string | null, entry: string, limit: number): { after: string; entries: number; chars: number } | { duplicate: true } {
  const text = entry.trim();
  if (text === "") throw new ApiError("teach.bad_entry", "the memory entry is empty");
  if (/(^|\n)§(\n|$)/.test(text)) throw new ApiError("teach.bad_entry", "the memory entry holds a line that is only `§`, Hermes's entry separator; it would read back as two entries");
  if (text.length > limit) throw new ApiError("teach.too_large", `the memory entry is ${text.length} characters; the store's limit is ${limit}`, { chars: text.length, limit });
  const entries = memoryEntries(before);
  if (entries.includes(text)) return { duplicate: true };
  const chars = memoryChars([...entries, text]);
  if (chars > limit) throw new ApiError("teach.memory_full", `MEMORY.md would hold ${chars} characters; its limit is ${limit}. Nothing was written.`, { chars, limit, current: memoryChars(entries) });
  const old = before ?? "";
  if (old.trim() === "") return { after: `${old}${text}${old.endsWith("\n") ? "\n" : ""}`, entries: 1, chars };
  const after = old.endsWith("\n") ? `${old}§\n${text}\n` : `${old}${ENTRY_DELIMITER}${text}`;
  return { after, entries: entries.length + 1, chars };
}

/** `memory.memory_char_limit` / `memory.user_char_limit` of a profile's config.yaml, else Hermes's defaults. */
export function memoryLimits(configYaml: string | null): { memory: number; user: number } {
  let memory: Record<string, unknown> = {};
  try {
    const doc = configYaml === null ? undefined : (parseYaml(configYaml) as Record<string, unknown> | null);
    const m = doc && typeof doc === "object" ? doc.memory : undefined;
    if (m && typeof m === "object" && !Array.isArray(m)) memory = m as Record<string, unknown>;
  } catch {
    // an unreadable config.yaml: Hermes falls back to its defaults too
  }
  const num = (v: unknown, d: number) => (typeof v === "number" && Number.isInteger(v) && v > 0 ? v : d);
  return { memory: num(memory.memory_char_limit, DEFAULT_MEMORY_LIMIT), user: num(memory.user_char_limit, DEFAULT_USER_LIMIT) };
}
