import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createServer, type Server } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { main } from "../../cli/index.js";
import { markedRunners } from "../../reconciler/drivers/process-orphans.js";
import { alive, freePort } from "../reconciler/process-helpers.js";
import { captureIo, healthWithin, writeFakeBox } from "./helpers.js";

/**
 * A running slot moved to a port another process holds is not stopped for a
 * start that cannot bind: the plan says `port_held` (a no-op) with the
 * holder, apply leaves the slot serving, and once the port is free the next
 * apply moves it.
 */
const base = mkdtempSync(join(tmpdir(), "hal0-port-held-"));
const config = join(base, "box");
const state = join(base, "state");
let holder: Server | undefined;

afterAll(async () => {
  holder?.close();
  for (const r of await markedRunners(state, "moving")) process.kill(r.pid, "SIGKILL");
  rmSync(base, { recursive: true, force: true });
});

async function run(...args: string[]) {
  const io = captureIo();
  const code = await main([...args, "--config", config, "--state", state], io);
  return { code, out: io.out(), err: io.err() };
}

describe("a running slot's new port held by a process hal0 did not start", () => {
  it("plan: a no-op (port_held) with the holder; apply leaves it serving; freed, the next apply moves it", async () => {
    const [port] = await writeFakeBox(config, ["moving"]);
    expect((await run("apply", "--yes")).code).toBe(0);
    expect(await healthWithin(port!, 10_000)).toBe(200);
    const pid = JSON.parse(readFileSync(join(state, "slots", "moving", "runtime.json"), "utf8")).pid as number;

    const taken = await freePort();
    holder = createServer();
    await new Promise<void>((resolve) => holder!.listen(taken, "127.0.0.1", resolve));
    const file = join(config, "slots", "moving.toml");
    writeFileSync(file, readFileSync(file, "utf8").replace(`port = ${port}`, `port = ${taken}`));

    const plan = await run("plan", "--json");
    expect(plan.code, plan.err).toBe(0);
    const doc = JSON.parse(plan.out);
    expect(doc.changes.find((c: any) => c.address === "slot.moving")).toMatchObject({ action: "no-op", reason: "port_held", destructive: false, downtime: false });
    const warning = doc.warnings.find((w: any) => w.address === "slot.moving");
    expect(warning).toMatchObject({ code: "slot.port_in_use" });
    expect(warning.message).toMatch(new RegExp(`^port ${taken} is held by pid ${process.pid}\\b.*keeps running as it is on port ${port} until it is freed$`));
    const text = await run("plan");
    expect(text.out).toMatch(/No changes/);
    expect(text.out).toContain(`slot.port_in_use: port ${taken} is held by pid ${process.pid}`);

    const applied = await run("apply", "--yes");
    expect(applied.code, applied.out + applied.err).toBe(0);
    expect(await alive(pid)).toBe(true);
    expect(await healthWithin(port!, 2_000)).toBe(200);

    // Freed: the slot moves.
    await new Promise((resolve) => holder!.close(resolve));
    holder = undefined;
    const moved = await run("apply", "--yes");
    expect(moved.code, moved.out + moved.err).toBe(0);
    expect(moved.out).toMatch(/-\/\+ slot\.moving/);
    expect(await healthWithin(taken, 10_000)).toBe(200);
    expect(await alive(pid)).toBe(false);
    expect((await run("down")).code).toBe(0);
  });
});

describe("a slot's port held by a runner hal0 started for it that no record names", () => {
  it("plan names it as the slot's runner (never a process hal0 did not start) and says the create stops it first; apply does so", async () => {
    const [port] = await writeFakeBox(config, ["moving"]);
    expect((await run("apply", "--yes")).code).toBe(0);
    expect(await healthWithin(port!, 10_000)).toBe(200);
    // As a hal0 killed between the spawn and the record leaves it.
    const record = join(state, "slots", "moving", "runtime.json");
    const pid = JSON.parse(readFileSync(record, "utf8")).pid as number;
    rmSync(record);

    const plan = JSON.parse((await run("plan", "--json")).out);
    expect(plan.changes.find((c: any) => c.address === "slot.moving")).toMatchObject({ action: "create" });
    const warning = plan.warnings.find((w: any) => w.address === "slot.moving" && w.code === "slot.port_in_use");
    expect(warning.message).toMatch(new RegExp(`^port ${port} is held by pid ${pid} \\(.*\\), a runner hal0 started as slot \`moving\` that no record names .*; the create stops it first$`));
    expect(warning.message).not.toContain("did not start");

    const applied = await run("apply", "--yes");
    expect(applied.code, applied.out + applied.err).toBe(0);
    expect(await alive(pid)).toBe(false);
    expect(await healthWithin(port!, 10_000)).toBe(200);
    expect((await run("down")).code).toBe(0);
  });
});
