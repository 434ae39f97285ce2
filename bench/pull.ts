import { execFile, spawn } from "node:child_process";
import { createHash, randomFillSync } from "node:crypto";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { packageRoot } from "../reconciler/package-root.js";
import { startFakeHub } from "../test/helpers/fake-hub.js";
import { ggufBytes, modelKvs } from "../test/server/gguf-writer.js";

const exec = promisify(execFile);
const HAL0 = join(packageRoot(), "bin/hal0.cjs");

/**
 * A 512 MiB pull from a local stand-in Hub (its redirect to a second "CDN"
 * origin, the etag headers), `hal0 model pull` as a whole process (fetch,
 * hash while downloading, write, fsync, rename, register) beside `curl -sL
 * URL | sha256sum` of the same URL (fetch and hash) in the same run.
 * Throughput = bytes / time: curl's whole pipeline, hal0's download phase
 * (its process start, Hub checks and registration are printed apart);
 * target: hal0 ≥ 0.9× curl. hal0 also writes and fsyncs the file, which
 * curl | sha256sum does not.
 */
export async function benchPull({ mib = 512, rounds: ROUNDS = 3 }: { mib?: number; rounds?: number } = {}): Promise<string[]> {
  // The tensor data: random F32 weights behind a GGUF header (a pull refuses a file that is not GGUF).
  const tensor = mib * 1024 * 1024;
  const data = ggufBytes({ kvs: modelKvs({ arch: "llama", ctx: 4096 }), tensors: [{ name: "w", dims: [tensor / 4] }] });
  randomFillSync(data, data.length - tensor);
  const SIZE = data.length;
  const sha = createHash("sha256").update(data).digest("hex");
  const hub = await startFakeHub({ repos: { "bench/Big-GGUF": { files: { "big.gguf": data } } } });
  const base = mkdtempSync(join(tmpdir(), "hal0-bench-pull-"));
  try {
    const url = `${hub.endpoint}/bench/Big-GGUF/resolve/main/big.gguf`;
    const curl: number[] = [];
    const hal0: number[] = [];
    const phase: number[] = [];
    for (let round = 0; round < ROUNDS; round++) {
      // Interleaved, so neither side gets a warmer machine.
      const t0 = performance.now();
      const { stdout } = await exec("bash", ["-c", `set -o pipefail; curl -sL ${JSON.stringify(url)} | sha256sum`], { maxBuffer: 1 << 20 });
      curl.push(performance.now() - t0);
      if (!stdout.startsWith(sha)) throw new Error(`curl | sha256sum printed ${stdout}`);

      const config = join(base, `box-${round}`);
      mkdirSync(config, { recursive: true });
      writeFileSync(join(config, "hal0.toml"), `[models]\nstore = "store"\n`);
      const run = await pullTimed(config, join(base, `state-${round}`), hub.endpoint);
      hal0.push(run.wall);
      phase.push(run.download);
      rmSync(config, { recursive: true, force: true });
    }
    const mibs = (ms: number) => SIZE / 1024 / 1024 / (ms / 1000);
    const best = (xs: number[]) => Math.min(...xs);
    const ratio = mibs(best(phase)) / mibs(best(curl));
    return [
      `${mib} MiB pull from a local stand-in Hub (redirect to a second origin), best of ${ROUNDS}, interleaved:`,
      `  hal0's download (fetch, sha256 while downloading, write, fsync: downloading → verifying)  ${mibs(best(phase)).toFixed(0)} MiB/s  (${(best(phase) / 1000).toFixed(2)} s)`,
      `  curl -sL URL | sha256sum (fetch and hash: the anchor)                                     ${mibs(best(curl)).toFixed(0)} MiB/s  (${(best(curl) / 1000).toFixed(2)} s)`,
      `  → ${ratio.toFixed(2)}× (target ≥ 0.9×: ${ratio >= 0.9 ? "PASS" : "MISS"})`,
      `  the whole hal0 model pull process (start, Hub checks, download, register, exit): ${(best(hal0) / 1000).toFixed(2)} s`,
    ];
  } finally {
    await hub.close();
    rmSync(base, { recursive: true, force: true });
  }
}

/** `hal0 model pull --json` as a whole process: its wall time, and its download phase from the JSON lines' arrival (downloading → verifying). */
function pullTimed(config: string, state: string, endpoint: string): Promise<{ wall: number; download: number }> {
  return new Promise((resolve, reject) => {
    const t0 = performance.now();
    const child = spawn(process.execPath, [HAL0, "model", "pull", "bench/Big-GGUF", "big.gguf", "--json", "--config", config, "--state", state], { env: { ...process.env, HF_ENDPOINT: endpoint }, stdio: ["ignore", "pipe", "pipe"] });
    let started: number | undefined;
    let verified: number | undefined;
    let out = "";
    let err = "";
    child.stdout.on("data", (d: Buffer) => {
      out += d.toString();
      const lines = out.split("\n");
      out = lines.pop()!;
      for (const line of lines) {
        // Progress is one JSON object a line; a failure's document (indented JSON) is kept for the error.
        let state: string | undefined;
        try {
          state = (JSON.parse(line) as { state?: string }).state;
        } catch {
          err += `${line}\n`;
          continue;
        }
        if (state === "downloading") started ??= performance.now();
        if (state === "verifying" || state === "done") verified ??= performance.now();
      }
    });
    child.stderr.on("data", (d: Buffer) => (err += d.toString()));
    child.once("exit", (code) => {
      if (code !== 0 || started === undefined || verified === undefined) reject(new Error(`hal0 model pull exited ${code}: ${err}`));
      else resolve({ wall: performance.now() - t0, download: verified - started });
    });
  });
}
