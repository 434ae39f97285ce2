import { execFileSync } from "node:child_process";
import { createHash } from "node:crypto";
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { AUTONOMOUS_READ_TOOLS, AUTONOMOUS_WRITE_TOOLS, GATED_TOOLS } from "../../schema/data/seed-tiers.js";
import { startFakeHub, type FakeHub } from "../helpers/fake-hub.js";
import { ggufBytes, modelKvs } from "./gguf-writer.js";
import { ProcessDriver } from "../../reconciler/drivers/process.js";
import { openEventStream, setModelsTable, startTestServer, type TestServer } from "./harness.js";
import { adminClient, callTool } from "./mcp-helpers.js";
import { until } from "../helpers/until.js";

/**
 * Model pulls through hal0 serve's routes and MCP tools, against a local
 * stand-in for the Hub (test/helpers/fake-hub.ts): the Hub's endpoints, a
 * redirect to a second "CDN" origin, Range, the etag headers. Nothing here
 * reaches outside this machine.
 */
const TOKEN = "hf_testtoken_0123456789abcdef";
/** A small GGUF of about `bytes` bytes (one zero-filled F32 tensor). */
const gguf = (o: { arch: string; ctx: number; name?: string }, bytes: number) => ggufBytes({ kvs: modelKvs(o), tensors: [{ name: "w", dims: [Math.ceil(bytes / 4)] }] });
const model = gguf({ arch: "qwen3", ctx: 32768, name: "Tiny Qwen" }, 256 * 1024);
const draft = gguf({ arch: "qwen3", ctx: 32768, name: "Tiny Draft" }, 16 * 1024);
const sha = (b: Buffer) => createHash("sha256").update(b).digest("hex");

/** A port in [from, to] nothing listens on right now. */
async function freePortIn(from: number, to: number): Promise<number> {
  for (let port = from; port <= to; port++) {
    const server = createServer();
    const ok = await new Promise<boolean>((resolve) => server.once("error", () => resolve(false)).listen(port, "127.0.0.1", () => resolve(true)));
    if (ok) {
      await new Promise((r) => server.close(r));
      return port;
    }
  }
  throw new Error(`no free port in ${from}..${to}`);
}

describe("model pulls from the Hub (a local stand-in)", () => {
  let hub: FakeHub;
  let s: TestServer;
  const status = (id: string) => s.call("GET", `/api/models/${id}/pull/status`).then((r) => r.body.pull);
  const ended = (id: string) => until(() => status(id), (p) => p !== undefined && ["done", "failed", "cancelled"].includes(p.state));

  beforeAll(async () => {
    const part = (n: number) => gguf({ arch: "llama", ctx: 4096 }, 1024 * n);
    hub = await startFakeHub({ repos: {
      "acme/tiny-GGUF": { files: { "tiny-q4_k_m.gguf": model, "tiny-draft.gguf": draft, "README.md": { data: Buffer.from("# tiny\n"), lfs: false } } },
      "acme/split-GGUF": { files: { "Big-Q8_0-00001-of-00002.gguf": part(4), "Big-Q8_0-00002-of-00002.gguf": part(2), "mmproj-Big-F16.gguf": part(1), "Big-draft-Q4_0.gguf": part(1), "Big-IQ4_XS.gguf": part(3) } },
    } });
    s = await startTestServer({ env: { HF_ENDPOINT: hub.endpoint, HF_TOKEN: TOKEN } });
    setModelsTable(s.config, 'store = "pulled"');
  });
  afterAll(async () => {
    await s.close();
    await hub.close();
  });

  it("hf_search finds the repo; an operator's pull downloads, verifies and registers it (system:pull, as one change)", async () => {
    const found = await s.call("GET", "/api/hf/search?q=tiny");
    expect(found.status).toBe(200);
    expect(found.body.results.map((r: { id: string }) => r.id)).toEqual(["acme/tiny-GGUF"]);

    const res = await s.call("POST", "/api/models/tiny/pull", { body: { hf_repo: "acme/tiny-GGUF", hf_filename: "tiny-q4_k_m.gguf", draft_filename: "tiny-draft.gguf" } });
    expect(res.status, JSON.stringify(res.body)).toBe(202);
    expect(res.body.pull).toMatchObject({ model_id: "tiny", state: expect.stringMatching(/queued|downloading/) });
    const done = await ended("tiny");
    // size and bytes count every file of the pull: the model's and its draft's.
    expect(done).toMatchObject({ state: "done", sha256: sha(model), size: model.length + draft.length, bytes: model.length + draft.length, requested_by: "operator:owner" });
    const file = join(s.config, "pulled/tiny-q4_k_m.gguf");
    expect(sha(readFileSync(file))).toBe(sha(model));
    expect(readdirSync(join(s.config, "pulled")).filter((f) => f.endsWith(".partial"))).toEqual([]);

    const entry = (await s.call("GET", "/api/models/tiny")).body;
    expect(entry).toMatchObject({ id: "tiny", hf_repo: "acme/tiny-GGUF", hf_filename: "tiny-q4_k_m.gguf", revision: done.commit_sha, sha256: sha(model), architecture: "qwen3", context_length: 32768, installed: true });
    expect(readFileSync(join(s.config, "models.toml"), "utf8")).toContain('draft = "pulled/tiny-draft.gguf"');
    const audit = (await s.call("GET", "/api/activity?limit=20")).body.items as Array<{ actor: string; route: string; outcome: string }>;
    expect(audit.find((r) => r.route === "POST /api/models")).toMatchObject({ actor: "system:pull", outcome: "ok" });

    // The token went to the Hub's own host, never to the CDN it redirects to.
    expect(hub.requests.filter((r) => r.server === "hub" && r.path.includes("/resolve/")).every((r) => r.authorization === `Bearer ${TOKEN}`)).toBe(true);
    expect(hub.requests.filter((r) => r.server === "cdn").length).toBeGreaterThan(0);
    expect(hub.requests.filter((r) => r.server === "cdn").some((r) => r.authorization !== undefined)).toBe(false);
    // No reply and no listing shows the token.
    expect(JSON.stringify((await s.call("GET", "/api/models/pulls")).body)).not.toContain(TOKEN);
  });

  it("/api/models/pulls/events: a snapshot, then each pull's state and progress as server-sent events", async () => {
    hub.replace("acme/tiny-GGUF", "evt.gguf", gguf({ arch: "llama", ctx: 4096 }, 64 * 1024));
    const stream = await openEventStream(s.url, "/api/models/pulls/events", s.operator, /event: state\ndata: .*"model_id":"evt".*"state":"done"/);
    expect(stream.contentType).toContain("text/event-stream");
    await until(async () => stream.text(), (t) => t.includes("event: snapshot"));
    expect((await s.call("POST", "/api/models/evt/pull", { body: { hf_repo: "acme/tiny-GGUF", hf_filename: "evt.gguf" } })).status).toBe(202);
    await Promise.race([stream.done, sleep(8000)]);
    stream.close();
    const states = [...stream.text().matchAll(/event: state\ndata: (.*)/g)].map((m) => JSON.parse(m[1]!).pull).filter((p: { model_id: string }) => p.model_id === "evt").map((p: { state: string }) => p.state);
    expect(states).toEqual(["queued", "downloading", "verifying", "done"].filter((st) => states.includes(st)));
    expect(states.at(-1)).toBe("done");
    expect(states).toContain("downloading");
  });

  it("refuses before queueing: an id already registered, a traversal filename, a repo or file the Hub does not have", async () => {
    const again = await s.call("POST", "/api/models/tiny/pull", { body: { hf_repo: "acme/tiny-GGUF", hf_filename: "tiny-q4_k_m.gguf" } });
    expect(again.body.error?.code, JSON.stringify(again.body)).toBe("model.already_exists");
    for (const bad of ["../../etc/passwd", "/etc/passwd", "https://evil.example/x.gguf", "a/../b.gguf"]) {
      const res = await s.call("POST", "/api/models/evil/pull", { body: { hf_repo: "acme/tiny-GGUF", hf_filename: bad } });
      expect(res.status, bad).toBe(422);
      expect(res.body.error.code, bad).toBe("validation.invalid");
    }
    const missing = await s.call("POST", "/api/models/nope/pull", { body: { hf_repo: "acme/no-such-repo", hf_filename: "x.gguf" } });
    expect([missing.status, missing.body.error.code]).toEqual([404, "model.not_found"]);
    const noFile = await s.call("POST", "/api/models/nope/pull", { body: { hf_repo: "acme/tiny-GGUF", hf_filename: "other.gguf" } });
    expect([noFile.status, noFile.body.error.code]).toEqual([404, "model.not_found"]);
    expect((await s.call("GET", "/api/models/pulls")).body.pulls.map((p: { model_id: string }) => p.model_id)).toEqual(["tiny", "evt"]); // nothing queued by the refusals
  });

  it("an agent's model_pull over MCP waits for an operator; approved, it runs, and a traversal is refused before anything is queued", async () => {
    hub.replace("acme/tiny-GGUF", "tiny-q8_0.gguf", gguf({ arch: "llama", ctx: 8192 }, 4096));
    const c = await adminClient(s.url, "hermes__coder");
    const refused = await callTool(c, "model_pull", { model_id: "evil", hf_repo: "acme/tiny-GGUF", hf_filename: "../x.gguf" });
    expect(refused.isError).toBe(true);
    expect(refused.body.error.code).toMatch(/^(validation\.invalid|mcp\.invalid_arg)$/);
    expect((await s.call("GET", "/api/agent/approvals?state=pending")).body.approvals).toEqual([]);

    const queued = await callTool(c, "model_pull", { model_id: "tiny8", hf_repo: "acme/tiny-GGUF", hf_filename: "tiny-q8_0.gguf" });
    expect(queued.body).toMatchObject({ status: "pending_approval" });
    expect((await s.call("GET", "/api/models/tiny8/pull/status")).body.error.code).toBe("model.pull_not_found");
    const approved = await s.call("POST", `/api/agent/approvals/${queued.body.approval_id}/approve`);
    expect(approved.status, JSON.stringify(approved.body)).toBe(200);
    const done = await ended("tiny8");
    expect(done).toMatchObject({ state: "done", requested_by: "agent:hermes__coder", approved_by: "operator:owner" });
    await c.close();
  });

  it("an agent's pull is judged by the model it would register: opened to autonomous_write, it still waits for a person, its card naming the Hub file", async () => {
    hub.replace("acme/tiny-GGUF", "tiny-open.gguf", gguf({ arch: "llama", ctx: 4096 }, 4096));
    const policy = join(s.config, "policy.toml");
    const was = readFileSync(policy, "utf8");
    writeFileSync(policy, '[tiers]\nautonomous_write = ["model_pull"]\n');
    await s.hal0.box.snapshot();
    try {
      const rest = await s.call("POST", "/api/models/tiny-open/pull", { as: "agent:hermes__ops", body: { hf_repo: "acme/tiny-GGUF", hf_filename: "tiny-open.gguf" } });
      expect(rest.status, JSON.stringify(rest.body)).toBe(202);
      expect(rest.body).toMatchObject({ status: "pending_approval" });
      expect(rest.body.effects.join("\n")).toMatch(/tiny-open downloaded from the Hub's "acme\/tiny-GGUF" "tiny-open\.gguf"/);
      const c = await adminClient(s.url, "hermes__ops");
      const mcp = await callTool(c, "model_pull", { model_id: "tiny-open", hf_repo: "acme/tiny-GGUF", hf_filename: "tiny-open.gguf" });
      await c.close();
      expect(mcp.body, JSON.stringify(mcp.body)).toMatchObject({ status: "pending_approval" });
      expect((await s.call("GET", "/api/models/tiny-open/pull/status")).body.error.code).toBe("model.pull_not_found");
    } finally {
      writeFileSync(policy, was);
      await s.hal0.box.snapshot();
    }
  });

  it("an agent's pull with a draft from another repository names that repository and the draft's file on its card, as it does the model's", async () => {
    hub.replace("acme/tiny-GGUF", "drafted.gguf", gguf({ arch: "llama", ctx: 4096 }, 4096));
    const rest = await s.call("POST", "/api/models/drafted/pull", { as: "agent:hermes__ops", body: { hf_repo: "acme/tiny-GGUF", hf_filename: "drafted.gguf", draft_repo: "acme/split-GGUF", draft_filename: "Big-draft-Q4_0.gguf", mmproj_filename: "README.md" } });
    expect(rest.body, JSON.stringify(rest.body)).toMatchObject({ status: "pending_approval" });
    const card = (await s.call("GET", `/api/agent/approvals/${rest.body.approval_id}`)).body.approval;
    expect(card.summary).toContain("pull acme/tiny-GGUF drafted.gguf with its draft acme/split-GGUF Big-draft-Q4_0.gguf and its projector acme/tiny-GGUF README.md into the store");
    expect((await s.call("POST", `/api/agent/approvals/${rest.body.approval_id}/deny`)).status).toBe(200);
  });

  it("an agent's pull at a revision other than main (a pull request's refs/pr/N, which anyone may open) names that revision on its card", async () => {
    hub.replace("acme/tiny-GGUF", "at-rev.gguf", gguf({ arch: "llama", ctx: 4096 }, 4096));
    const commit = (await s.call("POST", "/api/models/inspect", { body: { hf_repo: "acme/tiny-GGUF" } })).body.commit as string;
    const rest = await s.call("POST", "/api/models/at-rev/pull", { as: "agent:hermes__ops", body: { hf_repo: "acme/tiny-GGUF", hf_filename: "at-rev.gguf", revision: commit } });
    expect(rest.body, JSON.stringify(rest.body)).toMatchObject({ status: "pending_approval" });
    const card = (await s.call("GET", `/api/agent/approvals/${rest.body.approval_id}`)).body.approval;
    expect(card.summary).toContain(`pull acme/tiny-GGUF at-rev.gguf at revision ${commit} into the store`);
    expect((await s.call("POST", `/api/agent/approvals/${rest.body.approval_id}/deny`)).status).toBe(200);
  });

  it("a corrupted byte fails the pull with reason checksum: the file is removed and nothing is registered", async () => {
    hub.replace("acme/tiny-GGUF", "bad.gguf", gguf({ arch: "llama", ctx: 4096 }, 8192));
    hub.corrupt("acme/tiny-GGUF", "bad.gguf", 5000);
    expect((await s.call("POST", "/api/models/bad/pull", { body: { hf_repo: "acme/tiny-GGUF", hf_filename: "bad.gguf" } })).status).toBe(202);
    const failed = await ended("bad");
    expect(failed).toMatchObject({ state: "failed", reason: "checksum" });
    expect(failed.error).toMatch(/sha256 [0-9a-f]{64} is not the Hub's [0-9a-f]{64}/);
    expect(existsSync(join(s.config, "pulled/bad.gguf"))).toBe(false);
    expect(existsSync(join(s.config, "pulled/bad.gguf.partial"))).toBe(false);
    expect((await s.call("GET", "/api/models/bad")).status).toBe(404);
  });

  it("a registration the pipeline refuses (the id taken while it downloaded) fails with reason register; the verified file stays, named", async () => {
    hub.replace("acme/tiny-GGUF", "race.gguf", gguf({ arch: "llama", ctx: 4096 }, 256 * 1024));
    hub.setRate(256 * 1024);
    try {
      expect((await s.call("POST", "/api/models/race/pull", { body: { hf_repo: "acme/tiny-GGUF", hf_filename: "race.gguf" } })).status).toBe(202);
      await until(() => status("race"), (p) => p.state === "downloading" && p.bytes > 0);
      // Meanwhile a person registers another file under the same id.
      const taken = await s.call("POST", "/api/models", { body: { id: "race", path: "models/Qwen3-4B-Q4_K_M.gguf" } });
      expect(taken.status, JSON.stringify(taken.body)).toBe(201);
    } finally {
      hub.setRate(null);
    }
    const failed = await ended("race");
    expect(failed).toMatchObject({ state: "failed", reason: "register" });
    expect(failed.error).toContain(join(s.config, "pulled/race.gguf"));
    expect(failed.error).toContain("stays in the store, unregistered");
    expect(existsSync(join(s.config, "pulled/race.gguf"))).toBe(true);
    expect((await s.call("GET", "/api/models/race")).body.path).toBe("models/Qwen3-4B-Q4_K_M.gguf");
  });

  it("a file a person puts where the pull lands while it downloads is not replaced: failed with reason file_exists; moved away, the pull again takes the kept download", async () => {
    const pulled = gguf({ arch: "llama", ctx: 4096 }, 256 * 1024);
    hub.replace("acme/tiny-GGUF", "mine.gguf", pulled);
    const dest = join(s.config, "pulled/mine.gguf");
    hub.setRate(256 * 1024);
    try {
      expect((await s.call("POST", "/api/models/mine/pull", { body: { hf_repo: "acme/tiny-GGUF", hf_filename: "mine.gguf" } })).status).toBe(202);
      await until(() => status("mine"), (p) => p.state === "downloading" && p.bytes > 0);
      writeFileSync(dest, "a person's own file");
    } finally {
      hub.setRate(null);
    }
    const failed = await ended("mine");
    expect(failed).toMatchObject({ state: "failed", reason: "file_exists" });
    expect(failed.error).toContain(dest);
    expect(readFileSync(dest, "utf8")).toBe("a person's own file");
    expect(sha(readFileSync(`${dest}.partial`))).toBe(sha(pulled));
    expect((await s.call("GET", "/api/models/mine")).status).toBe(404);
    rmSync(dest);
    const cdn = hub.requests.filter((r) => r.server === "cdn").length;
    expect((await s.call("POST", "/api/models/mine/pull", { body: { hf_repo: "acme/tiny-GGUF", hf_filename: "mine.gguf" } })).status).toBe(202);
    expect(await ended("mine")).toMatchObject({ state: "done", sha256: sha(pulled) });
    expect(sha(readFileSync(dest))).toBe(sha(pulled));
    expect(existsSync(`${dest}.partial`)).toBe(false);
    // Taken as downloaded: the retry's Range was refused (the partial file is whole), no byte fetched again.
    expect(hub.requests.filter((r) => r.server === "cdn").slice(cdn).every((r) => r.range !== undefined)).toBe(true);
  });

  it("a model edited while its update downloads keeps the person's edit: failed with reason model_changed, nothing replaced, the download removed", async () => {
    const old = gguf({ arch: "llama", ctx: 4096 }, 64 * 1024);
    hub.replace("acme/tiny-GGUF", "edited.gguf", old);
    expect((await s.call("POST", "/api/models/edited/pull", { body: { hf_repo: "acme/tiny-GGUF", hf_filename: "edited.gguf" } })).status).toBe(202);
    expect((await ended("edited")).state).toBe("done");
    const file = join(s.config, "pulled/edited.gguf");
    hub.replace("acme/tiny-GGUF", "edited.gguf", gguf({ arch: "llama", ctx: 8192 }, 256 * 1024));
    hub.setRate(256 * 1024);
    try {
      expect((await s.call("POST", "/api/models/edited/update")).status).toBe(202);
      await until(() => status("edited"), (p) => p.state === "downloading" && p.bytes > 0);
      // Meanwhile a person points the model at another file.
      const edit = await s.call("PUT", "/api/models/edited", { body: { path: "models/Qwen3-4B-Q4_K_M.gguf" } });
      expect(edit.status, JSON.stringify(edit.body)).toBe(200);
    } finally {
      hub.setRate(null);
    }
    const failed = await ended("edited");
    expect(failed).toMatchObject({ state: "failed", reason: "model_changed" });
    expect(failed.error).toContain(`path ${file} → ${join(s.config, "models/Qwen3-4B-Q4_K_M.gguf")}`);
    expect((await s.call("GET", "/api/models/edited")).body).toMatchObject({ path: "models/Qwen3-4B-Q4_K_M.gguf", sha256: sha(old) });
    expect(sha(readFileSync(file))).toBe(sha(old));
    expect(existsSync(`${file}.partial`)).toBe(false);
  });

  it("cancel stops a download and removes its partial file; delete forgets the pull", async () => {
    hub.replace("acme/tiny-GGUF", "slow.gguf", gguf({ arch: "llama", ctx: 4096 }, 512 * 1024));
    hub.setRate(64 * 1024);
    try {
      expect((await s.call("POST", "/api/models/slow/pull", { body: { hf_repo: "acme/tiny-GGUF", hf_filename: "slow.gguf" } })).status).toBe(202);
      await until(() => status("slow"), (p) => p.state === "downloading" && p.bytes > 0);
      const cancelled = await s.call("POST", "/api/models/slow/pull/cancel");
      expect(cancelled.status, JSON.stringify(cancelled.body)).toBe(200);
      // The reply is the state after the cancel, its partial file already gone.
      expect(cancelled.body.pull.state).toBe("cancelled");
      expect(existsSync(join(s.config, "pulled/slow.gguf.partial"))).toBe(false);
      expect((await ended("slow")).state).toBe("cancelled");
      expect(existsSync(join(s.config, "pulled/slow.gguf.partial"))).toBe(false);
      expect((await s.call("POST", "/api/models/slow/pull/cancel")).body.error.code).toBe("model.pull_not_live");
      expect((await s.call("DELETE", "/api/models/pulls/slow")).body).toEqual({ deleted: "slow", was: "cancelled" });
      expect((await s.call("GET", "/api/models/slow/pull/status")).body.error.code).toBe("model.pull_not_found");
    } finally {
      hub.setRate(null);
    }
  });

  it("the disk filling up mid-pull (a real 1 MiB tmpfs): failed with reason no_space, the partial file removed, nothing registered", async () => {
    const small = mkdtempSync(join(tmpdir(), "hal0-tmpfs-"));
    // Root mounts a tmpfs here (CI runs as root); a mount that fails fails the test, it is never skipped.
    execFileSync("mount", ["-t", "tmpfs", "-o", "size=1m", "tmpfs", small]);
    const hal0 = readFileSync(join(s.config, "hal0.toml"), "utf8");
    try {
      writeFileSync(join(s.config, "hal0.toml"), hal0.replace('store = "pulled"', `store = ${JSON.stringify(small)}`));
      hub.replace("acme/tiny-GGUF", "huge.gguf", gguf({ arch: "llama", ctx: 4096 }, 3 * 1024 * 1024));
      expect((await s.call("POST", "/api/models/huge/pull", { body: { hf_repo: "acme/tiny-GGUF", hf_filename: "huge.gguf" } })).status).toBe(202);
      const failed = await ended("huge");
      expect(failed).toMatchObject({ state: "failed", reason: "no_space" });
      expect(failed.error).toContain("the disk filled up");
      expect(readdirSync(small)).toEqual([]);
      expect((await s.call("GET", "/api/models/huge")).status).toBe(404);
    } finally {
      writeFileSync(join(s.config, "hal0.toml"), hal0);
      execFileSync("umount", [small]);
      rmSync(small, { recursive: true, force: true });
    }
  });

  it("model_inspect of a Hub repo (hf_repo or hf_url): GGUF files with size and quant, split groups, drafts, projectors", async () => {
    const res = await s.call("POST", "/api/models/inspect", { body: { hf_repo: "acme/split-GGUF" } });
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    expect(res.body.files.map((f: { file: string; quant: string; role: string }) => `${f.file} ${f.quant} ${f.role}`)).toEqual([
      "Big-IQ4_XS.gguf IQ4_XS model", "Big-Q8_0-00001-of-00002.gguf Q8_0 model", "Big-Q8_0-00002-of-00002.gguf Q8_0 model", "Big-draft-Q4_0.gguf Q4_0 draft", "mmproj-Big-F16.gguf F16 mmproj",
    ]);
    expect(res.body.splits).toEqual([{ file: "Big-Q8_0-00001-of-00002.gguf", parts: ["Big-Q8_0-00001-of-00002.gguf", "Big-Q8_0-00002-of-00002.gguf"], size: expect.any(Number), quant: "Q8_0", complete: true }]);
    expect(res.body.drafts.map((d: { file: string }) => d.file)).toEqual(["Big-draft-Q4_0.gguf"]);
    expect(res.body.projectors.map((d: { file: string }) => d.file)).toEqual(["mmproj-Big-F16.gguf"]);
    expect(res.body.commit).toMatch(/^[0-9a-f]{40}$/);
    const byUrl = await s.call("POST", "/api/models/inspect", { body: { hf_url: `${hub.endpoint}/acme/split-GGUF/blob/main/Big-IQ4_XS.gguf` } });
    expect(byUrl.body.file).toMatchObject({ file: "Big-IQ4_XS.gguf", quant: "IQ4_XS", sha256: expect.stringMatching(/^[0-9a-f]{64}$/) });
    const elsewhere = await s.call("POST", "/api/models/inspect", { body: { hf_url: "https://evil.example/acme/split-GGUF" } });
    expect([elsewhere.status, elsewhere.body.error.code]).toEqual([422, "validation.invalid"]);
    const missing = await s.call("POST", "/api/models/inspect", { body: { hf_repo: "acme/nothing-here" } });
    expect([missing.status, missing.body.error.code]).toEqual([404, "model.not_found"]);
  });

  it("model_update_check of an id models.toml lacks is 404 model.not_found (as model_health_check says), not an empty list that reads as up to date", async () => {
    const res = await s.call("GET", "/api/models/updates/check?model_id=nope");
    expect([res.status, res.body.error?.code], JSON.stringify(res.body)).toEqual([404, "model.not_found"]);
    expect((await s.call("GET", "/api/models/health?model_id=nope")).body.error.code).toBe("model.not_found");
  });

  it("a slot using the pulled model starts; an update in place (model_update_check, model_update) re-plans it with model_sha256", async () => {
    const port = await freePortIn(8150, 8187); // inside the box's [slots] port range, clear of its slots' ports
    const moved = await s.call("PUT", "/api/slots/utility/config", { body: { model: "tiny", port } });
    expect(moved.status, JSON.stringify(moved.body)).toBe(200);
    try {
      const started = await s.call("POST", "/api/slots/utility/restart");
      expect(started.status, JSON.stringify(started.body)).toBe(200);
      expect((await fetch(`http://127.0.0.1:${port}/health`)).status).toBe(200);
      const props = (await (await fetch(`http://127.0.0.1:${port}/props`)).json()) as { argv: string[] };
      expect(props.argv).toContain(join(s.config, "pulled/tiny-q4_k_m.gguf"));

      expect((await s.call("GET", "/api/models/updates/check?model_id=tiny")).body.models[0]).toMatchObject({ id: "tiny", update_available: false, reason: "up to date" });
      expect((await s.call("POST", "/api/models/tiny/update")).body.error.code).toBe("model.up_to_date");
      const newer = gguf({ arch: "qwen3", ctx: 40960, name: "Tiny Qwen v2" }, 256 * 1024 + 4096);
      hub.replace("acme/tiny-GGUF", "tiny-q4_k_m.gguf", newer);
      const check = (await s.call("GET", "/api/models/updates/check")).body;
      expect(check.models.find((m: { id: string }) => m.id === "tiny")).toMatchObject({ update_available: true, local: { sha256: sha(model) }, hub: { sha256: sha(newer) } });
      const before = (await s.call("GET", "/api/slots/utility/resolved")).body.spec_hash;
      expect((await s.call("POST", "/api/models/tiny/update")).status).toBe(202);
      expect(await ended("tiny")).toMatchObject({ state: "done", mode: "update", sha256: sha(newer) });
      expect(sha(readFileSync(join(s.config, "pulled/tiny-q4_k_m.gguf")))).toBe(sha(newer));
      expect((await s.call("GET", "/api/models/tiny")).body).toMatchObject({ sha256: sha(newer), size_bytes: newer.length });
      // Same path, new bytes: the slot's spec changes with the model's sha256, so the next apply replaces it.
      const after = (await s.call("GET", "/api/slots/utility/resolved")).body;
      expect(after.spec_hash).not.toBe(before);
      expect(after.spec.model_sha256).toBe(sha(newer));
      const planned = await s.call("POST", "/api/plans", { body: { edits: [{ file: "slots/utility.toml", op: "set", path: ["description"], value: "serves the pulled model" }] } });
      expect(planned.status, JSON.stringify(planned.body)).toBe(201);
      expect(planned.body.plan.changes.find((c: { address: string }) => c.address === "slot.utility")).toMatchObject({ action: "replace", changed_paths: ["model_sha256"] });
    } finally {
      await new ProcessDriver({ stateDir: s.state }).stop("utility", 2);
    }
  });
});

describe("each model tool answers in its seed tier over MCP (an agent, the SDK's client)", () => {
  let hub: FakeHub;
  let s: TestServer;
  beforeAll(async () => {
    hub = await startFakeHub({ repos: { "acme/tiny-GGUF": { files: { "tiny-q4_k_m.gguf": model, "tiny-q8_0.gguf": draft } } } });
    s = await startTestServer({ env: { HF_ENDPOINT: hub.endpoint } });
    setModelsTable(s.config, 'store = "pulled"\nroots = ["models"]');
  });
  afterAll(async () => {
    await s.close();
    await hub.close();
  });

  it("reads run, pull cancel/delete run (autonomous-write), pulls, updates, adds, store moves and config writes wait for an operator", async () => {
    // A pulled model with a newer file on the Hub (so model_update passes its checks), and a GGUF under a root not yet registered (model_add).
    expect((await s.call("POST", "/api/models/tiny0/pull", { body: { hf_repo: "acme/tiny-GGUF", hf_filename: "tiny-q4_k_m.gguf" } })).status).toBe(202);
    await until(() => s.call("GET", "/api/models/tiny0/pull/status").then((r) => r.body.pull), (p) => p.state === "done");
    hub.replace("acme/tiny-GGUF", "tiny-q4_k_m.gguf", gguf({ arch: "qwen3", ctx: 32768 }, 300 * 1024));
    writeFileSync(join(s.config, "models/loose.gguf"), gguf({ arch: "llama", ctx: 4096 }, 4096));
    const calls: Array<[string, Record<string, unknown>]> = [
      ["hf_search", { q: "tiny" }], ["model_inspect", { hf_repo: "acme/tiny-GGUF" }], ["model_catalogue", {}], ["model_pulls_list", {}],
      ["model_pull_status", { model_id: "nope" }], ["model_update_check", {}], ["model_health_check", {}], ["model_config_read", {}],
      ["model_inspect_draft", { path: "models/loose.gguf" }], ["model_store", {}],
      ["model_pull_cancel", { model_id: "nope" }], ["model_pull_delete", { model_id: "nope" }],
      ["model_pull", { model_id: "tiny8", hf_repo: "acme/tiny-GGUF", hf_filename: "tiny-q8_0.gguf" }], ["model_update", { model_id: "tiny0" }],
      ["model_add", { path: "models/loose.gguf", id: "loose" }], ["model_store_set", { store: "elsewhere" }], ["model_store_migrate", { store: "elsewhere" }],
      ["model_config_write", { text: readFileSync(join(s.config, "models.toml"), "utf8") }],
    ];
    const tierOf = (tool: string) => (GATED_TOOLS.some((t) => t.tool === tool) ? "gated" : AUTONOMOUS_WRITE_TOOLS.some((t) => t.tool === tool) ? "autonomous-write" : AUTONOMOUS_READ_TOOLS.some((t) => t.tool === tool) ? "autonomous-read" : "none");
    const c = await adminClient(s.url, "hermes__coder");
    const seen: string[] = [];
    for (const [tool, args] of calls) {
      const res = await callTool(c, tool, args);
      const pending = res.body?.status === "pending_approval";
      const refused = res.body?.error?.code === "mcp.tool_not_allowed" || res.body?.error?.code === "mcp.unknown_tool";
      seen.push(`${tool} ${tierOf(tool)} ${refused ? "refused" : pending ? "pending" : "ran"}${res.isError && !refused ? ` (${res.body?.error?.code})` : ""}`);
    }
    await c.close();
    // A read or autonomous write runs (its own answer, an error such as model.pull_not_found included); a gated call is queued.
    expect(seen.map((l) => l.replace(/ \(.*\)$/, ""))).toEqual(calls.map(([tool]) => `${tool} ${tierOf(tool)} ${tierOf(tool) === "gated" ? "pending" : "ran"}`));
    expect(seen.filter((l) => l.includes("(")).sort()).toEqual([
      "model_pull_cancel autonomous-write ran (model.pull_not_found)", "model_pull_delete autonomous-write ran (model.pull_not_found)", "model_pull_status autonomous-read ran (model.pull_not_found)",
    ]);
  });
});

describe("model_update is judged by the change it commits", () => {
  let hub: FakeHub;
  let s: TestServer;
  beforeAll(async () => {
    hub = await startFakeHub({ repos: { "acme/tiny-GGUF": { files: { "tiny-q4_k_m.gguf": model } } } });
    s = await startTestServer({ env: { HF_ENDPOINT: hub.endpoint } });
    setModelsTable(s.config, 'store = "pulled"\nroots = ["models"]');
    // A policy that opens model_update for hermes__ops: what gates its call can only be what the update does.
    writeFileSync(join(s.config, "policy.toml"), '[agents.hermes__ops]\nautonomous_write = ["model_update"]\n');
  });
  afterAll(async () => {
    await s.close();
    await hub.close();
  });

  it("opened in policy.toml, an agent's update of a Hub model (a new commit for its bytes) waits for a person, its card naming the commit; approved, it runs", async () => {
    expect((await s.call("POST", "/api/models/tiny/pull", { body: { hf_repo: "acme/tiny-GGUF", hf_filename: "tiny-q4_k_m.gguf" } })).status).toBe(202);
    const pulled = await until(() => s.call("GET", "/api/models/tiny/pull/status").then((r) => r.body.pull), (p) => p.state === "done");
    const newer = gguf({ arch: "qwen3", ctx: 32768 }, 300 * 1024);
    hub.replace("acme/tiny-GGUF", "tiny-q4_k_m.gguf", newer);
    const commit = (await s.call("GET", "/api/models/updates/check?model_id=tiny")).body.models[0].hub.revision as string;
    expect(commit).not.toBe(pulled.commit_sha);
    const c = await adminClient(s.url, "hermes__ops");
    const res = await callTool(c, "model_update", { model_id: "tiny" });
    await c.close();
    expect(res.body, JSON.stringify(res.body)).toMatchObject({ status: "pending_approval" });
    expect((res.body.effects as string[]).join("\n")).toContain(`has model tiny downloaded from the Hub's "acme/tiny-GGUF" "tiny-q4_k_m.gguf" at revision "${commit}"`);
    // Nothing was queued for download: the pull's record is still the first one's.
    expect((await s.call("GET", "/api/models/tiny/pull/status")).body.pull).toMatchObject({ state: "done", mode: "pull", sha256: sha(model) });
    const approved = await s.call("POST", `/api/agent/approvals/${res.body.approval_id}/approve`);
    expect(approved.body, JSON.stringify(approved.body)).toMatchObject({ approval: { state: "executed" } });
    expect(await until(() => s.call("GET", "/api/models/tiny/pull/status").then((r) => r.body.pull), (p) => p.mode === "update" && p.state === "done")).toMatchObject({ sha256: sha(newer) });
    expect((await s.call("GET", "/api/models/tiny")).body).toMatchObject({ revision: commit, sha256: sha(newer) });
  });
});
