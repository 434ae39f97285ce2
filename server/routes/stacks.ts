import { z } from "zod";
import { applyStackChanges, deleteStackEdit, importStackEdits, newStackEdit, projectStack, snapshotStack, stackFile as fileOf, updateStackEdit } from "../../compiler/edits/stack.js";
import type { Model } from "../../compiler/index.js";
import { ResourceId, Stack, STACK_MODES, StackSlot } from "../../schema/index.js";
import { treeFileDoc, treeFileText, type BoxService } from "../box.js";
import { openStackEnvelope, stackEnvelope } from "../envelopes.js";
import { ApiError } from "../errors.js";
import { defineRoute, type WriteIntent } from "../route.js";
import { currentDrift } from "../../reconciler/stack-drift.js";

const Slug = z.strictObject({ slug: ResourceId });
const DryRunQuery = z.strictObject({ dry_run: z.enum(["true", "false", "1", "0"]).optional() });
const StackBody = Stack.extend({ slug: ResourceId });
/** Every field optional and undefaulted: only the given ones replace the file's. */
const StackPatch = z.strictObject({
  name: z.string().min(1).max(128).optional(),
  description: z.string().optional(),
  author: z.string().optional(),
  icon: z.string().optional(),
  tags: z.array(z.string()).optional(),
  mode: z.enum(STACK_MODES).optional(),
  slot: z.array(StackSlot).optional(),
});
const ImportBody = z.strictObject({ envelope: z.unknown(), slug: ResourceId.optional(), dry_run: z.boolean().optional() });
const SnapshotBody = z.strictObject({ slug: ResourceId, name: z.string().min(1).max(128).optional(), description: z.string().optional(), mode: z.enum(["replace", "merge"]).default("replace") });

/**
 * Stacks (`stacks/<slug>.toml`): CRUD, apply (one change set projecting each
 * entry onto its slot file; `replace` disables every other unpinned slot and
 * lists each with its reason), export/import envelopes, snapshot of the live
 * slots, and drift against the last applied stack (reconciler/stack-drift.ts).
 */
export const stackRoutes = [
  defineRoute({
    method: "GET", path: "/api/stacks", kind: "read", tools: ["stack_list"], listKey: "stacks",
    summary: "Stacks with the active one and its drift (none / clean / modified)",
    handle: async ({ box }) => {
      const model = await box.model();
      const d = await currentDrift(box.options.stateDir, model);
      const stacks = Object.values(model.stacks).map((s) => ({
        slug: s.slug, name: s.name, description: s.description, mode: s.mode, tags: s.tags, slots: s.slot.map((e) => e.slot),
        active: s.slug === d.active, drift: s.slug === d.active ? d.drift : "none",
      }));
      return { stacks, count: stacks.length, active: d.active, drift: d.drift, ...(d.reason ? { drift_reason: d.reason } : {}) };
    },
  }),
  defineRoute({
    method: "GET", path: "/api/stacks/{slug}", kind: "read", params: Slug, tools: ["stack_status"],
    summary: "One stack: its entries against the live slots, whether it is active, its drift",
    handle: async ({ params, box }) => {
      const model = await box.model();
      const stack = model.stacks[params.slug] ?? notFound(params.slug, model);
      const d = await currentDrift(box.options.stateDir, model);
      const entries = stack.slot.map((e) => {
        const live = model.slots[e.slot];
        return { ...e, exists: live !== undefined, live: live ? { model: live.model ?? null, profile: live.profile, enabled: live.enabled, pinned: live.pinned } : null };
      });
      const preview = projectStack(stack.slug, stack, model);
      return { ...stack, slot: entries, active: d.active === stack.slug, drift: d.active === stack.slug ? d.drift : "none", would_change: preview.summary, disables: preview.disables, kept: preview.kept };
    },
  }),
  defineRoute({
    method: "POST", path: "/api/stacks", kind: "write", status: 201, body: StackBody, tools: ["stack_create"],
    summary: "Create stacks/<slug>.toml",
    handle: async ({ body, box }) => {
      const { slug, ...stack } = body;
      await mustNotExist(box, slug);
      return newFileIntent(slug, stack, `create stack ${slug}`, (o) => ({ slug, file: fileOf(slug), revision: o.revision, plan: o.plan, warnings: o.warnings }));
    },
  }),
  defineRoute({
    method: "PUT", path: "/api/stacks/{slug}", kind: "write", params: Slug, body: StackPatch, tools: ["stack_update"],
    summary: "Update a stack: the given fields replace the file's (slot replaces the whole list); comments of kept keys survive",
    handle: async ({ params, body, box }) => {
      const { raw, text } = await rawStack(box, params.slug);
      return { changes: { edits: [updateStackEdit(params.slug, text, raw, body)], summary: `update stack ${params.slug}` }, reply: (o) => ({ slug: params.slug, revision: o.revision, committed: o.committed, plan: o.plan }) };
    },
  }),
  defineRoute({
    method: "DELETE", path: "/api/stacks/{slug}", kind: "write", params: Slug, tools: ["stack_delete"],
    summary: "Delete stacks/<slug>.toml (slots keep their files; an active stack's drift becomes modified)",
    handle: async ({ params, box }) => {
      await rawStack(box, params.slug);
      return { changes: { edits: [deleteStackEdit(params.slug)], summary: `delete stack ${params.slug}` }, reply: (o) => ({ slug: params.slug, deleted: o.committed, revision: o.revision }) };
    },
  }),
  defineRoute({
    method: "POST", path: "/api/stacks/{slug}/apply", kind: "write", params: Slug, query: DryRunQuery, body: z.strictObject({ dry_run: z.boolean().optional() }), tools: ["stack_apply"],
    summary: "Apply a stack as one change set (?dry_run=true: the plan and every slot it would change, create or disable; nothing written)",
    // A dry run when either place says so: `?dry_run=true` beside a body's `dry_run: false` (a form's default) must not commit.
    handle: async ({ params, query, body, box }) => applyIntent(box, params.slug, body.dry_run === true || query.dry_run === "true" || query.dry_run === "1"),
  }),
  defineRoute({
    method: "POST", path: "/api/stacks/{slug}/export", kind: "read", params: Slug, tools: ["stack_export"],
    summary: "A .hal0stack.json envelope (sha256 checksum over its canonical JSON) with the box's own profiles it names",
    handle: async ({ params, box }) => {
      const { raw } = await rawStack(box, params.slug);
      const model = await box.model();
      const profiles = ownProfiles(box, model, (model.stacks[params.slug]?.slot ?? []).map((e) => e.profile));
      return stackEnvelope(params.slug, raw, await profiles, new Date(box.now()).toISOString());
    },
  }),
  defineRoute({
    method: "POST", path: "/api/stacks/import", kind: "write", status: 201, body: ImportBody, tools: ["stack_import"],
    summary: "Import a .hal0stack.json envelope as stacks/<slug>.toml (checksum verified; profiles it carries are added when their name is free)",
    handle: async ({ body, box }) => importIntent(box, body),
  }),
  defineRoute({
    method: "POST", path: "/api/stacks/snapshot", kind: "write", status: 201, body: SnapshotBody, tools: ["stack_snapshot"],
    summary: "A new stack from the live slots: every enabled slot with its model, profile and tune",
    handle: async ({ body, box }) => {
      await mustNotExist(box, body.slug);
      const stack = snapshotStack(await box.model(), body, new Date(box.now()).toISOString());
      return newFileIntent(body.slug, stack, `snapshot the live slots as stack ${body.slug}`, (o) => ({ slug: body.slug, file: fileOf(body.slug), stack, revision: o.revision, plan: o.plan }));
    },
  }),
];

async function applyIntent(box: BoxService, slug: string, dryRun: boolean): Promise<WriteIntent> {
  const model = await box.model();
  const stack = model.stacks[slug] ?? notFound(slug, model);
  const p = projectStack(slug, stack, model);
  return {
    // The pointer is a commit observer's (server/stack-pointer.ts), keyed on the change set's `stack` mark: a plan of it applied by id sets it too.
    changes: applyStackChanges(slug, p),
    dryRun,
    reply: (o) => ({
      stack: slug, dry_run: dryRun, committed: o.committed, revision: o.revision,
      summary: p.summary, changes: p.changes, creates: p.creates, disables: p.disables, kept: p.kept,
      files: o.files, plan: o.plan, warnings: o.warnings, ...(o.observed.stack_pointer ? { pointer: o.observed.stack_pointer } : {}),
    }),
  };
}

async function importIntent(box: BoxService, body: z.infer<typeof ImportBody>): Promise<WriteIntent> {
  const env = openStackEnvelope(body.envelope);
  const slug = body.slug ?? env.slug;
  if (!slug) throw new ApiError("stacks.import_no_slug", "the envelope names no slug; pass one as `slug`");
  await mustNotExist(box, slug);
  const model = await box.model();
  const snap = await box.snapshot();
  const { edits, added, skipped, creates } = importStackEdits(slug, env, model, snap.tree.files.get("profiles.toml") ?? "");
  return {
    changes: { edits, summary: `import stack ${slug}` },
    dryRun: body.dry_run ?? false,
    reply: (o) => ({ slug, file: fileOf(slug), dry_run: body.dry_run ?? false, committed: o.committed, profiles_added: added, profiles_skipped: skipped, creates, revision: o.revision, plan: o.plan, warnings: o.warnings }),
  };
}

/** The box's own (profiles.toml) profiles among `names`, as written. */
async function ownProfiles(box: BoxService, model: Model, names: ReadonlyArray<string | undefined>): Promise<Record<string, Record<string, unknown>>> {
  const file = (treeFileDoc(await box.snapshot(), "profiles.toml")?.profile ?? {}) as Record<string, Record<string, unknown>>;
  const out: Record<string, Record<string, unknown>> = {};
  for (const n of [...new Set(names)].filter((x): x is string => x !== undefined).sort()) if (model.profiles[n]?.origin === "file" && file[n]) out[n] = file[n];
  return out;
}

async function rawStack(box: BoxService, slug: string): Promise<{ raw: Record<string, unknown>; text: string }> {
  const snap = await box.snapshot();
  const text = treeFileText(snap, fileOf(slug));
  if (text === undefined) notFound(slug, await box.model());
  return { raw: treeFileDoc(snap, fileOf(slug))!, text };
}

async function mustNotExist(box: BoxService, slug: string): Promise<void> {
  if ((await box.snapshot()).tree.files.has(fileOf(slug))) throw new ApiError("stacks.exists", `stack ${slug} already exists (${fileOf(slug)})`, { slug, file: fileOf(slug) });
}

function newFileIntent(slug: string, doc: Record<string, unknown>, summary: string, reply: WriteIntent["reply"]): WriteIntent {
  return { changes: { edits: [newStackEdit(slug, doc)], summary }, reply };
}

function notFound(slug: string, model: Model): never {
  throw new ApiError("stacks.not_found", `no stack ${slug}`, { slug, known: Object.keys(model.stacks).sort() });
}
