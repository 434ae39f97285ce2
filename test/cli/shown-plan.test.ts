import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { savedPlan, shownPlan } from "../../cli/plan-cmd.js";
import { formatPlan } from "../../reconciler/format.js";
import { Plan } from "../../schema/index.js";

/**
 * The text form of a plan (`hal0 plan`, `apply`, `down`, `agent
 * reprovision`) prints from `shownPlan`, which leaves a no-op change's views
 * unwalked: its text must be the text of the fully masked plan, for every
 * golden plan with secrets put in every env and argv it carries.
 */
const FIXTURES = join(import.meta.dirname, "../../fixtures/plans");
const TOKEN = "hf_shownplanSECRETtoken0123456789";
const KEY = "sk-shownplanSECRETkey0123456789";

/**
 * `value` with an HF_TOKEN in every env table and an `--api-key` pair at the
 * end of every argv, each ending in the side it is on (`before`, `after`), so
 * that a change prints them among its changed paths.
 */
function withSecrets(value: unknown, key?: string, side = ""): unknown {
  if (Array.isArray(value)) return key === "argv" ? [...value.map((v) => withSecrets(v, undefined, side)), "--api-key", `${KEY}${side}`] : value.map((v) => withSecrets(v, undefined, side));
  if (value === null || typeof value !== "object") return value;
  const out = Object.fromEntries(Object.entries(value).map(([k, v]) => [k, withSecrets(v, k, k === "before" || k === "after" ? k : side)]));
  return key === "env" ? { ...out, HF_TOKEN: `${TOKEN}${side}` } : out;
}

/** The golden plan with secrets added, and its changed paths made to name the secrets a change now moves. */
function goldenWithSecrets(name: string): Plan {
  const plan = withSecrets(JSON.parse(readFileSync(join(FIXTURES, name, "plan.json"), "utf8"))) as { changes: Array<{ action: string; kind: string; changed_paths: string[] }> };
  for (const c of plan.changes) if (c.kind === "slot" && c.action !== "no-op") c.changed_paths = [...c.changed_paths, "env.HF_TOKEN", "argv.--api-key"];
  return Plan.parse(plan);
}

const plans = readdirSync(FIXTURES, { withFileTypes: true })
  .filter((e) => e.isDirectory())
  .map((e) => ({ name: e.name, plan: goldenWithSecrets(e.name) }));

describe("the text plan's masking", () => {
  it("has golden plans with secrets in no-op and other changes alike", () => {
    expect(plans.length).toBeGreaterThan(20);
    const all = plans.flatMap((p) => p.plan.changes);
    expect(all.some((c) => c.action === "no-op" && JSON.stringify(c).includes(TOKEN))).toBe(true);
    expect(all.some((c) => c.action !== "no-op" && JSON.stringify(c).includes(TOKEN) && JSON.stringify(c).includes(KEY))).toBe(true);
  });

  it.each(plans)("$name: prints the same text as the fully masked plan, with no secret in it", ({ plan }) => {
    for (const verbose of [false, true]) {
      const text = formatPlan(shownPlan(plan), { verbose });
      expect(text).toBe(formatPlan(savedPlan(plan), { verbose }));
      expect(text).not.toContain("SECRET");
    }
  });

  it("masks each change that is not a no-op, and passes a no-op's views on unwalked", () => {
    const plan = plans.find((p) => p.name === "env-and-extra-args")!.plan;
    const shown = shownPlan(plan);
    shown.changes.forEach((c, i) => {
      if (c.action === "no-op") expect(c).toBe(plan.changes[i]);
      else expect(JSON.stringify(c)).not.toContain("SECRET");
    });
    expect(shown.changes.some((c) => c.action !== "no-op")).toBe(true);
  });
});
