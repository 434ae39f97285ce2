import { execFileSync } from "node:child_process";
import { chmodSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createServer, type Server } from "node:http";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { main } from "../../cli/index.js";
import { ggufBytes, modelKvs } from "../server/gguf-writer.js";
import { captureIo } from "./helpers.js";
import { EPHEMERAL_RANGE_FILE, parsePortList } from "../../reconciler/doctor.js";

/** `hal0 doctor`'s runtime and tree rows: a docker engine is asked GET /_ping and /version over its socket. */
let dir: string;
let engine: Server;
const socket = () => join(dir, "engine.sock");

async function doctor(env: Record<string, string>, hal0toml: string) {
  const config = join(dir, `etc-${Math.random().toString(36).slice(2)}`);
  mkdirSync(config);
  writeFileSync(join(config, "hal0.toml"), hal0toml);
  const io = captureIo(env, dir);
  const code = await main(["doctor", "--json", "--config", config, "--state", join(dir, "state")], io);
  const rows = (JSON.parse(io.out()).rows as Array<{ check: string; status: string; message: string }>);
  return { code, row: (check: string) => rows.find((r) => r.check === check)! };
}

/** `hal0 doctor --json` of a whole tree (files by path; `exec` ones made executable). */
async function doctorTree(files: Record<string, string | Buffer>, exec: readonly string[] = []) {
  const config = join(dir, `tree-${Math.random().toString(36).slice(2)}`);
  for (const [rel, text] of Object.entries(files)) {
    mkdirSync(dirname(join(config, rel)), { recursive: true });
    writeFileSync(join(config, rel), text);
  }
  for (const rel of exec) chmodSync(join(config, rel), 0o755);
  const io = captureIo({}, dir);
  const code = await main(["doctor", "--json", "--config", config, "--state", join(dir, "state")], io);
  const rows = (JSON.parse(io.out()).rows as Array<{ check: string; status: string; message: string; hint: string }>);
  return { config, code, rows, row: (check: string) => rows.find((r) => r.check === check)! };
}

/** What llama.cpp's llama-server prints for --version (on stderr; build 9749, recorded from the real one). */
const LLAMA_VERSION = "version: 9749 (d32676d77)\nbuilt with GNU 12.2.0 for Linux x86_64\n";

function oneSlot(runner: string, modelPath: string, extra: Record<string, string | Buffer> = {}): Record<string, string | Buffer> {
  return {
    "profiles.toml": `[profile.fake]\nrunner = ${runner}\ndevice_class = "cpu"\n`,
    "models.toml": `[model.tiny]\npath = ${JSON.stringify(modelPath)}\n`,
    "tiny.gguf": "GGUF",
    "slots/chat.toml": `profile = "fake"\nmodel = "tiny"\nport = 8081\n`,
    ...extra,
  };
}

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "hal0-doctor-"));
  engine = createServer((req, res) => {
    if (req.url === "/_ping") res.end("OK");
    else if (req.url === "/version") res.end(JSON.stringify({ Version: "27.5.1" }));
    else res.writeHead(404).end();
  });
  await new Promise<void>((resolve) => engine.listen(socket(), resolve));
});

afterAll(async () => {
  await new Promise((resolve) => engine.close(resolve));
  rmSync(dir, { recursive: true, force: true });
});

describe("hal0 doctor", () => {
  it("runtime docker: ok with the engine's version when the socket answers /_ping", async () => {
    const { code, row } = await doctor({ DOCKER_HOST: `unix://${socket()}` }, '[slots]\nruntime = "docker"\n');
    expect(code).toBe(0);
    expect(row("runtime")).toMatchObject({ status: "ok", message: expect.stringContaining("docker engine 27.5.1") });
  });

  it("runtime docker: fail (exit 1) when nothing answers; [slots] docker_host wins over DOCKER_HOST", async () => {
    const { code, row } = await doctor({ DOCKER_HOST: `unix://${socket()}` }, `[slots]\nruntime = "docker"\ndocker_host = "unix://${join(dir, "nobody.sock")}"\n`);
    expect(code).toBe(1);
    expect(row("runtime")).toMatchObject({ status: "fail", message: expect.stringContaining("nobody.sock") });
  });

  it("runner and model_files: fail (exit 1) for a runner on no PATH nor bin/ and a model file that does not exist", async () => {
    const { code, row, config } = await doctorTree(oneSlot('["no-such-runner-xyz"]', "models/nope.gguf"));
    expect(code).toBe(1);
    expect(row("runner:no-such-runner-xyz")).toMatchObject({ status: "fail", message: "the runner `no-such-runner-xyz` is not on PATH nor in hal0's bin/ (slots: chat)" });
    expect(row("model_files")).toMatchObject({ status: "fail", message: `the model file of slot chat does not exist: ${join(config, "models/nope.gguf")}` });
  });

  it("runner: ok with what `<runner> --version` printed (llama-server's version line); model_files ok", async () => {
    const { code, row, rows, config } = await doctorTree(oneSlot('["./llama-server"]', "tiny.gguf", { "llama-server": `#!/bin/sh\nprintf '${LLAMA_VERSION.replace(/\n/g, "\\n")}' >&2\n` }), ["llama-server"]);
    expect(code).toBe(0);
    expect(row("runner:./llama-server")).toMatchObject({ status: "ok", message: `${join(config, "llama-server")}: version: 9749 (d32676d77) (slots: chat)` });
    expect(row("model_files")).toMatchObject({ status: "ok", message: "the model files of 1 enabled slot(s) exist and are readable" });
    expect(rows.map((r) => r.check).slice(0, 5)).toEqual(["tree", "state_folder", "runtime", "runner:./llama-server", "model_files"]);
  });

  it("every check it reports is named by `hal0 doctor --help`, the README's command row and docs/operations.md", async () => {
    const { rows } = await doctorTree(oneSlot('["./llama-server"]', "tiny.gguf", { "llama-server": `#!/bin/sh\nprintf '${LLAMA_VERSION.replace(/\n/g, "\\n")}' >&2\n` }), ["llama-server"]);
    const checks = [...new Set(rows.map((r) => r.check.replace(/^runner:.*/, "runner:<prefix>")))];
    expect(checks.length).toBeGreaterThanOrEqual(10);
    const root = join(import.meta.dirname, "../..");
    const readme = readFileSync(join(root, "README.md"), "utf8").split("\n").find((l) => l.startsWith("| `hal0 doctor"))!;
    const ops = readFileSync(join(root, "docs/operations.md"), "utf8").split("- **`hal0 doctor")[1]!.split("\n- ")[0]!;
    const help = captureIo({}, dir);
    expect(await main(["doctor", "--help"], help)).toBe(0);
    for (const check of checks) {
      expect(help.out(), `--help: ${check}`).toContain(check);
      expect(readme, `README: ${check}`).toContain(`\`${check}\``);
      expect(ops, `operations.md: ${check}`).toContain(`\`${check}\``);
    }
  });

  it("text: every row's message starts in one column, a runner's long prefix included, and each hint under it", async () => {
    const config = join(dir, "tree-text");
    const runner = "./a-runner-with-a-rather-long-name";
    for (const [rel, text] of Object.entries(oneSlot(JSON.stringify([runner]), "tiny.gguf", { [runner.slice(2)]: `#!/bin/sh\necho 1.0\n` }))) {
      mkdirSync(dirname(join(config, rel)), { recursive: true });
      writeFileSync(join(config, rel), text);
    }
    chmodSync(join(config, runner.slice(2)), 0o755);
    const io = captureIo({}, dir);
    await main(["doctor", "--config", config, "--state", join(dir, "state")], io);
    const lines = io.out().trimEnd().split("\n");
    const rows = lines.filter((l) => /^(ok|warn|fail) /.test(l));
    expect(rows.some((l) => l.includes(`runner:${runner} `))).toBe(true);
    const column = (l: string) => /^(\S+\s+\S+\s+)/.exec(l)![1]!.length;
    expect(new Set(rows.map(column)).size, rows.join("\n")).toBe(1);
    for (const hint of lines.filter((l) => l.trimStart().startsWith("hint: "))) expect(hint.indexOf("hint: ")).toBe(column(rows[0]!));
  });

  it("slot_ports: warn (exit 0) for enabled slots listening in the kernel's ephemeral port range, naming each and how to reserve them; ok below it", async () => {
    const [low, high] = readFileSync(EPHEMERAL_RANGE_FILE, "utf8").trim().split(/\s+/).map(Number) as [number, number];
    const llama = { "llama-server": `#!/bin/sh\nprintf '${LLAMA_VERSION.replace(/\n/g, "\\n")}' >&2\n` };
    const outside = await doctorTree(oneSlot('["./llama-server"]', "tiny.gguf", llama), ["llama-server"]);
    expect(outside.row("slot_ports")).toEqual({ check: "slot_ports", status: "ok", message: `no enabled slot listens in the kernel's ephemeral port range (${low}–${high})`, hint: "" });
    const [a, b] = [low + 100, low + 200];
    const files = {
      ...oneSlot('["./llama-server"]', "tiny.gguf", llama),
      "hal0.toml": "[slots]\nport_range_start = 1024\nport_range_end = 65535\n",
      "slots/chat.toml": `profile = "fake"\nmodel = "tiny"\nport = ${b}\n`,
      "slots/side.toml": `profile = "fake"\nmodel = "tiny"\nport = ${a}\n`,
      "slots/off.toml": `profile = "fake"\nmodel = "tiny"\nport = ${low + 300}\nenabled = false\n`,
    };
    const inside = await doctorTree(files, ["llama-server"]);
    expect(inside.code).toBe(0);
    expect(inside.row("slot_ports")).toMatchObject({
      status: "warn",
      message: `slot side (port ${a}), slot chat (port ${b}) listen in the kernel's ephemeral port range (${low}–${high}): an outgoing connection can take the port while the slot is stopped, and it then fails to start (slot.port_in_use)`,
      hint: expect.stringContaining(`sysctl -w net.ipv4.ip_local_reserved_ports=${a},${b}`),
    });
  });

  it("slot_ports: a reserved port (ip_local_reserved_ports: single ports and spans) is not warned about", () => {
    const reserved = parsePortList("8081,40000-40010\n");
    expect([8081, 8082, 39999, 40000, 40005, 40010, 40011].map(reserved)).toEqual([true, false, false, true, true, true, false]);
    expect(parsePortList("\n")(8081)).toBe(false);
  });

  it("runner: fail for a runner file without execute permission (slot.runner_missing, not executable), with the chmod hint", async () => {
    const { code, row, config } = await doctorTree(oneSlot('["./plain"]', "tiny.gguf", { plain: "#!/bin/sh\n" }));
    expect(code).toBe(1);
    expect(row("runner:./plain")).toMatchObject({ status: "fail", message: `the runner \`./plain\` is not executable: ${join(config, "plain")} (slots: chat)`, hint: expect.stringContaining("chmod +x") });
  });

  it("model_files: ok for a GGUF whose training context is below the slot's ctx_size (advisory: validate warns, the doctor does not fail)", async () => {
    const llama = `#!/bin/sh\nprintf '${LLAMA_VERSION.replace(/\n/g, "\\n")}' >&2\n`;
    const gguf = ggufBytes({ kvs: modelKvs({ arch: "llama", ctx: 4096 }) });
    const { code, row } = await doctorTree(oneSlot('["./llama-server"]', "tiny.gguf", { "llama-server": llama, "tiny.gguf": gguf }), ["llama-server"]);
    expect(code).toBe(0);
    expect(row("model_files")).toMatchObject({ status: "ok", message: "the model files of 1 enabled slot(s) exist and are readable" });
  });

  it("runner: warn when --version gives no answer within 2 s, and the runner is stopped", async () => {
    const pidFile = join(dir, `pid-${Math.random().toString(36).slice(2)}`);
    const { code, row } = await doctorTree(oneSlot('["./mute"]', "tiny.gguf", { mute: `#!/bin/sh\necho $$ > ${pidFile}\nexec sleep 30\n` }), ["mute"]);
    expect(code).toBe(0);
    expect(row("runner:./mute")).toMatchObject({ status: "warn", message: expect.stringContaining("no version from --version (no answer within 2 s; stopped it)") });
    const pid = Number(readFileSync(pidFile, "utf8"));
    expect(() => process.kill(pid, 0)).toThrow();
  });

  it.runIf(process.getuid?.() === 0)("state_folder: fail on a read-only file system (a real tmpfs remounted ro), saying so, not 'fix its permissions'", async () => {
    const ro = join(dir, "ro-state");
    mkdirSync(ro);
    // mode=755: a tmpfs root is 1777 by default, a shared folder hal0 refuses as a state folder (state.shared).
    execFileSync("mount", ["-t", "tmpfs", "-o", "size=1m,ro,mode=755", "tmpfs", ro]);
    try {
      const io = captureIo({}, dir);
      const config = join(dir, "ro-config");
      mkdirSync(config);
      writeFileSync(join(config, "hal0.toml"), "");
      expect(await main(["doctor", "--json", "--config", config, "--state", ro], io)).toBe(1);
      // The failure document every command's --json failure is, with the rows beside it.
      expect(JSON.parse(io.out())).toMatchObject({ ok: false, exit_code: 1, error_count: 0, warning_count: 0, diagnostics: [] });
      const row = (JSON.parse(io.out()).rows as Array<{ check: string }>).find((r) => r.check === "state_folder");
      expect(row).toMatchObject({ status: "fail", message: `${ro} is on a read-only file system`, hint: expect.stringContaining("remount it read-write") });
    } finally {
      execFileSync("umount", ["-l", ro]);
    }
  });

  it("state_folder: fail on a full disk (a real tmpfs, filled), where the folder's mode alone says writable; warn when little is left", async () => {
    const disk = join(dir, "full-state");
    mkdirSync(disk);
    execFileSync("mount", ["-t", "tmpfs", "-o", "size=2m,mode=755", "tmpfs", disk]);
    try {
      const config = join(dir, "full-config");
      mkdirSync(config);
      writeFileSync(join(config, "hal0.toml"), "");
      const state = join(disk, "state");
      mkdirSync(state, { mode: 0o700 });
      const doctorRow = async () => {
        const io = captureIo({}, dir);
        const code = await main(["doctor", "--json", "--config", config, "--state", state], io);
        return { code, row: (JSON.parse(io.out()).rows as Array<{ check: string }>).find((r) => r.check === "state_folder") };
      };
      // 2 MiB free: writable, with little room.
      expect((await doctorRow()).row).toMatchObject({ status: "warn", message: expect.stringMatching(new RegExp(`^${state} is writable, with [12]\\.\\d MiB free on its disk$`)) });
      try {
        writeFileSync(join(disk, "filler"), Buffer.alloc(4 * 1024 * 1024));
      } catch (err) {
        expect((err as NodeJS.ErrnoException).code).toBe("ENOSPC");
      }
      const full = await doctorRow();
      expect(full.code).toBe(1);
      expect(full.row).toMatchObject({ status: "fail", message: `${state} is on a full disk (0 bytes free): hal0 cannot record plans, approvals or what it starts`, hint: `free space on the disk that holds ${state}` });
    } finally {
      execFileSync("umount", ["-l", disk]);
    }
  });

  it("tree: fail (exit 1) when the tree does not compile; the Hermes rows are not checked", async () => {
    const { code, row } = await doctor({}, "[slots]\nruntime = 3\n");
    expect(code).toBe(1);
    expect(row("tree").status).toBe("fail");
    expect(row("hermes_profiles_mcp")).toMatchObject({ status: "warn", message: expect.stringContaining("does not compile") });
  });
});
