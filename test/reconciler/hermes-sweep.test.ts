import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { compile, loadTree } from "../../compiler/index.js";
import { ProcessDriver } from "../../reconciler/drivers/process.js";
import { executePlan } from "../../reconciler/execute.js";
import { observe } from "../../reconciler/observe.js";
import { planChanges } from "../../reconciler/plan.js";
import { StateStore } from "../../reconciler/state.js";
import { Sweeper } from "../../reconciler/sweep.js";

/** A box with no slots and a Hermes home with named profiles, swept in process. */
const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

function box(host = "0.0.0.0") {
  const dir = mkdtempSync(join(tmpdir(), "hal0-hermes-sweep-"));
  dirs.push(dir);
  const root = join(dir, "etc");
  const home = join(dir, "hermes");
  mkdirSync(root);
  writeFileSync(join(root, "hal0.toml"), `[server]\nhost = "${host}"\n\n[hermes]\nhome = "../hermes"\n`);
  for (const p of ["a", "b"]) {
    mkdirSync(join(home, "profiles", p), { recursive: true });
    writeFileSync(join(home, "profiles", p, "config.yaml"), `# profile ${p}\nmodel:\n  default: x   # keep\n`);
  }
  const state = new StateStore(join(dir, "state"));
  const sweeper = new Sweeper({ root, state, driverFor: async () => new ProcessDriver({ stateDir: state.dir }) });
  return { dir, home, state, sweeper, file: (p: string) => join(home, "profiles", p, "config.yaml") };
}

function mtimes(dir: string): string[] {
  return readdirSync(dir, { recursive: true }).map(String).sort().map((p) => `${p} ${statSync(join(dir, p)).mtimeMs}`);
}

describe("Hermes profiles in the sweep", () => {
  it("wires every named profile ([hermes] home relative to the config folder; a wildcard [server] host is reached on loopback), then a sweep with nothing to do writes nothing", async () => {
    const { dir, sweeper, file } = box();
    const first = await sweeper.sweep();
    expect(first.outcome).toBe("converged");
    expect(first.results.map((r) => `${r.address} ${r.ok}`)).toEqual(["hermes.a true", "hermes.b true", "settings true"]);
    expect(readFileSync(file("a"), "utf8")).toContain("url: http://127.0.0.1:8080/mcp/admin");
    expect(readFileSync(file("a"), "utf8").startsWith("# profile a\nmodel:\n  default: x   # keep\nmcp_servers:\n  hal0-admin:\n")).toBe(true);
    const before = mtimes(dir);
    expect((await sweeper.sweep()).outcome).toBe("nothing_to_do");
    expect(mtimes(dir)).toEqual(before);
  });

  it("undoes a hand edit on the next sweep", async () => {
    const { sweeper, file } = box("127.0.0.1");
    await sweeper.sweep();
    const wired = readFileSync(file("b"), "utf8");
    writeFileSync(file("b"), wired.replace("timeout: 60", "timeout: 5"));
    const report = await sweeper.sweep();
    expect(report.plan!.changes.find((c) => c.address === "hermes.b")).toMatchObject({ action: "update", reason: "drifted", changed_paths: ["mcp_servers.hal0-admin.timeout"] });
    expect(readFileSync(file("b"), "utf8")).toBe(wired);
  });

  it("a profile that cannot be written is a failed step (hermes.write_failed); the others still converge", async () => {
    const { dir, state, file } = box("127.0.0.1");
    const loaded = await loadTree(join(dir, "etc"));
    const model = compile(loaded.tree).model!;
    const driver = new ProcessDriver({ stateDir: state.dir });
    const { observed, inventory } = await observe(model, driver, state);
    const plan = planChanges(model, observed, inventory);
    // Between plan and apply, profile a's config.yaml turns into a folder: it cannot be read or written, even by root.
    rmSync(file("a"));
    mkdirSync(file("a"));
    const results = await executePlan(plan, { driver, state, healthTimeoutS: 5, stopGraceS: 1, cwd: dir });
    expect(results.find((r) => r.address === "hermes.a")).toMatchObject({ ok: false, code: "hermes.write_failed" });
    expect(results.find((r) => r.address === "hermes.b")).toMatchObject({ ok: true });
    expect(readFileSync(file("b"), "utf8")).toContain("hal0-memory:");
    const managed = JSON.parse(readFileSync(join(state.dir, "hermes-managed.json"), "utf8"));
    expect(Object.keys(managed.profiles)).toEqual(["b"]);
  });
});

describe("hal0 down's plan", () => {
  it("leaves Hermes files alone", async () => {
    const { dir, state } = box("127.0.0.1");
    const model = compile((await loadTree(join(dir, "etc"))).tree).model!;
    const { observed, inventory } = await observe(model, new ProcessDriver({ stateDir: state.dir }), state);
    expect(planChanges(model, observed, inventory).changes.filter((c) => c.kind === "hermes")).toHaveLength(2);
    expect(planChanges(model, observed, inventory, { destroy: true }).changes.filter((c) => c.kind === "hermes")).toEqual([]);
  });
});
