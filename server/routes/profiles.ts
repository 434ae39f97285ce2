import { z } from "zod";
import { appendProfileEdit, compactProfile, deleteProfileEdits, isSeedProfile as isSeed, profileUsage as usedBy, PROFILES_FILE as FILE, updateProfileEdits } from "../../compiler/edits/profiles.js";
import type { Model } from "../../compiler/index.js";
import { BACKENDS, DEVICE_CLASSES, EnvName, Profile, ProfileName, REASONING_EFFORTS, SEED_PROFILES, SPECULATION_MODES } from "../../schema/index.js";
import { treeFileDoc, treeFileText, type BoxService } from "../box.js";
import { openProfileEnvelope, profileEnvelope } from "../envelopes.js";
import { ApiError, refusing } from "../errors.js";
import { restoreMasked } from "../redact.js";
import { defineRoute, type WriteIntent } from "../route.js";
import { generateProfile, GenerateBody } from "./profile-generate.js";

const Name = z.strictObject({ name: ProfileName });
const CreateBody = Profile.extend({ name: ProfileName });
const ImportBody = z.strictObject({ envelope: z.unknown(), name: ProfileName.optional(), dry_run: z.boolean().optional() });

/** A sparse tune edit: a value sets the key, null removes it (reasoning_budget is integer tokens). */
const TuneEdit = z.strictObject({
  ctx_size: z.int().min(128).max(4_194_304).nullable().optional(),
  enable_thinking: z.boolean().nullable().optional(),
  reasoning_effort: z.enum(REASONING_EFFORTS).nullable().optional(),
  reasoning_budget: z.int().min(0).max(1_048_576).nullable().optional(),
  vision: z.boolean().nullable().optional(),
  speculation: z.enum(SPECULATION_MODES).nullable().optional(),
});
/** `PUT /api/profiles/{name}`: each given key replaces the profile's; null removes it; a null `tune` clears the base tune. */
const UpdateBody = z.strictObject({
  image: z.string().min(1).nullable().optional(),
  runner: z.array(z.string().min(1)).min(1).nullable().optional(),
  flags: z.string().nullable().optional(),
  device_class: z.enum(DEVICE_CLASSES).nullable().optional(),
  backend: z.enum(BACKENDS).nullable().optional(),
  intent: z.string().nullable().optional(),
  quant: z.string().nullable().optional(),
  description: z.string().nullable().optional(),
  cloned_from: ProfileName.nullable().optional(),
  env: z.record(EnvName, z.string()).nullable().optional(),
  tune: TuneEdit.nullable().optional(),
});

/**
 * Profiles: the seeds overlaid by profiles.toml (a file profile named like a
 * seed overrides it). New profiles are appended as tables, so the file's
 * other bytes stay; edits are key by key; a seed itself is never deleted.
 */
export const profileRoutes = [
  defineRoute({
    method: "GET", path: "/api/profiles", kind: "read", tools: ["profile_list"], listKey: "profiles",
    summary: "Every profile (seeds and profiles.toml) with its origin and the slots that use it",
    handle: async ({ box }) => {
      const model = await box.model();
      const profiles = Object.values(model.profiles).map((p) => ({
        name: p.name, origin: p.origin, seed: isSeed(p.name), device_class: p.device_class, backend: p.backend ?? null,
        intent: p.intent ?? null, quant: p.quant ?? null, description: p.description ?? null, used_by: usedBy(model, p.name).slots,
      }));
      return { profiles, count: profiles.length };
    },
  }),
  defineRoute({
    method: "GET", path: "/api/profiles/{name}", kind: "read", params: Name, tools: ["profile_status"],
    summary: "One profile: its fields, origin (seed / file) and the slots and stacks that use it",
    handle: async ({ params, box }) => {
      const model = await box.model();
      const p = model.profiles[params.name] ?? notFound(params.name, model);
      const { slots, stacks } = usedBy(model, p.name);
      return { ...p, seed: isSeed(p.name), overrides_seed: p.origin === "file" && isSeed(p.name), used_by: slots, used_by_stacks: stacks };
    },
  }),
  defineRoute({
    method: "POST", path: "/api/profiles", kind: "write", status: 201, body: CreateBody, tools: ["profile_create"],
    summary: "Create a profile in profiles.toml",
    handle: async ({ body, box }) => {
      const { name, ...profile } = body;
      const model = await box.model();
      if (model.profiles[name]) throw exists(name, model);
      return appendIntent(box, name, compactProfile(profile), `create profile ${name}`, false);
    },
  }),
  defineRoute({
    method: "PUT", path: "/api/profiles/{name}", kind: "write", params: Name, body: UpdateBody, tools: ["profile_update"],
    summary: "Update a profile key by key (null removes a key); updating a seed writes an override of it",
    handle: async ({ params, body, box }) => updateIntent(box, params.name, body),
  }),
  defineRoute({
    method: "DELETE", path: "/api/profiles/{name}", kind: "write", params: Name, tools: ["profile_delete"],
    summary: "Delete a profile (an override of a seed reverts to the seed); refused while slots or stacks use it",
    handle: async ({ params, box }) => deleteIntent(box, params.name),
  }),
  defineRoute({
    method: "POST", path: "/api/profiles/{name}/export", kind: "read", params: Name, tools: ["profile_export"],
    summary: "A .hal0profile.json envelope of the profile as written",
    handle: async ({ params, box }) => {
      const model = await box.model();
      const p = model.profiles[params.name] ?? notFound(params.name, model);
      const raw = p.origin === "file" ? (await fileProfiles(box))[p.name] : SEED_PROFILES[p.name];
      return profileEnvelope(p.name, structuredClone((raw ?? {}) as Record<string, unknown>));
    },
  }),
  defineRoute({
    method: "POST", path: "/api/profiles/import", kind: "write", status: 201, body: ImportBody, tools: ["profile_import"],
    summary: "Import a .hal0profile.json envelope into profiles.toml (checksum verified)",
    handle: async ({ body, box }) => {
      const env = openProfileEnvelope(body.envelope);
      const name = body.name ?? env.name;
      if (!name) throw new ApiError("profiles.import_no_name", "the envelope names no profile; pass one as `name`");
      const model = await box.model();
      if (model.profiles[name]) throw exists(name, model);
      return appendIntent(box, name, env.profile, `import profile ${name}`, body.dry_run ?? false);
    },
  }),
  defineRoute({
    method: "POST", path: "/api/profiles/generate", kind: "read", body: GenerateBody, tools: ["profile_generate"],
    summary: "Suggest a profile for a device class / backend / model; nothing is written",
    handle: async ({ body, box }) => generateProfile(await box.model(), body),
  }),
];

async function appendIntent(box: BoxService, name: string, profile: Record<string, unknown>, summary: string, dryRun: boolean): Promise<WriteIntent> {
  const text = treeFileText(await box.snapshot(), FILE) ?? "";
  return {
    changes: { edits: [appendProfileEdit(text, name, profile)], summary },
    dryRun,
    reply: (o) => ({ name, dry_run: dryRun, committed: o.committed, profile, revision: o.revision, plan: o.plan, warnings: o.warnings }),
  };
}

async function updateIntent(box: BoxService, name: string, sent: z.infer<typeof UpdateBody>): Promise<WriteIntent> {
  const model = await box.model();
  const p = model.profiles[name] ?? notFound(name, model);
  // A `[redacted]` sent back (a GET's masked env value) keeps the value it stands for.
  const body = restoreMasked(sent, p);
  const text = treeFileText(await box.snapshot(), FILE) ?? "";
  return {
    changes: updateProfileEdits(model, name, body, text),
    reply: (o) => ({ name, committed: o.committed, revision: o.revision, plan: o.plan, warnings: o.warnings }),
  };
}

async function deleteIntent(box: BoxService, name: string): Promise<WriteIntent> {
  const model = await box.model();
  model.profiles[name] ?? notFound(name, model);
  const { edits, summary, reverts } = refusing(() => deleteProfileEdits(model, name));
  return {
    changes: { edits, summary },
    reply: (o) => ({ name, deleted: o.committed, reverted_to_seed: reverts, revision: o.revision, plan: o.plan }),
  };
}

async function fileProfiles(box: BoxService): Promise<Record<string, unknown>> {
  return (treeFileDoc(await box.snapshot(), FILE)?.profile ?? {}) as Record<string, unknown>;
}

function notFound(name: string, model: Model): never {
  throw new ApiError("profiles.not_found", `no profile ${name}`, { name, known: Object.keys(model.profiles).sort() });
}

function exists(name: string, model: Model): ApiError {
  return new ApiError("profiles.exists", `profile ${name} already exists (${model.profiles[name]?.origin === "seed" ? "a built-in seed; PUT it to override" : FILE})`, { name, origin: model.profiles[name]?.origin });
}
