import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { afterEach, describe, expect, it } from "vitest";
import { HubClient } from "../../reconciler/host/hf-hub.js";
import { openDb, type Db } from "../../server/db.js";
import { PullStore } from "../../server/pulls/store.js";
import { PullWorker } from "../../server/pulls/worker.js";
import { startFakeHub, type FakeHub } from "../helpers/fake-hub.js";

/**
 * A CLI command's pull worker (a guest beside `hal0 serve`, on the same
 * database) runs the pulls it queued and no other: a pull the serve queued
 * while its places were full waits for the serve.
 */
let hub: FakeHub | undefined;
let db: Db | undefined;
let dir: string | undefined;
afterEach(async () => {
  db?.close();
  await hub?.close();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

describe("a guest pull worker", () => {
  it("starts only the pulls it queued; the serve's queued pull stays queued", async () => {
    const bytes = Buffer.alloc(256 * 1024, 7);
    hub = await startFakeHub({ repos: { "acme/x-GGUF": { files: { "mine.gguf": bytes, "serves.gguf": bytes } } }, bytesPerSecond: 64 * 1024 });
    dir = mkdtempSync(join(tmpdir(), "hal0-pull-guest-"));
    db = openDb(join(dir, "state"));
    const store = new PullStore(db);
    const job = (id: string, file: string) => store.create({ model_id: id, mode: "pull", hf_repo: "acme/x-GGUF", hf_filename: file, revision: "main", dest: join(dir!, file), extras: [], requested_by: "operator:owner", approved_by: "operator:owner" });
    job("serves", "serves.gguf"); // queued by the serve, waiting for a place there
    const guest = new PullWorker({ store, hub: () => HubClient.fromEnv({ HF_ENDPOINT: hub!.endpoint }), parallel: () => 4, register: async () => undefined, guest: true });
    job("mine", "mine.gguf");
    guest.pump("mine");
    for (let i = 0; store.get("mine")!.state === "queued"; i++) {
      if (i > 200) throw new Error("the guest never started its own pull");
      await sleep(10);
    }
    guest.pump(); // a pull ending pumps again: still only its own
    await sleep(200);
    expect(store.get("mine")!.state).not.toBe("queued");
    expect(store.get("serves")!.state).toBe("queued");
    expect(hub.requests.some((r) => r.path.includes("serves.gguf"))).toBe(false);
    guest.close();
  });
});
