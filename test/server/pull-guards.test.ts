import { createHash } from "node:crypto";
import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { createServer, type Server } from "node:http";
import type { AddressInfo, Socket } from "node:net";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { splitSet, startFakeHub, type FakeHub } from "../helpers/fake-hub.js";
import { ggufBytes, modelKvs } from "./gguf-writer.js";
import { setModelsTable, startTestServer, type TestServer } from "./harness.js";
import { until, untilTrue } from "../helpers/until.js";

/**
 * What a pull refuses or survives when the request, or the Hub, is odd: files
 * of one pull that would share a destination, a file named as another pull's
 * `.partial`, a Hub that sends more than it advertised or no sha256, a
 * resume the Hub refuses, files that are not GGUF. Against the local stand-in
 * for the Hub (test/helpers/fake-hub.ts); nothing leaves this machine.
 */
const gguf = (name: string, bytes: number) => ggufBytes({ kvs: modelKvs({ arch: "llama", ctx: 4096, name }), tensors: [{ name: "w", dims: [Math.ceil(bytes / 4)] }] });
const sha = (b: Buffer) => createHash("sha256").update(b).digest("hex");

describe("pull guards (a local stand-in for the Hub)", () => {
  let hub: FakeHub;
  let s: TestServer;
  const status = (id: string) => s.call("GET", `/api/models/${id}/pull/status`).then((r) => r.body.pull);
  const ended = (id: string) => until(() => status(id), (p) => p !== undefined && ["done", "failed", "cancelled"].includes(p.state));
  const pulls = async () => (await s.call("GET", "/api/models/pulls")).body.pulls.map((p: { model_id: string }) => p.model_id);
  const store = () => join(s.config, "pulled");

  beforeAll(async () => {
    hub = await startFakeHub({ repos: {
      "acme/same-GGUF": { files: { "a/m.gguf": gguf("A", 4096), "b/m.gguf": gguf("B", 8192), "m.gguf.partial": gguf("P", 4096), "c/m.gguf": gguf("C", 4096) } },
      "acme/part-GGUF": { files: { "x.gguf": gguf("X", 256 * 1024), "x.gguf.partial": gguf("XP", 256 * 1024) } },
      "acme/twice-GGUF": { files: { "t.gguf": gguf("T", 256 * 1024), "u.gguf": gguf("U", 256 * 1024) } },
    } });
    s = await startTestServer({ env: { HF_ENDPOINT: hub.endpoint } });
    setModelsTable(s.config, 'store = "pulled"');
  });
  afterAll(async () => {
    await s?.close();
    await hub?.close();
  });

  it("files of one pull that would share a destination (the same base name, or one's .partial) are refused before anything is queued", async () => {
    const same = await s.call("POST", "/api/models/same/pull", { body: { hf_repo: "acme/same-GGUF", hf_filename: "a/m.gguf", draft_filename: "b/m.gguf" } });
    expect([same.status, same.body.error?.code], JSON.stringify(same.body)).toEqual([422, "validation.invalid"]);
    expect(same.body.error.message).toContain("hf_filename \"a/m.gguf\" and draft_filename \"b/m.gguf\"");
    expect(same.body.error.details.fields.map((f: { loc: string[] }) => f.loc[1])).toEqual(["hf_filename", "draft_filename"]);
    const mm = await s.call("POST", "/api/models/same/pull", { body: { hf_repo: "acme/same-GGUF", hf_filename: "a/m.gguf", mmproj_filename: "c/m.gguf" } });
    expect([mm.status, mm.body.error?.code]).toEqual([422, "validation.invalid"]);
    const partial = await s.call("POST", "/api/models/same/pull", { body: { hf_repo: "acme/same-GGUF", hf_filename: "a/m.gguf", mmproj_filename: "m.gguf.partial" } });
    expect([partial.status, partial.body.error?.code]).toEqual([422, "validation.invalid"]);
    expect(await pulls()).toEqual([]);
    expect(existsSync(store()) ? readdirSync(store()) : []).toEqual([]);
  });

  it("a store hal0 cannot write (a file where its folder should be) fails the pull with reason store, naming the path, not network", async () => {
    writeFileSync(join(s.config, "blocked"), "a file, not a folder\n");
    setModelsTable(s.config, 'store = "blocked/models"');
    try {
      expect((await s.call("POST", "/api/models/blocked/pull", { body: { hf_repo: "acme/twice-GGUF", hf_filename: "u.gguf" } })).status).toBe(202);
      const failed = await ended("blocked");
      expect(failed, JSON.stringify(failed)).toMatchObject({ state: "failed", reason: "store" });
      expect(failed.error).toContain(join(s.config, "blocked"));
      expect((await s.call("GET", "/api/models/blocked")).status).toBe(404);
    } finally {
      setModelsTable(s.config, 'store = "pulled"');
      rmSync(join(s.config, "blocked"));
      await s.call("DELETE", "/api/models/pulls/blocked");
    }
  });

  it("a revision the Hub lacks is 404 model.not_found naming the revision, not only a repository that is there (pull and inspect)", async () => {
    const revision = "0".repeat(40);
    const pull = await s.call("POST", "/api/models/norev/pull", { body: { hf_repo: "acme/twice-GGUF", hf_filename: "t.gguf", revision } });
    const inspect = await s.call("POST", "/api/models/inspect", { body: { hf_repo: "acme/twice-GGUF", revision } });
    for (const res of [pull, inspect]) {
      expect([res.status, res.body.error?.code], JSON.stringify(res.body)).toEqual([404, "model.not_found"]);
      expect(res.body.error.message).toContain(`no revision ${revision}`);
      expect(res.body.error.details).toEqual({ hf_repo: "acme/twice-GGUF", revision });
    }
    expect(await pulls()).toEqual([]);
  });

  it("a repo id or revision the Hub client will not send is 422 validation.invalid (not 502 model.hub_unreachable), as model_inspect says", async () => {
    const cases: Array<[Record<string, string>, string]> = [
      [{ hf_repo: "acme/a..b", hf_filename: "m.gguf" }, "hf_repo"],
      [{ hf_repo: `acme/${"n".repeat(97)}`, hf_filename: "m.gguf" }, "hf_repo"],
      [{ hf_repo: "acme/same-GGUF", hf_filename: "a/m.gguf", revision: "a/../../b" }, "revision"],
      [{ hf_repo: "acme/same-GGUF", hf_filename: "a/m.gguf", revision: "a//b" }, "revision"],
      [{ hf_repo: "acme/same-GGUF", hf_filename: "a/m.gguf", draft_repo: "acme/x..y", draft_filename: "d.gguf" }, "draft_repo"],
    ];
    for (const [body, field] of cases) {
      const res = await s.call("POST", "/api/models/bad/pull", { body });
      expect([res.status, res.body.error?.code], JSON.stringify(res.body)).toEqual([422, "validation.invalid"]);
      expect(res.body.error.details.fields[0].loc).toEqual(["body", field]);
      const inspect = await s.call("POST", "/api/models/inspect", { body: { hf_repo: body.hf_repo, ...(body.revision ? { revision: body.revision } : {}) } });
      if (field !== "draft_repo") expect([inspect.status, inspect.body.error?.code]).toEqual([422, "validation.invalid"]);
    }
    expect(await pulls()).toEqual([]);
  });

  it("two pulls of one id sent at once are one pull: the other is model.already_exists, not a job that replaces the first one's row while it downloads; of one file under two ids, model.file_exists", async () => {
    hub.setRate(32 * 1024);
    try {
      const t = { hf_repo: "acme/twice-GGUF", hf_filename: "t.gguf" };
      const [a, b] = await Promise.all([s.call("POST", "/api/models/t1/pull", { body: t }), s.call("POST", "/api/models/t2/pull", { body: t })]);
      expect([a.status, b.status].sort(), JSON.stringify([a.body, b.body])).toEqual([202, 409]);
      expect([a, b].find((r) => r.status === 409)!.body.error.code).toBe("model.file_exists");
      const [c, d] = await Promise.all([
        s.call("POST", "/api/models/one/pull", { body: { hf_repo: "acme/twice-GGUF", hf_filename: "u.gguf" } }),
        s.call("POST", "/api/models/one/pull", { body: { hf_repo: "acme/same-GGUF", hf_filename: "c/m.gguf" } }),
      ]);
      expect([c.status, d.status].sort(), JSON.stringify([c.body, d.body])).toEqual([202, 409]);
      expect([c, d].find((r) => r.status === 409)!.body.error.code).toBe("model.already_exists");
      const live = (await s.call("GET", "/api/models/pulls")).body.pulls as Array<{ model_id: string; hf_filename: string }>;
      expect(live.map((p) => p.model_id).sort()).toEqual([a.status === 202 ? "t1" : "t2", "one"].sort());
      expect(live.find((p) => p.model_id === "one")!.hf_filename).toBe(c.status === 202 ? "u.gguf" : "c/m.gguf");
      for (const p of live) {
        expect((await s.call("POST", `/api/models/${p.model_id}/pull/cancel`)).status).toBe(200);
        await s.call("DELETE", `/api/models/pulls/${p.model_id}`);
      }
    } finally {
      hub.setRate(null);
    }
    expect(readdirSync(store())).toEqual([]);
  });

  it("a Hub file named X.partial is refused while another pull downloads X (and the other way round): they would share one file", async () => {
    hub.setRate(32 * 1024);
    try {
      // x.gguf.partial pulled first: its destination is where a pull of x.gguf would put its bytes.
      expect((await s.call("POST", "/api/models/xp/pull", { body: { hf_repo: "acme/part-GGUF", hf_filename: "x.gguf.partial" } })).status).toBe(202);
      await until(() => status("xp"), (p) => p.state === "downloading" && p.bytes > 0);
      const x = await s.call("POST", "/api/models/x/pull", { body: { hf_repo: "acme/part-GGUF", hf_filename: "x.gguf" } });
      expect([x.status, x.body.error?.code], JSON.stringify(x.body)).toEqual([409, "model.file_exists"]);
      expect(x.body.error.details).toMatchObject({ model_id: "xp" });
      expect((await s.call("POST", "/api/models/xp/pull/cancel")).status).toBe(200);
      await ended("xp");
      // x.gguf pulled first: its .partial is the other file's destination.
      expect((await s.call("POST", "/api/models/x/pull", { body: { hf_repo: "acme/part-GGUF", hf_filename: "x.gguf" } })).status).toBe(202);
      await until(() => status("x"), (p) => p.state === "downloading" && p.bytes > 0);
      const xp = await s.call("POST", "/api/models/xp2/pull", { body: { hf_repo: "acme/part-GGUF", hf_filename: "x.gguf.partial" } });
      expect([xp.status, xp.body.error?.code], JSON.stringify(xp.body)).toEqual([409, "model.file_exists"]);
      expect((await s.call("POST", "/api/models/x/pull/cancel")).status).toBe(200);
      await ended("x");
    } finally {
      hub.setRate(null);
    }
    expect(readdirSync(store())).toEqual([]);
  });
});

describe("a Hub that misbehaves mid-download (a local stand-in)", () => {
  let hub: FakeHub;
  let s: TestServer;
  const status = (id: string) => s.call("GET", `/api/models/${id}/pull/status`).then((r) => r.body.pull);
  const ended = (id: string) => until(() => status(id), (p) => p !== undefined && ["done", "failed", "cancelled"].includes(p.state));
  const store = () => join(s.config, "pulled");
  const over = gguf("Over", 64 * 1024);
  const resumed = gguf("Resumed", 64 * 1024);
  const noEtag = gguf("NoEtag", 16 * 1024);
  const noEtagBad = gguf("NoEtagBad", 16 * 1024);
  const cut = gguf("Cut", 64 * 1024);
  const small = gguf("Small", 16 * 1024);
  const dropDraft = gguf("DropDraft", 64 * 1024);
  const slowDraft = gguf("SlowDraft", 512 * 1024);
  const plain = gguf("Plain", 16 * 1024);

  beforeAll(async () => {
    hub = await startFakeHub({ repos: { "acme/odd-GGUF": { files: { "over.gguf": over, "resumed.gguf": resumed, "noetag.gguf": noEtag, "noetag-bad.gguf": noEtagBad, "cut.gguf": cut, "small.gguf": small, "drop-draft.gguf": dropDraft, "slow-draft.gguf": slowDraft, "plain.gguf": { data: plain, lfs: false }, "plain-bad.gguf": { data: plain, lfs: false } } } } });
    s = await startTestServer({ env: { HF_ENDPOINT: hub.endpoint } });
    setModelsTable(s.config, 'store = "pulled"');
  });
  afterAll(async () => {
    await s?.close();
    await hub?.close();
  });

  it("more bytes than advertised: stopped at the advertised size, failed (reason oversized), its partial removed; the next pull starts afresh", async () => {
    hub.misbehave("acme/odd-GGUF", "over.gguf", { extraBytes: 4 * 1024 * 1024 });
    expect((await s.call("POST", "/api/models/over/pull", { body: { hf_repo: "acme/odd-GGUF", hf_filename: "over.gguf" } })).status).toBe(202);
    const failed = await ended("over");
    expect(failed).toMatchObject({ state: "failed", reason: "oversized" });
    expect(failed.error).toContain(`more than the ${over.length} bytes it advertised`);
    expect(failed.bytes).toBeLessThanOrEqual(over.length);
    expect(readdirSync(store())).toEqual([]);
    hub.misbehave("acme/odd-GGUF", "over.gguf", { extraBytes: 0 });
    expect((await s.call("POST", "/api/models/over/pull", { body: { hf_repo: "acme/odd-GGUF", hf_filename: "over.gguf" } })).status).toBe(202);
    expect(await ended("over")).toMatchObject({ state: "done", sha256: sha(over) });
  });

  it("a partial file larger than the file (its Range refused with 416) is started again from byte 0, not failed", async () => {
    mkdirSync(store(), { recursive: true });
    writeFileSync(join(store(), "resumed.gguf.partial"), Buffer.alloc(resumed.length + 1000, 7));
    expect((await s.call("POST", "/api/models/resumed/pull", { body: { hf_repo: "acme/odd-GGUF", hf_filename: "resumed.gguf" } })).status).toBe(202);
    const done = await ended("resumed");
    expect(done, JSON.stringify(done)).toMatchObject({ state: "done", sha256: sha(resumed), bytes: resumed.length });
    expect(sha(readFileSync(join(store(), "resumed.gguf")))).toBe(sha(resumed));
    expect(existsSync(join(store(), "resumed.gguf.partial"))).toBe(false);
    expect(hub.requests.some((r) => r.server === "cdn" && r.range === `bytes=${resumed.length + 1000}-`)).toBe(true);
  });

  it("the connection cut mid-file: failed (network), every byte received kept in the partial file; the retry resumes after them", async () => {
    const body = { hf_repo: "acme/odd-GGUF", hf_filename: "cut.gguf" };
    for (const at of [8192, 24576]) {
      hub.misbehave("acme/odd-GGUF", "cut.gguf", { dropAfter: at });
      expect((await s.call("POST", "/api/models/cut/pull", { body })).status).toBe(202);
      const failed = await ended("cut");
      expect(failed, JSON.stringify(failed)).toMatchObject({ state: "failed", reason: "network" });
      expect(failed.error).toContain("broke off");
      expect(statSync(join(store(), "cut.gguf.partial")).size).toBe(at);
    }
    hub.misbehave("acme/odd-GGUF", "cut.gguf", { dropAfter: null });
    expect((await s.call("POST", "/api/models/cut/pull", { body })).status).toBe(202);
    expect(await ended("cut")).toMatchObject({ state: "done", sha256: sha(cut) });
    expect(hub.requests.filter((r) => r.server === "cdn" && r.path.startsWith(`/blobs/${sha(cut)}`)).map((r) => r.range ?? null)).toEqual([null, "bytes=8192-", "bytes=24576-"]);
    expect(sha(readFileSync(join(store(), "cut.gguf")))).toBe(sha(cut));
  });

  it("the connection cut while a draft downloads (the model's file already in place): failed (network), the model's file not left behind; the retry resumes the draft", async () => {
    hub.misbehave("acme/odd-GGUF", "drop-draft.gguf", { dropAfter: 8192 });
    const body = { hf_repo: "acme/odd-GGUF", hf_filename: "small.gguf", draft_filename: "drop-draft.gguf" };
    expect((await s.call("POST", "/api/models/small/pull", { body })).status).toBe(202);
    const failed = await ended("small");
    expect(failed, JSON.stringify(failed)).toMatchObject({ state: "failed", reason: "network" });
    // Only the draft's partial file is left, to resume: no complete file a retry would meet as model.file_exists.
    expect(readdirSync(store()).filter((f) => f.startsWith("small") || f.startsWith("drop-draft"))).toEqual(["drop-draft.gguf.partial"]);
    expect(statSync(join(store(), "drop-draft.gguf.partial")).size).toBe(8192);
    hub.misbehave("acme/odd-GGUF", "drop-draft.gguf", { dropAfter: null });
    const retry = await s.call("POST", "/api/models/small/pull", { body });
    expect(retry.status, JSON.stringify(retry.body)).toBe(202);
    expect(await ended("small")).toMatchObject({ state: "done", sha256: sha(small) });
    expect(hub.requests.some((r) => r.server === "cdn" && r.range === "bytes=8192-")).toBe(true);
    expect(sha(readFileSync(join(store(), "drop-draft.gguf")))).toBe(sha(dropDraft));
    expect((await s.call("GET", "/api/models/small")).body.draft).toBe("pulled/drop-draft.gguf");
  });

  it("a pull cancelled while its draft downloads (the model's file already in place) leaves no file behind; pulled again, it is not model.file_exists", async () => {
    hub.setRate(64 * 1024);
    const body = { hf_repo: "acme/odd-GGUF", hf_filename: "small.gguf", draft_filename: "slow-draft.gguf" };
    try {
      await s.call("DELETE", "/api/models/small");
      for (const f of ["small.gguf", "drop-draft.gguf"]) rmSync(join(store(), f), { force: true });
      expect((await s.call("POST", "/api/models/small2/pull", { body })).status).toBe(202);
      await untilTrue(() => existsSync(join(store(), "small.gguf")) && existsSync(join(store(), "slow-draft.gguf.partial")), 10_000);
      expect((await s.call("POST", "/api/models/small2/pull/cancel")).body.pull.state).toBe("cancelled");
      expect(readdirSync(store()).filter((f) => f.startsWith("small") || f.startsWith("slow-draft"))).toEqual([]);
    } finally {
      hub.setRate(null);
    }
    const again = await s.call("POST", "/api/models/small2/pull", { body });
    expect(again.status, JSON.stringify(again.body)).toBe(202);
    expect(await ended("small2")).toMatchObject({ state: "done" });
  });

  it("a file the Hub keeps outside LFS (no sha256) is checked by its git blob id: a corrupted byte fails it (checksum), the file removed", async () => {
    hub.corrupt("acme/odd-GGUF", "plain-bad.gguf", 9000);
    expect((await s.call("POST", "/api/models/plainbad/pull", { body: { hf_repo: "acme/odd-GGUF", hf_filename: "plain-bad.gguf" } })).status).toBe(202);
    const failed = await ended("plainbad");
    expect(failed, JSON.stringify(failed)).toMatchObject({ state: "failed", reason: "checksum" });
    expect(failed.error).toContain("git blob id");
    expect(existsSync(join(store(), "plain-bad.gguf"))).toBe(false);
    expect(existsSync(join(store(), "plain-bad.gguf.partial"))).toBe(false);
    expect((await s.call("GET", "/api/models/plainbad")).status).toBe(404);
    expect((await s.call("POST", "/api/models/plain/pull", { body: { hf_repo: "acme/odd-GGUF", hf_filename: "plain.gguf" } })).status).toBe(202);
    expect(await ended("plain")).toMatchObject({ state: "done", sha256: sha(plain) });
  });

  it("a download reply without the sha256 (no x-linked-etag) is checked against the listing's LFS sha256", async () => {
    hub.misbehave("acme/odd-GGUF", "noetag.gguf", { noEtag: true });
    expect((await s.call("POST", "/api/models/noetag/pull", { body: { hf_repo: "acme/odd-GGUF", hf_filename: "noetag.gguf" } })).status).toBe(202);
    expect(await ended("noetag")).toMatchObject({ state: "done", sha256: sha(noEtag) });
    hub.misbehave("acme/odd-GGUF", "noetag-bad.gguf", { noEtag: true });
    hub.corrupt("acme/odd-GGUF", "noetag-bad.gguf", 9000);
    expect((await s.call("POST", "/api/models/noetagbad/pull", { body: { hf_repo: "acme/odd-GGUF", hf_filename: "noetag-bad.gguf" } })).status).toBe(202);
    const failed = await ended("noetagbad");
    expect(failed).toMatchObject({ state: "failed", reason: "checksum" });
    expect(failed.error).toContain(`is not the Hub's ${sha(noEtagBad)}`);
    expect(existsSync(join(store(), "noetag-bad.gguf"))).toBe(false);
    expect(existsSync(join(store(), "noetag-bad.gguf.partial"))).toBe(false);
    expect((await s.call("GET", "/api/models/noetagbad")).status).toBe(404);
  });
});

describe("a Hub that accepts the connection and never answers", () => {
  let silent: Server;
  let endpoint: string;
  const sockets = new Set<Socket>();

  beforeAll(async () => {
    silent = createServer(() => undefined); // every request is left unanswered
    silent.on("connection", (c) => {
      sockets.add(c);
      c.on("close", () => sockets.delete(c));
    });
    await new Promise<void>((resolve) => silent.listen(0, "127.0.0.1", resolve));
    endpoint = `http://127.0.0.1:${(silent.address() as AddressInfo).port}`;
  });
  afterAll(async () => {
    for (const c of sockets) c.destroy();
    await new Promise((r) => silent.close(r));
  });

  it("search, inspect and the pull's precheck give up after HAL0_HUB_TIMEOUT_S: 502 model.hub_unreachable", async () => {
    const s = await startTestServer({ env: { HF_ENDPOINT: endpoint, HAL0_HUB_TIMEOUT_S: "1" } });
    try {
      setModelsTable(s.config, 'store = "pulled"');
      for (const [method, path, body] of [["GET", "/api/hf/search?q=tiny"], ["POST", "/api/models/inspect", { hf_repo: "acme/tiny-GGUF" }], ["POST", "/api/models/t/pull", { hf_repo: "acme/tiny-GGUF", hf_filename: "t.gguf" }]] as const) {
        const t0 = Date.now();
        const res = await s.call(method, path, body === undefined ? {} : { body });
        expect([res.status, res.body.error?.code], `${path}: ${JSON.stringify(res.body)}`).toEqual([502, "model.hub_unreachable"]);
        expect(res.body.error.message).toContain("HAL0_HUB_TIMEOUT_S");
        expect(Date.now() - t0).toBeLessThan(5000);
      }
      expect((await s.call("GET", "/api/models/pulls")).body.pulls).toEqual([]);
    } finally {
      await s.close();
    }
  });

  it("a serve's stop gives up the Hub calls in flight at once", async () => {
    const s = await startTestServer({ env: { HF_ENDPOINT: endpoint } });
    try {
      const t0 = Date.now();
      const pending = s.call("GET", "/api/hf/search?q=tiny");
      await sleep(300);
      s.hal0.pulls!.close();
      const res = await pending;
      expect([res.status, res.body.error?.code], JSON.stringify(res.body)).toEqual([502, "model.hub_unreachable"]);
      expect(res.body.error.message).toContain("stopping");
      expect(Date.now() - t0).toBeLessThan(5000);
    } finally {
      await s.close();
    }
  });
});

describe("files that are not GGUF (a local stand-in for the Hub)", () => {
  let hub: FakeHub;
  let s: TestServer;
  const status = (id: string) => s.call("GET", `/api/models/${id}/pull/status`).then((r) => r.body.pull);
  const ended = (id: string) => until(() => status(id), (p) => p !== undefined && ["done", "failed", "cancelled"].includes(p.state));
  const store = () => join(s.config, "pulled");

  beforeAll(async () => {
    hub = await startFakeHub({ repos: { "acme/mixed-GGUF": { files: {
      "notes.txt": { data: Buffer.from("just some notes\n"), lfs: false },
      "weights.bin": Buffer.alloc(64 * 1024, 3),
      "text.gguf": Buffer.from("this is text, not a GGUF file\n".repeat(100)),
      "good.gguf": gguf("Good", 8192),
    } } } });
    s = await startTestServer({ env: { HF_ENDPOINT: hub.endpoint } });
    setModelsTable(s.config, 'store = "pulled"');
  });
  afterAll(async () => {
    await s?.close();
    await hub?.close();
  });

  it("a pull of a file that is not GGUF fails with model.unsupported_format (as model_add says), its file removed, nothing registered", async () => {
    for (const [id, file] of [["notes", "notes.txt"], ["weights", "weights.bin"], ["text", "text.gguf"]] as const) {
      expect((await s.call("POST", `/api/models/${id}/pull`, { body: { hf_repo: "acme/mixed-GGUF", hf_filename: file } })).status).toBe(202);
      const failed = await ended(id);
      expect(failed, file).toMatchObject({ state: "failed", reason: "unsupported_format" });
      expect(failed.error, file).toContain("model.unsupported_format");
      expect((await s.call("GET", `/api/models/${id}`)).status, file).toBe(404);
    }
    // A GGUF model whose draft is not GGUF: the pull fails and leaves neither file behind, so a retry is not model.file_exists.
    expect((await s.call("POST", "/api/models/good/pull", { body: { hf_repo: "acme/mixed-GGUF", hf_filename: "good.gguf", draft_filename: "text.gguf" } })).status).toBe(202);
    expect(await ended("good")).toMatchObject({ state: "failed", reason: "unsupported_format" });
    expect((await s.call("GET", "/api/models/good")).status).toBe(404);
    expect(readdirSync(store())).toEqual([]);
  });
});

describe("a store migration while a pull is under way", () => {
  it("is refused (409 model.store_migrate_failed, step start, naming the pull); nothing moves, the pull goes on", async () => {
    const hub = await startFakeHub({ repos: { "acme/slow-GGUF": { files: { "slow.gguf": gguf("Slow", 512 * 1024) } } }, bytesPerSecond: 64 * 1024 });
    const s = await startTestServer({ env: { HF_ENDPOINT: hub.endpoint } });
    try {
      setModelsTable(s.config, 'store = "pulled"');
      expect((await s.call("POST", "/api/models/slow/pull", { body: { hf_repo: "acme/slow-GGUF", hf_filename: "slow.gguf" } })).status).toBe(202);
      await until(() => s.call("GET", "/api/models/slow/pull/status").then((r) => r.body.pull), (p) => p.state === "downloading" && p.bytes > 0);
      const moved = join(s.config, "fast");
      const r = await s.call("POST", "/api/settings/models/store/migrate", { body: { store: moved } });
      expect([r.status, r.body.error?.code], JSON.stringify(r.body)).toEqual([409, "model.store_migrate_failed"]);
      expect(r.body.error.details).toMatchObject({ step: "start", pulls: ["slow"] });
      expect(readFileSync(join(s.config, "hal0.toml"), "utf8")).toContain('store = "pulled"');
      expect(existsSync(moved)).toBe(false);
      expect((await s.call("POST", "/api/models/slow/pull/cancel")).body.pull.state).toBe("cancelled");
    } finally {
      await s.close();
      await hub.close();
    }
  });
});

describe("a gated repository, a Hub that limits the rate (a local stand-in)", () => {
  const TOKEN = "hf_notGrantedToken0123456789";
  let hub: FakeHub;
  let s: TestServer;
  const status = (id: string) => s.call("GET", `/api/models/${id}/pull/status`).then((r) => r.body.pull);
  const ended = (id: string) => until(() => status(id), (p) => p !== undefined && ["done", "failed", "cancelled"].includes(p.state));
  const store = () => join(s.config, "pulled");
  const gated = gguf("Gated", 64 * 1024);

  beforeAll(async () => {
    hub = await startFakeHub({ repos: { "acme/gated-GGUF": { files: { "g.gguf": gated } }, "acme/busy-GGUF": { files: { "b.gguf": gguf("Busy", 8192) } } } });
    s = await startTestServer({ env: { HF_ENDPOINT: hub.endpoint, HF_TOKEN: TOKEN } });
    setModelsTable(s.config, 'store = "pulled"');
  });
  afterAll(async () => {
    await s?.close();
    await hub?.close();
  });

  it("a gated file the token's account was not granted fails with reason denied, never naming the token; granted, the retry completes", async () => {
    hub.gate("acme/gated-GGUF", "hf_someoneElsesToken0123");
    const body = { hf_repo: "acme/gated-GGUF", hf_filename: "g.gguf" };
    // The Hub shows a gated repo's listing to anyone: the checks pass, its download is refused.
    expect((await s.call("POST", "/api/models/gated/pull", { body })).status).toBe(202);
    const failed = await ended("gated");
    expect(failed, JSON.stringify(failed)).toMatchObject({ state: "failed", reason: "denied" });
    expect(failed.error).toContain("gated repository");
    expect(existsSync(join(store(), "g.gguf"))).toBe(false);
    hub.gate("acme/gated-GGUF", TOKEN);
    expect((await s.call("POST", "/api/models/gated/pull", { body })).status).toBe(202);
    expect(await ended("gated")).toMatchObject({ state: "done", sha256: sha(gated) });
    // The token went to the Hub only, and is nowhere in what hal0 keeps or answers.
    expect(hub.requests.filter((r) => r.server === "cdn").every((r) => r.authorization === undefined)).toBe(true);
    const kept = ["hal0.db", "hal0.db-wal"].map((f) => join(s.state, f)).filter(existsSync).map((f) => readFileSync(f).toString("latin1")).join("");
    expect(kept).not.toContain(TOKEN);
    expect(JSON.stringify((await s.call("GET", "/api/models/pulls")).body)).not.toContain(TOKEN);
  });

  it("a 429 with Retry-After fails the download (reason network, naming it); a Hub refusing the token is model.hub_denied before anything is queued", async () => {
    hub.misbehave("acme/busy-GGUF", "b.gguf", { refuse: { status: 429, headers: { "retry-after": "30" } } });
    expect((await s.call("POST", "/api/models/busy/pull", { body: { hf_repo: "acme/busy-GGUF", hf_filename: "b.gguf" } })).status).toBe(202);
    const failed = await ended("busy");
    expect(failed).toMatchObject({ state: "failed", reason: "network" });
    expect(failed.error).toContain("answered 429");
    expect(failed.error).toContain("Retry-After: 30 s");
    const refusing = createServer((_req, res) => {
      const message = "Invalid credentials in Authorization header";
      res.writeHead(401, { "content-type": "application/json", "x-error-message": message }).end(JSON.stringify({ error: message }));
    });
    await new Promise<void>((r) => refusing.listen(0, "127.0.0.1", r));
    const t = await startTestServer({ env: { HF_ENDPOINT: `http://127.0.0.1:${(refusing.address() as AddressInfo).port}`, HF_TOKEN: TOKEN } });
    try {
      setModelsTable(t.config, 'store = "pulled"');
      for (const [method, path, body] of [["GET", "/api/hf/search?q=tiny"], ["POST", "/api/models/inspect", { hf_repo: "acme/busy-GGUF" }], ["POST", "/api/models/b/pull", { hf_repo: "acme/busy-GGUF", hf_filename: "b.gguf" }]] as const) {
        const res = await t.call(method, path, body === undefined ? {} : { body });
        expect([res.status, res.body.error?.code], `${path}: ${JSON.stringify(res.body)}`).toEqual([502, "model.hub_denied"]);
        expect(res.body.error.message).toContain("invalid credentials");
        expect(JSON.stringify(res.body)).not.toContain(TOKEN);
      }
      expect((await t.call("GET", "/api/models/pulls")).body.pulls).toEqual([]);
    } finally {
      await t.close();
      await new Promise((r) => refusing.close(r));
    }
  });
});

describe("the checks before a pull or an update, against a Hub that refuses or limits them (a real HTTP stub)", () => {
  /** Runs `fn` against a hal0 serve whose Hub answers every request with `reply`. */
  const withHub = async (reply: (res: import("node:http").ServerResponse) => void, fn: (t: TestServer) => Promise<void>): Promise<void> => {
    const stub = createServer((_req, res) => reply(res));
    await new Promise<void>((r) => stub.listen(0, "127.0.0.1", r));
    const t = await startTestServer({ env: { HF_ENDPOINT: `http://127.0.0.1:${(stub.address() as AddressInfo).port}`, HF_TOKEN: "hf_refusedToken0123456789" } });
    try {
      await fn(t);
    } finally {
      await t.close();
      await new Promise((r) => stub.close(r));
    }
  };

  it("a token the Hub refuses is 502 model.hub_denied, as a pull's checks say, not model.not_found; nothing is queued", async () => {
    await withHub((res) => {
      const message = "Invalid credentials in Authorization header";
      res.writeHead(401, { "content-type": "application/json", "x-error-message": message }).end(JSON.stringify({ error: message }));
    }, async (t) => {
      const res = await t.call("POST", "/api/models/qwen3-30b-a3b/update");
      expect([res.status, res.body.error?.code], JSON.stringify(res.body)).toEqual([502, "model.hub_denied"]);
      expect(res.body.error.message).toContain("invalid credentials");
      expect(JSON.stringify(res.body)).not.toContain("hf_refusedToken");
      expect((await t.call("GET", "/api/models/pulls")).body.pulls).toEqual([]);
    });
  });

  it("a 429 during the checks (a pull's, an update's, search, inspect) is 502 model.hub_unreachable naming its Retry-After, as a download's is", async () => {
    for (const retry of ["30", new Date(Date.now() + 120_000).toUTCString()]) {
      await withHub((res) => res.writeHead(429, { "content-type": "application/json", "retry-after": retry }).end(JSON.stringify({ error: "rate limited" })), async (t) => {
        setModelsTable(t.config, 'store = "pulled"');
        for (const [method, path, body] of [["POST", "/api/models/b/pull", { hf_repo: "acme/busy-GGUF", hf_filename: "b.gguf" }], ["POST", "/api/models/qwen3-30b-a3b/update"], ["GET", "/api/hf/search?q=tiny"], ["POST", "/api/models/inspect", { hf_repo: "acme/busy-GGUF" }]] as const) {
          const res = await t.call(method, path, body === undefined ? {} : { body });
          expect([res.status, res.body.error?.code], `${path}: ${JSON.stringify(res.body)}`).toEqual([502, "model.hub_unreachable"]);
          expect(res.body.error.message, path).toMatch(retry === "30" ? /answered 429.*\(Retry-After: 30 s\)/ : /answered 429.*\(Retry-After: 1[12]\d s\)/);
        }
        expect((await t.call("GET", "/api/models/pulls")).body.pulls).toEqual([]);
      });
    }
  });
});

describe("a split model (a local stand-in for the Hub serving a -0000N-of-00003 set)", () => {
  let hub: FakeHub;
  let s: TestServer;
  const status = (id: string) => s.call("GET", `/api/models/${id}/pull/status`).then((r) => r.body.pull);
  const ended = (id: string) => until(() => status(id), (p) => p !== undefined && ["done", "failed", "cancelled"].includes(p.state));
  const store = () => join(s.config, "pulled");
  const listing = () => (existsSync(store()) ? readdirSync(store()).sort() : []);
  const parts = [gguf("Part1", 64 * 1024), gguf("Part2", 256 * 1024), gguf("Part3", 32 * 1024)];
  const names = Object.keys(splitSet("Big-Q4_K_M", parts));

  beforeAll(async () => {
    hub = await startFakeHub({ repos: {
      "acme/split-GGUF": { files: splitSet("Big-Q4_K_M", parts) },
      "acme/holey-GGUF": { files: splitSet("Big-Q4_K_M", [gguf("Holey1", 4096), gguf("Holey2", 4096), gguf("Holey3", 4096)], [1, 3]) },
    } });
    s = await startTestServer({ env: { HF_ENDPOINT: hub.endpoint } });
    setModelsTable(s.config, 'store = "pulled"');
  });
  afterAll(async () => {
    await s?.close();
    await hub?.close();
  });

  it("a set with a part missing on the Hub is 404 model.split_incomplete before anything is queued or downloaded", async () => {
    const res = await s.call("POST", "/api/models/holey/pull", { body: { hf_repo: "acme/holey-GGUF", hf_filename: names[0] } });
    expect([res.status, res.body.error?.code], JSON.stringify(res.body)).toEqual([404, "model.split_incomplete"]);
    expect(res.body.error.details.missing).toEqual([names[1]]);
    expect((await s.call("GET", "/api/models/pulls")).body.pulls).toEqual([]);
    expect(hub.requests.some((r) => r.path.includes("/resolve/"))).toBe(false);
  });

  it("a connection cut in the last part: failed (network), no part placed, nothing registered; the retry fetches the set and registers it by its first part", async () => {
    hub.misbehave("acme/split-GGUF", names[2]!, { dropAfter: 8192 });
    const body = { hf_repo: "acme/split-GGUF", hf_filename: names[1] };
    expect((await s.call("POST", "/api/models/big/pull", { body })).status).toBe(202);
    const failed = await ended("big");
    expect(failed, JSON.stringify(failed)).toMatchObject({ state: "failed", reason: "network" });
    expect(listing()).toEqual(names.map((n) => `${n}.partial`));
    expect((await s.call("GET", "/api/models/big")).status).toBe(404);
    hub.misbehave("acme/split-GGUF", names[2]!, { dropAfter: null });
    expect((await s.call("POST", "/api/models/big/pull", { body })).status).toBe(202);
    const done = await ended("big");
    expect(done, JSON.stringify(done)).toMatchObject({ state: "done", hf_filename: names[0], sha256: sha(parts[0]!) });
    expect(listing()).toEqual(names);
    for (const [i, n] of names.entries()) expect(sha(readFileSync(join(store(), n))), n).toBe(sha(parts[i]!));
    expect(hub.requests.some((r) => r.server === "cdn" && r.path.startsWith(`/blobs/${sha(parts[2]!)}`) && r.range === "bytes=8192-")).toBe(true);
    // The parts verified before the failure were kept whole: the retry does not fetch them again.
    for (const p of parts.slice(0, 2)) expect(hub.requests.filter((r) => r.server === "cdn" && r.path.startsWith(`/blobs/${sha(p)}`) && r.range === undefined).length).toBe(1);
    expect((await s.call("GET", "/api/models/big")).body).toMatchObject({ hf_repo: "acme/split-GGUF", hf_filename: names[0], path: `pulled/${names[0]}`, sha256: sha(parts[0]!) });
  });

  it("model_update of a split model replaces every part, not only the first (which the old parts would not load beside)", async () => {
    const newer = [gguf("Part1v2", 64 * 1024), gguf("Part2v2", 128 * 1024), gguf("Part3v2", 32 * 1024)];
    for (const [i, n] of names.entries()) hub.replace("acme/split-GGUF", n, newer[i]!);
    const res = await s.call("POST", "/api/models/big/update");
    expect(res.status, JSON.stringify(res.body)).toBe(202);
    expect(await ended("big")).toMatchObject({ state: "done", mode: "update", sha256: sha(newer[0]!) });
    expect(listing()).toEqual(names);
    for (const [i, n] of names.entries()) expect(sha(readFileSync(join(store(), n))), n).toBe(sha(newer[i]!));
    expect((await s.call("GET", "/api/models/big")).body).toMatchObject({ hf_filename: names[0], sha256: sha(newer[0]!) });
  });

  it("a cancel while a later part downloads leaves no part behind and registers nothing", async () => {
    await s.call("DELETE", "/api/models/big");
    for (const n of names) rmSync(join(store(), n), { force: true });
    hub.setRate(64 * 1024);
    try {
      expect((await s.call("POST", "/api/models/big2/pull", { body: { hf_repo: "acme/split-GGUF", hf_filename: names[0] } })).status).toBe(202);
      await untilTrue(() => existsSync(join(store(), `${names[1]}.partial`)), 10_000);
      expect(listing().some((f) => names.includes(f))).toBe(false);
      expect((await s.call("POST", "/api/models/big2/pull/cancel")).body.pull.state).toBe("cancelled");
      expect(listing()).toEqual([]);
      expect((await s.call("GET", "/api/models/big2")).status).toBe(404);
    } finally {
      hub.setRate(null);
    }
  });
});

describe("every part of a split model counts: a pull's progress, the health check, the update check (a local stand-in for the Hub)", () => {
  let hub: FakeHub;
  let s: TestServer;
  const status = (id: string) => s.call("GET", `/api/models/${id}/pull/status`).then((r) => r.body.pull);
  const ended = (id: string) => until(() => status(id), (p) => p !== undefined && ["done", "failed", "cancelled"].includes(p.state));
  const store = () => join(s.config, "pulled");
  const parts = [gguf("Whole1", 64 * 1024), gguf("Whole2", 256 * 1024), gguf("Whole3", 64 * 1024)];
  const names = Object.keys(splitSet("Whole-Q8_0", parts));
  const total = parts.reduce((n, p) => n + p.length, 0);
  const health = async (verify: boolean) => (await s.call("GET", `/api/models/health?model_id=whole${verify ? "&verify=true" : ""}`)).body.models[0];

  beforeAll(async () => {
    hub = await startFakeHub({ repos: { "acme/whole-GGUF": { files: splitSet("Whole-Q8_0", parts) } } });
    s = await startTestServer({ env: { HF_ENDPOINT: hub.endpoint } });
    setModelsTable(s.config, 'store = "pulled"');
  });
  afterAll(async () => {
    await s?.close();
    await hub?.close();
  });

  it("a pull's size is the whole set's and its bytes go on over the later parts (not the first part's alone); the model records every part", async () => {
    hub.setRate(256 * 1024);
    try {
      expect((await s.call("POST", "/api/models/whole/pull", { body: { hf_repo: "acme/whole-GGUF", hf_filename: names[0] } })).status).toBe(202);
      const second = join(store(), `${names[1]}.partial`);
      await untilTrue(() => existsSync(second) && statSync(second).size >= 64 * 1024, 20_000);
      await sleep(400); // a progress report or more since
      const mid = await status("whole");
      expect(mid, JSON.stringify(mid)).toMatchObject({ state: "downloading", size: total });
      expect(mid.bytes).toBeGreaterThan(parts[0]!.length);
      expect(mid.rate).toBeGreaterThan(0);
    } finally {
      hub.setRate(null);
    }
    expect(await ended("whole")).toMatchObject({ state: "done", size: total, bytes: total, sha256: sha(parts[0]!) });
    expect((await s.call("GET", "/api/models/whole")).body).toMatchObject({
      sha256: sha(parts[0]!), size_bytes: parts[0]!.length,
      parts: [1, 2].map((i) => ({ file: names[i], sha256: sha(parts[i]!), size_bytes: parts[i]!.length })),
    });
  });

  it("the health check looks at every part: a part missing, of another size, or (verify=true) with other bytes is a problem naming that part", async () => {
    expect(await health(true)).toMatchObject({ ok: true, problems: [], checked: { header: true, size: true, sha256: true } });
    const at = (i: number) => join(store(), names[i]!);
    const flipped = Buffer.from(parts[1]!);
    flipped[flipped.length - 1] = flipped[flipped.length - 1]! ^ 1;
    writeFileSync(at(1), flipped);
    expect((await health(false)).ok).toBe(true); // same size: only a hash sees it
    expect((await health(true)).problems).toEqual([expect.objectContaining({ code: "model.checksum_mismatch", file: "part", path: at(1), expected: sha(parts[1]!), actual: sha(flipped) })]);
    writeFileSync(at(2), parts[2]!.subarray(0, parts[2]!.length - 100));
    rmSync(at(1));
    expect((await s.call("GET", "/api/models/whole")).body.installed).toBe(false); // a part gone: llama.cpp cannot load it
    expect((await health(false)).problems).toEqual([
      expect.objectContaining({ code: "model.path_missing", file: "part", path: at(1) }),
      expect.objectContaining({ code: "model.size_mismatch", file: "part", path: at(2), expected: parts[2]!.length, actual: parts[2]!.length - 100 }),
    ]);
    writeFileSync(at(1), parts[1]!);
    writeFileSync(at(2), parts[2]!);
    expect((await health(true)).ok).toBe(true);
    expect((await s.call("GET", "/api/models/whole")).body.installed).toBe(true);
  });

  it("a change to a later part alone is an update (named in changed); model_update fetches it, records it, and the slots that run the model re-plan", async () => {
    expect((await s.call("GET", "/api/models/updates/check?model_id=whole")).body.models[0]).toMatchObject({ update_available: false, changed: [] });
    expect((await s.call("PUT", "/api/slots/utility/config", { body: { model: "whole" } })).status).toBe(200);
    const before = (await s.call("GET", "/api/slots/utility/resolved")).body;
    expect(before.spec.model_sha256).toBe(parts.map(sha).join(","));
    const newer = gguf("Whole2v2", 128 * 1024);
    hub.replace("acme/whole-GGUF", names[1]!, newer);
    const row = (await s.call("GET", "/api/models/updates/check?model_id=whole")).body.models[0];
    expect(row, JSON.stringify(row)).toMatchObject({ update_available: true, changed: [names[1]], hub: { sha256: sha(parts[0]!) } });
    const res = await s.call("POST", "/api/models/whole/update");
    expect(res.status, JSON.stringify(res.body)).toBe(202);
    expect(await ended("whole")).toMatchObject({ state: "done", mode: "update" });
    expect(sha(readFileSync(join(store(), names[1]!)))).toBe(sha(newer));
    expect((await s.call("GET", "/api/models/whole")).body).toMatchObject({ sha256: sha(parts[0]!), size_bytes: parts[0]!.length, parts: [{ file: names[1], sha256: sha(newer), size_bytes: newer.length }, { file: names[2], sha256: sha(parts[2]!) }] });
    expect((await health(true)).ok).toBe(true);
    const after = (await s.call("GET", "/api/slots/utility/resolved")).body;
    expect(after.spec_hash).not.toBe(before.spec_hash);
    expect(after.spec.model_sha256).toBe([sha(parts[0]!), sha(newer), sha(parts[2]!)].join(","));
    expect((await s.call("GET", "/api/models/updates/check?model_id=whole")).body.models[0]).toMatchObject({ update_available: false, changed: [] });
  });
});
