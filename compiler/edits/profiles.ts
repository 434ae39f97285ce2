import { SEED_PROFILES } from "../../schema/index.js";
import type { FileEdit } from "../changeset.js";
import type { Model } from "../model.js";
import { EditRefusal } from "./refusal.js";
import { appendTables } from "./toml.js";

/**
 * Profile changes as edits of profiles.toml: new profiles appended as tables
 * (the file's other bytes stay), edits key by key, a seed overridden by a
 * table of its own name and never deleted. Pure.
 */

export const PROFILES_FILE = "profiles.toml";

export const isSeedProfile = (name: string): boolean => Object.hasOwn(SEED_PROFILES, name);

/** The slots and stacks that name profile `name`. */
export function profileUsage(model: Model, name: string): { slots: string[]; stacks: string[] } {
  return {
    slots: Object.values(model.slots).filter((s) => s.profile === name).map((s) => s.name),
    stacks: Object.values(model.stacks).filter((s) => s.slot.some((e) => e.profile === name)).map((s) => s.slug),
  };
}

/** A new `[profile.<name>]` table after the file's text (`text`: profiles.toml now, "" when absent). */
export function appendProfileEdit(text: string, name: string, profile: Record<string, unknown>): FileEdit {
  return { file: PROFILES_FILE, op: "text", text: appendTables(text, { profile: { [name]: profile } }) };
}

/** A profile update: each given key replaces the profile's, null removes it; a null `tune` clears the base tune. */
export type ProfileUpdate = Readonly<Record<string, unknown>> & { readonly tune?: Readonly<Record<string, unknown>> | null };

/**
 * An update of profile `name` (which the tree has): a seed gets an override
 * appended (the seed's input shape with the update laid over it); a file
 * profile is edited key by key, a tune key by tune key.
 */
export function updateProfileEdits(model: Model, name: string, update: ProfileUpdate, text: string): { edits: FileEdit[]; summary: string } {
  const p = model.profiles[name]!;
  if (p.origin === "seed") {
    const merged = mergeProfile(structuredClone(SEED_PROFILES[name] as Record<string, unknown>), update);
    return { edits: [appendProfileEdit(text, name, merged)], summary: `override seed profile ${name}` };
  }
  const edits: FileEdit[] = [];
  for (const [key, value] of Object.entries(update)) {
    if (value === undefined) continue;
    if (key === "tune" && value !== null) {
      for (const [k, v] of Object.entries(value as Record<string, unknown>)) if (v !== undefined) edits.push({ file: PROFILES_FILE, op: "set", path: ["profile", name, "tune", k], value: v });
    } else {
      edits.push({ file: PROFILES_FILE, op: "set", path: ["profile", name, key], value });
    }
  }
  return { edits, summary: `update profile ${name}` };
}

/**
 * Deleting profile `name` (which the tree has): an override of a seed reverts
 * to the seed; a seed itself is `profiles.seed_immutable`; a profile slots or
 * stacks use is `profiles.in_use`.
 */
export function deleteProfileEdits(model: Model, name: string): { edits: FileEdit[]; summary: string; reverts: boolean } {
  const p = model.profiles[name]!;
  if (p.origin === "seed") throw new EditRefusal("profiles.seed_immutable", `${name} is a built-in seed profile; it cannot be deleted (override it in profiles.toml instead)`, { name });
  const reverts = isSeedProfile(name);
  const { slots, stacks } = profileUsage(model, name);
  if (!reverts && slots.length + stacks.length > 0) {
    const who = [...slots.map((s) => `slot ${s}`), ...stacks.map((s) => `stack ${s}`)].join(", ");
    throw new EditRefusal("profiles.in_use", `profile ${name} is in use by ${who}`, { name, slots, stacks });
  }
  return {
    edits: [{ file: PROFILES_FILE, op: "set", path: ["profile", name], value: null }],
    summary: reverts ? `remove the override of seed profile ${name}` : `delete profile ${name}`,
    reverts,
  };
}

/** A seed's input shape with an update laid over it (null removes a key; a null tune clears it). */
function mergeProfile(base: Record<string, unknown>, update: ProfileUpdate): Record<string, unknown> {
  for (const [key, value] of Object.entries(update)) {
    if (value === undefined) continue;
    if (value === null) delete base[key];
    else if (key === "tune") {
      const tune = { ...((base.tune ?? {}) as Record<string, unknown>) };
      for (const [k, v] of Object.entries(value as Record<string, unknown>)) if (v === null) delete tune[k]; else if (v !== undefined) tune[k] = v;
      base.tune = tune;
    } else base[key] = value;
  }
  return base;
}

/** Drops what the schema defaulted to nothing (empty env, empty tune) and undefined members. */
export function compactProfile(profile: Record<string, unknown>): Record<string, unknown> {
  const out = JSON.parse(JSON.stringify(profile)) as Record<string, unknown>;
  for (const key of ["env", "tune"]) if (out[key] && Object.keys(out[key] as object).length === 0) delete out[key];
  return out;
}
