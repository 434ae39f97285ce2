import { setFlagsFromString } from "node:v8";
import { runInNewContext } from "node:vm";
import { pino } from "pino";
import { describe, expect, it } from "vitest";
import { isSecretKey, MASK, redact, redactLogFields, redactText, redactTextEveryRule, redactToml, restoreMasked } from "../../server/redact.js";
import { rng } from "../helpers/rng.js";

// Key words of every rule (and their near misses), values, separators and the shapes they sit in.
const KEYS = [
  "api_key", "API-KEY", "apikey", "access_key", "private-key", "session_key", "my_key", "hf_token", "GITHUB_PERSONAL_ACCESS_TOKEN", "token", "tokens", "tokenizer", "token_id",
  "max_tokens", "secret", "SECRETS", "client_secret", "password", "passwd", "Passphrase", "authorization", "Auth-Value", "auth_value_env", "auth_credential", "credential",
  "cookie", "bearer", "pat", "github_pat", "GITHUB_PAT", "x.pat", "path", "patch", "name", "ctx_size", "model", "keyboard", "monkey", "author", "status", "reqId", "route", "msg",
  "MYSQL_PWD", "DB_PASS", "SMTP_PASS", "REDIS_AUTH", "HF_AUTH", "PASS", "pwd", "auth", "oauth", "bypass", "compass", "passthrough", "pass_through", "DB_PASS_FILE", "pwd_path",
];
const VALUES = ["hunter2", "s3cr3t-value-12345", "\"quoted value\"", "'single'", "abcdefghijklmnopqrstu", "42", "", "[redacted]", "x y"];
const TOKENS = [
  "hal0_op_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA", "hal0_ag_abcdefgh", "hal0_xx_abcdefgh", "sk-abcdefghijklmnop", "sk_live_abcdefghijkl", "hf_abcdefghijklmnopq", "ghp_abcdefghijklmnop",
  "gho_abcdefghijklmnop", "github_pat_abcdefghijklmnop", "glpat-abcdefghijklmnop", "xoxb-abcdefghijklmnop", "xoxq-abcdefghijklmnop", "skx-abcdefghijklmnop",
  "https://user:pa55word@example.com/x", "http://example.com:8080/x", "https://h.example/mcp?key=AIzaS3cr3t&x=1", "postgres://u:p@db/x", "Bearer abcdefghijklmnop", "bearer   xyz12345678", "bearer short",
];
const FLAGS = ["--api-key", "--hf-token", "-hft", "-hf", "-token", "--secret", "--password", "--passwd", "--apikey", "--port", "--model", "--ctx-size"];
const FILLER = ["GET /api/slots", "request", "operator:owner", "slot chat is running", "{", "}", ",", " ", "\n", "\"level\":30", "3f0b6a3e-7c4c-4a55-9a3b-0f4c9d1f6a21", "ok", "é", "→"];

function pick<T>(r: () => number, xs: readonly T[]): T {
  return xs[Math.floor(r() * xs.length)]!;
}

function piece(r: () => number): string {
  switch (Math.floor(r() * 7)) {
    case 0: return `"${pick(r, KEYS)}"${pick(r, [":", ": ", " = ", "="])}"${pick(r, VALUES).replace(/"/g, "")}"`;
    case 1: return `${pick(r, KEYS)}${pick(r, ["=", " = ", "= "])}${pick(r, VALUES)}`;
    case 2: return `${pick(r, FLAGS)}${pick(r, [" ", "=", "  "])}${pick(r, VALUES)}`;
    case 3: return `"${pick(r, FLAGS)}", "${pick(r, VALUES).replace(/"/g, "")}"`;
    case 4: return pick(r, TOKENS);
    default: return pick(r, FILLER);
  }
}

describe("redactText's pre-check", () => {
  it("gives what every rule run on the text gives, for 20,000 generated texts (and skips the rules on many of them)", () => {
    const r = rng(20261203);
    let masked = 0;
    let skipped = 0;
    for (let i = 0; i < 20_000; i++) {
      const text = Array.from({ length: 1 + Math.floor(r() * 6) }, () => piece(r)).join(pick(r, ["", " ", ", ", "\n"]));
      const reference = redactTextEveryRule(text);
      expect(redactText(text), text).toBe(reference);
      if (reference !== text) masked++;
      if (redactText(text) === text && reference === text) skipped++;
    }
    // The corpus exercises both sides: texts the rules mask, and texts they leave alone.
    expect(masked).toBeGreaterThan(5_000);
    expect(skipped).toBeGreaterThan(2_000);
  });

  it("each kind of secret is still masked", () => {
    const cases = [
      `{"pat":"abc"}`, "x.pat=abc", "GITHUB_PAT=abc", "github_pat_abcdefghijklmnop", "glpat-abcdefghijklmnop", "xoxb-abcdefghijklmnop", "hf_abcdefghijklmnopq",
      "Authorization: Bearer abcdefghijk", "hal0_ag_AAAAAAAAAAAAAAAA", "https://u:pw123@host/x", "--api-key s3cr3t", `"--hf-token", "s3cr3t"`, `{"Passphrase": "s3cr3t"}`, "COOKIE=s3cr3t",
      "MYSQL_PWD=s3cr3t", "DB_PASS=s3cr3t", `{"SMTP_PASS": "s3cr3t"}`, "REDIS_AUTH=s3cr3t", "HF_AUTH=s3cr3t", "PASS=s3cr3t", "-hft s3cr3t", `"-hft", "s3cr3t"`,
      "https://h.example/mcp?key=AIzaSyS3cr3t", "https://h.example/mcp?mode=a&KEY=s3cr3t#top",
    ];
    for (const text of cases) expect(redactText(text), text).toContain(MASK);
  });

  it("masks a URL's query parameter named key (an API key), leaves other keys named key and look-alike parameters alone, and a URL sent back as read keeps its key", () => {
    expect(redactText("url = \"https://h.example/mcp?key=AIzaSyS3cr3t&mode=a\"")).toBe(`url = "https://h.example/mcp?key=${MASK}&mode=a"`);
    expect(redactText("https://h.example/?monkey=1&keyboard=2&key_id=3")).toBe("https://h.example/?monkey=1&keyboard=2&key_id=3");
    expect(redactText('key = "value"')).toBe('key = "value"');
    const url = "https://h.example/mcp?key=AIzaSyS3cr3t";
    expect(restoreMasked({ url: redactText(url) }, { url })).toEqual({ url });
  });

  it("masks a secret flag's value however a file quotes it: escaped quotes of a TOML basic string, a quote never closed, the value on the next line of a multi-line string; a text sent back as read keeps it", () => {
    const file = [
      "[server]",
      'extra_args = "--metrics --api-key \\"esc-key-1\\" --jinja"',
      "description = \"--api-key 'open-key-2\"",
      'flags = "--hf-token \\"open-token-3"',
      'extra_args = """',
      "--metrics --api-key",
      "next-line-key-4 --jinja",
      '"""',
      'cmd = "--api-key \\',
      '  cont-key-5"',
      "# pass --api-key",
      "port = 8081",
    ].join("\n");
    const masked = redactToml(file);
    expect(masked).not.toMatch(/esc-key|open-key|open-token|next-line-key|cont-key/);
    expect(masked.split("\n")).toEqual([
      "[server]",
      `extra_args = "--metrics --api-key \\"${MASK}\\" --jinja"`,
      `description = "--api-key '${MASK}"`,
      `flags = "--hf-token \\"${MASK}"`,
      'extra_args = """',
      "--metrics --api-key",
      `${MASK} --jinja`,
      '"""',
      'cmd = "--api-key \\',
      `  ${MASK}"`,
      "# pass --api-key",
      "port = 8081", // a comment naming the flag masks nothing after it
    ]);
    const value = '--api-key "spaced key" --metrics';
    expect(redactText(`extra_args: ${JSON.stringify(value)}`)).toBe(`extra_args: "--api-key \\"${MASK}\\" --metrics"`);
    expect(restoreMasked({ extra_args: redactText("--api-key 'open-key-2") }, { extra_args: "--api-key 'open-key-2" })).toEqual({ extra_args: "--api-key 'open-key-2" });
  });

  it("masks a secret flag's whole value when a TOML escape stands in it (`\\u0041`, a quote escaped for the shell inside an escaped quote), as a diagnostic shows the source line", () => {
    const lines = [
      'extra_args = "--api-key sk-aa\\u0041tail-1 --jinja"',
      'extra_args = "--api-key \\"sk-aa\\\\\\" tail-2\\" --jinja"',
      'extra_args = "--hf-token=hf-aa\\\\tail-3 --jinja"',
    ];
    const masked = lines.map(redactText);
    expect(masked.join("\n")).not.toMatch(/tail-/);
    expect(masked).toEqual([
      `extra_args = "--api-key ${MASK} --jinja"`,
      `extra_args = "--api-key \\"${MASK}\\" --jinja"`,
      `extra_args = "--hf-token=${MASK} --jinja"`,
    ]);
    // What closes the TOML string is not part of the value: its quote stays.
    expect(redactText('extra_args = "--api-key abc\\"')).toBe(`extra_args = "--api-key ${MASK}\\"`);
    for (const line of lines) expect(restoreMasked({ extra_args: redactText(line) }, { extra_args: line })).toEqual({ extra_args: line });
  });

  it("reads a long run of key or scheme characters once: a 512 KiB text of each shape takes well under a second, not minutes", () => {
    const half = 1 << 18;
    const shapes = ["a.", "a-", "a+", "sk-", "--token", "0="].map((s) => `key ${s.repeat(Math.ceil(half / s.length))}`);
    shapes.push(`key ${"a.".repeat(half)}://`, `x = {${"a".repeat(2 * half)}`);
    const started = performance.now();
    for (const text of shapes) {
      redactText(text);
      redactToml(text);
    }
    // Each used to try again from every boundary inside the run: minutes for these eight (seconds for 32 KiB).
    expect(performance.now() - started).toBeLessThan(3000);
  });

  it("finds a key or a URL's scheme where it starts in a run, after a run that is no key", () => {
    expect(redactText("0token- = abc my-secret=s3cr3t")).toBe(`0token- = abc my-secret=${MASK}`);
    expect(redactText("0x=a.token=s3cr3t")).toBe(`0x=a.token=${MASK}`);
    expect(redactText(".API_KEY=s3cr3t 1.API_KEY=s3cr3t")).toBe(`.API_KEY=${MASK} 1.API_KEY=${MASK}`);
    expect(redactText("see 1.https://u:pw123@host/x")).toBe(`see 1.https://u:${MASK}@host/x`);
    expect(redactToml(`env = { 0a-b = 1, TOKEN = "s3cr3t" }`)).toBe(`env = { 0a-b = 1, TOKEN = "${MASK}" }`);
  });

  it("a line with none of the trigger words is returned as it is (the request log line)", () => {
    const line = `{"level":30,"time":"2026-12-03T12:00:00.000Z","svc":"hal0","reqId":"3f0b6a3e-7c4c-4a55-9a3b-0f4c9d1f6a21","caller":"operator:owner","route":"GET /api/slots","status":200,"ms":0.4,"msg":"request"}\n`;
    expect(redactText(line)).toBe(line);
  });
});

/** The paths hal0 serve's logger gave pino's `redact` before `redactLogFields` took their place: the reference. */
const PINO_PATHS = [
  "headers.authorization", "headers.cookie", "*.headers.authorization", "*.headers.cookie", "req.headers.authorization", "req.headers.cookie",
  "token", "*.token", "args.*.token", "secret", "*.secret", "password", "*.password", "api_key", "*.api_key", "env.*", "*.env.*",
];

function lineOf(options: Parameters<typeof pino>[0]): (fields: Record<string, unknown>) => string {
  let last = "";
  const logger = pino({ ...options, base: undefined, timestamp: false }, { write: (line: string) => (last = line) } as never);
  return (fields) => (logger.info(fields, "m"), last);
}

/**
 * A random log call's fields: nested plain objects and arrays, with the
 * secret-bearing keys among others. No `undefined` values: pino's paths
 * wrote a key set to undefined as "[redacted]"; JSON drops it, and so does
 * `redactLogFields`.
 */
function fieldsOf(r: () => number, depth = 0): Record<string, unknown> {
  const names = ["token", "secret", "password", "api_key", "headers", "authorization", "cookie", "env", "args", "req", "slot", "status", "msg2", "a", "0"];
  const out: Record<string, unknown> = {};
  for (let i = Math.floor(r() * 5); i > 0; i--) {
    const roll = r();
    const value = depth < 3 && roll < 0.45 ? (r() < 0.25 ? Object.values(fieldsOf(r, depth + 1)) : fieldsOf(r, depth + 1))
      : pick(r, ["v", 42, true, null, "hal0 s3cr3t", ["x", "y"]]);
    out[pick(r, names)] = value;
  }
  return out;
}

describe("redactLogFields", () => {
  it("writes the same line as pino's redact paths for 5,000 generated log calls, and never changes the caller's object", () => {
    const reference = lineOf({ redact: { paths: PINO_PATHS, censor: MASK } });
    const ours = lineOf({ formatters: { log: redactLogFields } });
    const r = rng(7);
    let masked = 0;
    for (let i = 0; i < 5_000; i++) {
      const fields = fieldsOf(r);
      const before = JSON.stringify(fields);
      // pino's paths mask in place and put the values back after (not always: a null under `args.*.token` stays masked), so the reference gets its own copy.
      const want = reference(structuredClone(fields));
      expect(ours(fields), before).toBe(want);
      expect(JSON.stringify(fields)).toBe(before);
      if (want.includes(MASK)) masked++;
    }
    expect(masked).toBeGreaterThan(1_000);
  });

  it("hands back the very object when it holds nothing to mask (no copy on the request line)", () => {
    const line = { reqId: "r", caller: "operator:owner", route: "GET /api/slots", status: 200, ms: 0.4, nested: { slot: "chat", list: [1, 2] } };
    expect(redactLogFields(line)).toBe(line);
    expect(redactLogFields({ req: { headers: { authorization: "Bearer x", host: "h" } } })).toEqual({ req: { headers: { authorization: MASK, host: "h" } } });
  });
});

describe("redact of a value", () => {
  it("masks env values under *_PASS, *_PWD and *_AUTH names and the value after llama-server's short -hft flag; leaves look-alikes alone", () => {
    const env = { MYSQL_PWD: "a1", DB_PASS: "a2", SMTP_PASS: "a3", REDIS_AUTH: "a4", HF_AUTH: "a5", PASS: "a6", PWD_FILE: "/p", bypass: "b", compass: "c", passthrough: "d", auth: "token", auth_value_env: "E" };
    expect(redact({ env })).toEqual({
      env: { MYSQL_PWD: MASK, DB_PASS: MASK, SMTP_PASS: MASK, REDIS_AUTH: MASK, HF_AUTH: MASK, PASS: MASK, PWD_FILE: "/p", bypass: "b", compass: "c", passthrough: "d", auth: "token", auth_value_env: "E" },
    });
    expect(redact({ argv: ["llama-server", "-hft", "hf_secret", "--port", "8080", "--hf-token", "t2"] })).toEqual({ argv: ["llama-server", "-hft", MASK, "--port", "8080", "--hf-token", MASK] });
    expect(redactText("llama-server -m x.gguf -hft s3cr3tvalue --port 8080")).toBe(`llama-server -m x.gguf -hft ${MASK} --port 8080`);
  });


  it("keeps no long key it judged: 100 keys of 1 MiB (a request body's, any caller's) leave the heap as it was", () => {
    setFlagsFromString("--expose-gc");
    const gc = runInNewContext("gc") as () => void;
    gc();
    const before = process.memoryUsage().heapUsed;
    for (let i = 0; i < 100; i++) expect(isSecretKey(`${Buffer.alloc(1 << 20, "a").toString("latin1")}${i}_token`)).toBe(true);
    gc();
    // They were kept in the memo of judged keys, up to 4096 of them: gigabytes.
    expect(process.memoryUsage().heapUsed - before).toBeLessThan(20 << 20);
  });

  it("keeps an own __proto__ key a key (JSON.parse makes one) and masks what is under it, leaving the copy's prototype alone", () => {
    const value = JSON.parse('{"__proto__": {"api_key": "k-123", "name": "n"}, "token": "t", "list": [{"password": "p"}]}') as Record<string, unknown>;
    const out = redact(value) as Record<string, unknown>;
    expect(Object.getPrototypeOf(out)).toBe(Object.prototype);
    expect(Object.keys(out)).toEqual(["__proto__", "token", "list"]);
    expect(JSON.stringify(out)).toBe('{"__proto__":{"api_key":"[redacted]","name":"n"},"token":"[redacted]","list":[{"password":"[redacted]"}]}');
    expect(value.token).toBe("t"); // the input is not touched
  });

  it("answers a key it has judged before as it did the first time, past the memo's size", () => {
    const keys = Array.from({ length: 5000 }, (_, i) => (i % 2 === 0 ? `x_${i}_token` : `x_${i}_name`));
    const first = keys.map(isSecretKey);
    expect(first.filter(Boolean)).toHaveLength(2500);
    expect(keys.map(isSecretKey)).toEqual(first);
  });
});

describe("restoreMasked in a word list", () => {
  it("restores a mask only behind the same flag: words moved leave it masked, never the secret behind another flag", () => {
    const current = { runner: ["llama-server", "--api-key", "sk-live-1", "--alias", "chat"] };
    const read = { runner: ["llama-server", "--api-key", MASK, "--alias", "chat"] };
    expect(restoreMasked(read, current)).toEqual(current);
    expect(restoreMasked({ runner: [...read.runner, "--port", "9000"] }, current)).toEqual({ runner: [...current.runner, "--port", "9000"] });
    // The flag in front of the mask changed (--api-key dropped): the secret would be the alias every read shows.
    expect(restoreMasked({ runner: ["llama-server", "--alias", MASK, "--api-key", "chat"] }, current)).toEqual({ runner: ["llama-server", "--alias", MASK, "--api-key", "chat"] });
    expect(restoreMasked({ runner: ["llama-server", "--verbose", MASK] }, current)).toEqual({ runner: ["llama-server", "--verbose", MASK] });
  });
});
