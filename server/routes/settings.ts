import { stat } from "node:fs/promises";
import { isAbsolute, resolve } from "node:path";
import { z } from "zod";
import { APPLY_CLASSES, FILE_KINDS, jsonSchemaOf, SETTINGS_REGISTRY } from "../../schema/index.js";
import type { BoxService, Snapshot } from "../box.js";
import { defineRoute } from "../route.js";
import { deepMerge, effectiveSettings, mergeEdits, readSettingsDoc, SETTINGS_FILE } from "../../compiler/edits/settings.js";
import { applyPlanOf } from "../../reconciler/settings-plan.js";

/** A settings body: any object; the compile of the merged tree judges its keys and values. */
const SettingsBody = z.record(z.string(), z.unknown());
const DryRun = z.strictObject({ dry_run: z.enum(["true", "false", "1", "0"]).optional() });

/** Reply metadata a GET hands out; a PUT of a GET reply ignores it (so a read-modify-write round-trips). */
const REPLY_KEYS = ["revision", "_hal0"];

let schemaCache: unknown;

/**
 * `hal0.toml` over REST: the effective settings, their JSON Schema, the
 * registry of apply classes, a deep-merge PUT (one `set` edit per leaf, so
 * comments survive; the pipeline refuses an invalid result) and a reload.
 */
export const settingsRoutes = [
  defineRoute({
    method: "GET", path: "/api/settings", kind: "read", tools: ["settings_get"],
    summary: "The effective settings of hal0.toml (defaults filled) and the tree's revision",
    handle: async ({ box }) => {
      const { snap, gone } = await box.current();
      if (gone) {
        // The config folder gone: the settings of the last tree that compiled, said to be that.
        const settings = (await box.model()).settings;
        return { revision: null, ...settings, _hal0: { file: SETTINGS_FILE, valid: false, tree_valid: false, tree_error: { code: gone.code, message: gone.message } } };
      }
      const own = effectiveSettings(readSettingsDoc(snap.tree.files.get(SETTINGS_FILE)));
      const settings = own ?? (await box.model()).settings;
      return { revision: snap.revision, ...settings, _hal0: { file: SETTINGS_FILE, valid: own !== undefined, tree_valid: snap.model !== undefined } };
    },
  }),
  defineRoute({
    method: "GET", path: "/api/settings/schema", kind: "read", tools: ["settings_schema"],
    summary: "JSON Schema (draft-07, input side) of hal0.toml",
    handle: () => (schemaCache ??= settingsSchema()),
  }),
  defineRoute({
    method: "GET", path: "/api/settings/apply-plan", kind: "read", tools: ["settings_apply_plan"],
    summary: "How each dotted settings key takes effect: its apply class and the services it restarts",
    handle: () => ({
      apply_classes: [...APPLY_CLASSES],
      registry: Object.fromEntries(Object.entries(SETTINGS_REGISTRY).map(([key, e]) => [key, { apply_class: e.apply_class, services: [...(e.services ?? [])] }])),
    }),
  }),
  defineRoute({
    method: "PUT", path: "/api/settings", kind: "write", tools: ["config_write"], body: SettingsBody, query: DryRun,
    summary: "Deep-merge the body into hal0.toml (tables merge, lists and scalars replace, null removes); replies with the new settings and _hal0.apply_plan by dotted leaf key",
    handle: async ({ body, query, box }) => {
      const patch = Object.fromEntries(Object.entries(body).filter(([k]) => !REPLY_KEYS.includes(k)));
      const snap = await box.snapshot();
      const doc = readSettingsDoc(snap.tree.files.get(SETTINGS_FILE)) ?? {};
      const before = effectiveSettings(doc) ?? (await box.model()).settings;
      const after = effectiveSettings(deepMerge(doc, patch)) ?? before;
      const { changed, apply_plan } = applyPlanOf(before, after);
      return {
        changes: { edits: mergeEdits(doc, patch, before), summary: `settings: ${changed.length > 0 ? changed.join(", ") : "no effective change"}` },
        dryRun: query.dry_run === "true" || query.dry_run === "1",
        reply: (out) => ({
          revision: out.revision, ...after,
          _hal0: { apply_plan, changed, committed: out.committed, files: out.files, plan_id: out.plan.id, warnings: out.warnings },
        }),
      };
    },
  }),
  defineRoute({
    method: "POST", path: "/api/settings/reload", kind: "action", tools: ["settings_reload"],
    summary: "Re-read the tree from disk and ask for a sweep in which failing slots are tried at once (an operator's reload; an agent's keeps their backoff, listed in backoff_kept); replies with the revision and a diagnostics summary",
    handle: async ({ box, services, caller }) => {
      const snap = await box.snapshot();
      // An operator's reload says "the host was fixed" (a runner installed, a model copied): slots backing off are tried at
      // once. An agent's does not: one calling it in a loop would restart a crash-looping slot at every call, past its backoff.
      if (caller.kind !== "agent" && services.loop?.attached) {
        // (retryNow asks for the sweep itself: a nudge beside it would queue a second one.)
        services.loop.retryNow();
        return reloadSummary(snap);
      }
      box.nudge();
      const now = Date.now();
      const kept = (services.loop?.backingOff() ?? []).map((b) => ({
        code: "slot.backoff_kept", address: b.address, reason: b.code, failures: b.failures, retry_at: new Date(now + b.waitMs).toISOString(),
        summary: `${b.address} waits until ${new Date(now + b.waitMs).toISOString()} (${b.code}); an agent's reload keeps its backoff, an operator's tries it at once`,
      }));
      return { ...(reloadSummary(snap) as object), backoff_kept: kept };
    },
  }),
  defineRoute({
    method: "GET", path: "/api/settings/models/store", kind: "read", tools: ["model_store"],
    summary: "[models] store and roots, each with whether it exists",
    handle: async ({ box }) => modelStore(box),
  }),
];

/** The committed schema/json/hal0.schema.json, rendered by the one function that renders it. */
function settingsSchema(): unknown {
  return jsonSchemaOf(FILE_KINDS.find((k) => k.id === "settings")!);
}

function reloadSummary(snap: Snapshot): unknown {
  const errors = snap.diagnostics.filter((d) => d.severity === "error");
  const warnings = snap.diagnostics.filter((d) => d.severity === "warning");
  return {
    revision: snap.revision,
    valid: snap.model !== undefined,
    files: Object.keys(snap.files).length,
    errors: errors.length,
    warnings: warnings.length,
    // Errors first; a broken tree can report hundreds, the CLI's `hal0 validate` lists them all.
    diagnostics: [...errors, ...warnings].slice(0, 50).map((d) => ({ code: d.code, severity: d.severity, file: d.file, line: d.line, summary: d.summary })),
    nudged: true,
  };
}

/** Roots and the store, resolved against the config folder when relative. */
async function modelStore(box: BoxService): Promise<unknown> {
  const { models } = (await box.model()).settings;
  const probe = async (path: string) => {
    const abs = isAbsolute(path) ? path : resolve(box.root, path);
    const info = await stat(abs).catch(() => undefined);
    return { path, resolved: abs, exists: info !== undefined, is_dir: info?.isDirectory() ?? false };
  };
  return {
    store: models.store === "" ? { path: "", set: false, resolved: null, exists: false, is_dir: false } : { ...(await probe(models.store)), set: true },
    roots: await Promise.all(models.roots.map(probe)),
  };
}
