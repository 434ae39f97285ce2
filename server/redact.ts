/**
 * Secret redaction for every read: API replies, pages, audit rows, approval
 * requests, log lines and log tails. Values under keys that name a secret
 * (`API_KEY`, `GITHUB_PERSONAL_ACCESS_TOKEN`, `password`, `authorization`…)
 * become `[redacted]`, and so do hal0's bearer tokens, `Bearer …`
 * credentials, `sk-…` / `ghp_…` style keys, `--api-key <value>` flags and a
 * URL's password. A ChangeSet edit is judged by the path it sets, and TOML
 * text line by line with the table it is in. The stored values stay where
 * they are (files, the plans and approvals tables) for execution only.
 */
import { parse as parseToml } from "smol-toml";
import { SECRET_FLAG } from "../schema/secret-flag.js";

export const MASK = "[redacted]";
const BEARER_MASK = `Bearer ${MASK}`;

/**
 * A key naming a secret value; not a name, path, id or count of one (`auth_value_env`, `auth_credential`, `api_key_file`, `max_tokens`, `tokenizer`, `token_id`).
 * `pass`, `pwd` and `auth` count only as the whole key or its last word (`DB_PASS`, `MYSQL_PWD`, `REDIS_AUTH`), so `bypass`, `passthrough` and settings' `auth` mode are not masked.
 */
const SECRET_WORD = /(secret|passw(?:or)?d|passphrase|api[_-]?key|access[_-]?key|private[_-]?key|session[_-]?key|[a-z0-9]_key$|authorization|credential|cookie|auth[_-]?value|bearer|(?:^|[_-])pat$|(?:^|[_-])(?:pass|pwd)$|[a-z0-9][_-]auth$|token(?!s|izer|_?ids?\b))/i;
// `auth_credential` (upstreams.toml) names a stored credential, like `auth_value_env` names a variable.
const NOT_A_VALUE = /(_env|_file|_path|_name|_names|_id|_ids|_style|_header|_count|^secrets|^auth_credential)$/i;

/**
 * Keys met before and whether each names a secret: a reply or a plan repeats
 * a few dozen keys thousands of times, and the two tests above cost more than
 * a lookup. Emptied when it grows past 4096 keys (a record's own keys, env
 * names), so it cannot grow without end; a key longer than MEMO_KEY_MAX is
 * judged each time and never kept (a request body's keys can be of any size,
 * and 4096 of a megabyte each would hold gigabytes).
 */
const secretKeys = new Map<string, boolean>();
const MEMO_KEY_MAX = 128;

export function isSecretKey(key: string): boolean {
  if (key.length > MEMO_KEY_MAX) return namesSecret(key);
  let secret = secretKeys.get(key);
  if (secret === undefined) {
    if (secretKeys.size >= 4096) secretKeys.clear();
    secret = namesSecret(key);
    secretKeys.set(key, secret);
  }
  return secret;
}

function namesSecret(key: string): boolean {
  return SECRET_WORD.test(key) && !NOT_A_VALUE.test(key);
}

export interface RedactOptions {
  /**
   * Every value of an `env` table, not only secret-named ones: for installed
   * MCP servers (mcp-servers/*.toml), whose env is mostly credentials under
   * names no rule can guess (`DATABASE_URL`, `GITHUB_PAT`…).
   */
  readonly allEnv?: boolean;
}

/**
 * `redact` of a typed value, typed as it was: redaction only replaces secret
 * strings and scalars by the string `[redacted]` in place, so a plan stays a
 * plan (its views keep their shape) and a reader needs no cast.
 */
export function redactTyped<T>(value: T, options: RedactOptions = {}): T {
  return redact(value, options) as T;
}

/** `value` with secrets masked (a copy; the input is not touched). */
export function redact(value: unknown, options: RedactOptions = {}, depth = 0): unknown {
  // Deeper than anything hal0 makes: masked whole rather than shown unread.
  if (depth > 40) return MASK;
  if (typeof value === "string") return redactText(value);
  if (Array.isArray(value)) return redactArray(value, options, depth);
  if (value === null || typeof value !== "object" || value instanceof Date || value instanceof Map || value instanceof Set || ArrayBuffer.isView(value)) return value;
  const obj = value as Record<string, unknown>;
  if (isEdit(obj)) return redactEdit(obj, options, depth);
  const out: Record<string, unknown> = {};
  for (const k of Object.keys(obj)) {
    const v = obj[k];
    let masked: unknown;
    // A value masked already keeps its words (`Bearer [redacted]` says which scheme a header uses).
    if (isSecretKey(k) && (isScalar(v) || (Array.isArray(v) && v.every(isScalar)))) masked = v === BEARER_MASK ? v : MASK;
    else if (k === "env" && options.allEnv && isPlainObject(v)) masked = maskAll(v);
    else masked = redact(v, options, depth + 1);
    // An own `__proto__` key (JSON.parse makes one) stays a key, as Object.fromEntries keeps it.
    if (k === "__proto__") Object.defineProperty(out, k, { value: masked, enumerable: true, writable: true, configurable: true });
    else out[k] = masked;
  }
  return out;
}

/** Whether a route's values are an installed MCP server's (its env is masked whole). */
export function isMcpServerRoute(path: string): boolean {
  return path.startsWith("/api/mcp/");
}

/** Every scalar leaf masked (an env table under `allEnv`). */
export function maskAll(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(maskAll);
  if (isPlainObject(value)) return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, maskAll(v)]));
  return value === null ? null : MASK;
}

/**
 * Whether `reader` sees whole what `author` sent (a queued request, an audit row, a saved plan): an operator always,
 * and the identity that sent it; anyone else (another agent, an anonymous caller) reads it with every value masked.
 * `author.kind` is null for a record kept before hal0 stored it: then only an operator.
 */
export function readsWhole(reader: { readonly kind: string; readonly agent: string }, author: { readonly kind: string | null; readonly agent: string }): boolean {
  return reader.kind === "operator" || (reader.kind !== "anonymous" && reader.kind === author.kind && reader.agent === author.agent);
}


function redactArray(list: readonly unknown[], options: RedactOptions, depth: number): unknown[] {
  return list.map((v, i) => {
    const prev = list[i - 1];
    if (typeof v === "string" && typeof prev === "string" && SECRET_FLAG.test(prev)) return MASK;
    return redact(v, options, depth + 1);
  });
}

type Edit = { file: string; op: "set" | "put" | "text" | "delete"; path?: unknown; value?: unknown; doc?: unknown; text?: unknown };

function isEdit(v: Record<string, unknown>): v is Edit {
  return typeof v.file === "string" && (v.op === "set" || v.op === "put" || v.op === "text" || v.op === "delete");
}

/** A ChangeSet edit: a `set` by the path it sets, a `put` by its document, a `text` as TOML. */
function redactEdit(e: Edit, options: RedactOptions, depth: number): Edit {
  const opts = { allEnv: options.allEnv || isMcpServerFile(e.file) };
  const out: Edit = { ...e };
  if (e.op === "set") {
    const path = Array.isArray(e.path) ? e.path.map(String) : [];
    const inEnv = opts.allEnv && path.includes("env");
    if (inEnv) out.value = maskAll(e.value);
    else if (path.some(isSecretKey) && isScalar(e.value)) out.value = MASK;
    else {
      // `value` is what sits at `path`: a table set there is judged as if it were under its last key.
      const last = path[path.length - 1];
      out.value = last !== undefined && isPlainObject(e.value) ? (redact({ [last]: e.value }, opts, depth + 1) as Record<string, unknown>)[last] : redact(e.value, opts, depth + 1);
    }
  }
  if (e.op === "put") out.doc = redact(e.doc, opts, depth + 1);
  if (e.op === "text" && typeof e.text === "string") out.text = redactToml(e.text, opts);
  return out;
}

export function isMcpServerFile(file: string): boolean {
  return file.startsWith("mcp-servers/");
}

/**
 * Every rule of `redactText` needs one of these in the text to match: a
 * secret-ish word of a key or flag (see SECRET_WORD: `key`, `token`, `auth`,
 * `pass`, `pwd`…; `hft` for llama-server's short `-hft`),
 * `bearer`, a hal0 token's `hal0_`, a URL's `://`, or a known key prefix.
 * A text without any (most log lines and reply strings) is returned as it is
 * after this one scan; `test/server/redact-text.test.ts` holds it against the
 * rules run on every text.
 */
const MAY_HOLD_SECRET = /bearer|hal0_|:\/\/|key|token|secret|pass|pwd|hft|auth|credential|cookie|pat\b|github_pat|(?:sk|hf|gh[opsur]|glpat|xox[abp])[-_]/i;

/**
 * A secret flag and its value: a quoted value (`"…"`, `'…'`), one quoted with escaped quotes as a TOML basic string
 * writes it (`extra_args = "--api-key \\"…\\""`; a quote in the value, escaped for the shell as well, is the four
 * characters backslash, backslash, backslash, quote there), a quote opened and never closed (a typo in a file: the
 * rest of its word is the value), or a bare word, any TOML escape in it (a backslash and the character after it:
 * `\u0041`, `\t`) a part of it.
 */
const SECRET_FLAG_VALUE = /(?<![\w-])((?:--?[A-Za-z0-9-]*(?:api-?key|token|secret|password|passwd)|-hft)(?:=|\s+))("[^"]*"|'[^']*'|\\"(?:\\\\\\"|[^"\\]|\\[^"])*\\"|\\?["'][^\s"'\\]*|(?:[^\s"'\\]|\\[^\s"])+)/gi;

/** A secret flag's value masked in its own quoting (an unclosed quote is kept unclosed). */
function maskFlagValue(v: string): string {
  if (v.startsWith('\\"')) return v.length >= 4 && v.endsWith('\\"') ? `\\"${MASK}\\"` : `\\"${MASK}`;
  const q = v[0];
  if (q === '"' || q === "'") return v.length >= 2 && v.endsWith(q) ? `${q}${MASK}${q}` : `${q}${MASK}`;
  return MASK;
}

/** A line of text with bearer tokens, hal0 tokens, `secret-ish=value` pairs, secret flags, URL passwords and `sk-…` keys masked. */
export function redactText(text: string): string {
  return MAY_HOLD_SECRET.test(text) ? redactTextEveryRule(text) : text;
}

/** `redactText`'s rules, run whatever the text holds (the reference its pre-check is tested against). */
export function redactTextEveryRule(text: string): string {
  const masked = text
    .replace(/(bearer\s+)[A-Za-z0-9._~+/=-]{8,}/gi, `$1${MASK}`)
    .replace(/\bhal0_(?:op|ag)_[A-Za-z0-9_-]{8,}/g, MASK)
    // A URL's query parameter named just `key` is an API key (`?key=AIza…`), though a key named `key` elsewhere (a TOML table's) is not.
    .replace(/([?&]key=)[^&\s#"'<>]+/gi, `$1${MASK}`)
    // A URL's scheme is read as a whole run of its characters (see keyStart): linear in the text's length.
    .replace(/(?<![a-z0-9+.-])([a-z0-9+.-]+)(:\/\/[^\s:/@]+:)[^\s@/]+@/gi, (m, scheme: string, rest: string, at: number, all: string) =>
      (keyStart(scheme, all[at - 1], /[a-z]/i) < 0 ? m : `${scheme}${rest}${MASK}@`))
    .replace(SECRET_FLAG_VALUE, (_m, flag: string, v: string) => `${flag}${maskFlagValue(v)}`)
    .replace(/("(?:--?[A-Za-z0-9-]*(?:api-?key|token|secret|password|passwd)|-hft)"\s*,\s*)"(?:[^"\\]|\\.)*"/gi, `$1"${MASK}"`)
    .replace(/"([^"\\\s]{1,80})"(\s*[:=]\s*)("(?:[^"\\]|\\.)*")/g, (m, key: string, sep: string, v: string) => (isSecretKey(key) ? `"${key}"${sep}${maskLike(v)}` : m));
  return maskKeyValues(masked).replace(/\b(sk|hf|ghp|gho|ghs|ghu|ghr|github_pat|glpat|xox[abp])[-_][A-Za-z0-9_-]{12,}\b/g, MASK);
}

/** A whole run of a key's characters (never a part of one: the lookbehind), and what may follow it: `=` and a value, read where the run ends. */
const KEY_RUN = /(?<![A-Za-z0-9_.-])[A-Za-z0-9_.-]+/g;
const AFTER_KEY = /(\s*=\s*)("(?:[^"\\]|\\.)*"|'[^']*'|[^\s,;}&"'\\]+)/y;

/**
 * `key=value` pairs whose key names a secret (`API_KEY=…`, `a.b.token = "…"`:
 * the last dotted part is judged), the value masked in its own quoting. A key
 * is read from the first place it may start in a run of key characters
 * (keyStart); once a pair is read, the next is looked for after its value.
 */
function maskKeyValues(text: string): string {
  let out = "";
  let kept = 0;
  KEY_RUN.lastIndex = 0;
  for (let run = KEY_RUN.exec(text); run !== null; run = KEY_RUN.exec(text)) {
    const from = keyStart(run[0], text[run.index - 1], /[A-Za-z_]/);
    if (from < 0) continue;
    AFTER_KEY.lastIndex = KEY_RUN.lastIndex;
    const pair = AFTER_KEY.exec(text);
    if (pair === null) continue;
    KEY_RUN.lastIndex = AFTER_KEY.lastIndex;
    const key = run[0].slice(from);
    if (!isSecretKey(key.split(".").pop()!)) continue;
    out += `${text.slice(kept, run.index)}${run[0]}${pair[1]}${maskLike(pair[2]!)}`;
    kept = AFTER_KEY.lastIndex;
  }
  return kept === 0 ? text : out + text.slice(kept);
}

const WORD_CHAR = /\w/;

/**
 * Where a key (or a URL's scheme) starts in `run`, a whole run of the
 * characters it is made of: the first `first` character at a word boundary
 * (`before` is the character ahead of the run), or -1. The rules used to
 * read it as `\b[A-Za-z_][A-Za-z0-9_.-]*`, which tries again from every
 * boundary inside a run that is not followed by `=`: quadratic, so a 1 MiB
 * text of `a.a.a.…` (any caller's request body, a runner's log line) held
 * the server for minutes. Every later start in a run ends where the run
 * does, so the first one decides alone.
 */
function keyStart(run: string, before: string | undefined, first: RegExp): number {
  for (let i = 0; i < run.length; i++) {
    const prev = i === 0 ? before : run[i - 1];
    if (first.test(run[i]!) && (prev === undefined || !WORD_CHAR.test(prev))) return i;
  }
  return -1;
}

/** A log line's fields that hold a secret at any of the two top levels (`token`, `*.token`…). */
const SECRET_LOG_FIELDS = new Set(["token", "secret", "password", "api_key"]);

/**
 * The fields of one log call (`hal0 serve`'s logger) with secrets masked
 * where hal0 puts them: `token`, `secret`, `password` and `api_key` at the
 * top or one level down, `authorization` and `cookie` of a `headers` object
 * there, every value of an `env` object there, and `token` of each entry of
 * `args`. The same fields as pino's `redact` paths
 * (`test/server/redact-text.test.ts` compares them), without their cost on
 * every line: a line without any is returned as it is, and only the plain
 * objects and arrays on the way to a masked value are copied.
 */
export function redactLogFields(fields: Record<string, unknown>): Record<string, unknown> {
  return maskFields(fields, 0) as Record<string, unknown>;
}

function maskFields(value: unknown, depth: number, inArgs = false): unknown {
  if (!isPlainContainer(value)) return value;
  let out: Record<string, unknown> | undefined;
  for (const key of Object.keys(value)) {
    const v = (value as Record<string, unknown>)[key];
    if (v === undefined) continue;
    let masked: unknown = MASK;
    if (!SECRET_LOG_FIELDS.has(key)) {
      masked = depth === 0 ? maskFields(v, 1, key === "args") : v;
      if (isPlainContainer(masked)) {
        let part: object = masked;
        if (key === "env") part = maskKeys(part, Object.keys(part));
        else if (key === "headers") part = maskKeys(part, ["authorization", "cookie"]);
        if (inArgs) part = maskKeys(part, ["token"]);
        masked = part;
      }
    }
    if (masked !== v) (out ??= copyOf(value))[key] = masked;
  }
  return out ?? value;
}

/** `value` with those of `keys` it holds (not undefined) masked: a copy when there is any, else `value` itself. */
function maskKeys(value: object, keys: readonly string[]): object {
  const present = keys.filter((k) => (value as Record<string, unknown>)[k] !== undefined);
  if (present.length === 0) return value;
  const out = copyOf(value);
  for (const k of present) out[k] = MASK;
  return out;
}

/** A shallow copy of an array or a plain object, indexable by key. */
function copyOf(value: object): Record<string, unknown> {
  return (Array.isArray(value) ? [...(value as unknown[])] : { ...value }) as Record<string, unknown>;
}

/** An array or a plain object: what a log call's fields are built of (an Error or a Date is left to pino's serialisers). */
function isPlainContainer(value: unknown): value is object {
  return Array.isArray(value) || isPlainObject(value);
}

/** The mask in the value's own quoting. */
function maskLike(v: string): string {
  if (v.startsWith('"')) return `"${MASK}"`;
  if (v.startsWith("'")) return `'${MASK}'`;
  return MASK;
}

/** A TOML text with secret values masked: see {@link tomlLineRedactor}. */
export function redactToml(text: string, options: RedactOptions = {}): string {
  const line = tomlLineRedactor(options);
  return text.split("\n").map(line).join("\n");
}

// A bare key starts where its run of characters does (not again inside it: a run not followed by `=` costs its length once, not its square).
const BARE_OR_QUOTED = String.raw`(?:"[^"]*"|'[^']*'|(?<![A-Za-z0-9_-])[A-Za-z0-9_-]+)`;
const KEY_LINE = new RegExp(String.raw`^(\s*)(${BARE_OR_QUOTED}(?:\s*\.\s*${BARE_OR_QUOTED})*)(\s*=\s*)(.*)$`);
const HEADER_LINE = /^\s*\[\[?\s*([^\]]+?)\s*\]\]?\s*(?:#.*)?$/;
const INLINE_PAIR = new RegExp(String.raw`(${BARE_OR_QUOTED})(\s*=\s*)("(?:[^"\\]|\\.)*"|'[^']*'|[^,}\s]+)`, "g");

/**
 * Redacts a TOML file line by line, fed in order: it follows the table a
 * line is in (`[server]`, `[env]`), so `API_KEY = "…"`, `env = { TOKEN = "…" }`
 * and, with `allEnv`, every key of an `env` table get `"[redacted]"`; a
 * masked multi-line string or array masks its continuation lines. Every
 * line also goes through {@link redactText}.
 */
export function tomlLineRedactor(options: RedactOptions = {}): (line: string) => string {
  let table: string[] = [];
  let until: RegExp | undefined;
  // The line before ended with a secret flag (a multi-line string, a `\` line ending): its value starts this one.
  let flagEnded = false;
  const masked = (line: string): string => {
    if (until) {
      if (until.test(line)) until = undefined;
      return MASK;
    }
    if (flagEnded) line = line.replace(LEADING_WORD, (_m, indent: string, v: string) => `${indent}${maskFlagValue(v)}`);
    const header = HEADER_LINE.exec(line);
    if (header) {
      table = splitKey(header[1]!);
      return redactText(line);
    }
    const kv = KEY_LINE.exec(line);
    if (!kv) return redactText(line);
    const [, indent, rawKey, sep, rest] = kv as unknown as [string, string, string, string, string];
    const path = [...table, ...splitKey(rawKey)];
    const last = path[path.length - 1]!;
    const envTable = options.allEnv === true && path.includes("env");
    if (rest.trimStart().startsWith("{")) {
      const inner = rest.replace(INLINE_PAIR, (m, k: string, s: string, v: string) => (v.startsWith("{") ? m : envTable || isSecretKey(unquote(k)) ? `${k}${s}${maskLike(v)}` : m));
      return redactText(`${indent}${rawKey}${sep}${inner}`);
    }
    if (isSecretKey(last) || envTable) {
      until = continuation(rest);
      return `${indent}${rawKey}${sep}"${MASK}"`;
    }
    return redactText(line);
  };
  return (line: string): string => {
    const out = masked(line);
    flagEnded = !COMMENT_LINE.test(line) && FLAG_AT_END.test(line);
    return out;
  };
}

const COMMENT_LINE = /^\s*#/;
const LEADING_WORD = /^(\s*)("[^"]*"|'[^']*'|\\?["'][^\s"'\\]*|[^\s"'\\]+)/;
const FLAG_AT_END = /(?:^|[\s"'])(?:--?[A-Za-z0-9-]*(?:api-?key|token|secret|password|passwd)|-hft)\s*\\?\s*$/i;

/** Where a value that starts on this line ends, when not on it: a multi-line string or array. */
function continuation(rest: string): RegExp | undefined {
  const v = rest.trim();
  for (const q of ['"""', "'''"]) if (v.startsWith(q) && !v.slice(3).includes(q)) return new RegExp(q.replace(/"/g, '\\"'));
  if (v.startsWith("[") && (v.match(/\[/g)?.length ?? 0) > (v.match(/\]/g)?.length ?? 0)) return /\]/;
  return undefined;
}

function splitKey(key: string): string[] {
  return (key.match(new RegExp(BARE_OR_QUOTED, "g")) ?? []).map(unquote);
}

function unquote(k: string): string {
  return (k.startsWith('"') && k.endsWith('"')) || (k.startsWith("'") && k.endsWith("'")) ? k.slice(1, -1) : k;
}

/**
 * A write-back of a redacted read: where `next` holds `[redacted]` and
 * `current` has a value at the same place, the current value stays; so does
 * a current text whose redaction is `next` (`https://user:[redacted]@host`
 * for the URL with its password). So an
 * editor that GETs, changes one key and sends the rest back does not write
 * the mask over a secret it was never shown.
 */
export function restoreMasked<T>(next: T, current: unknown): T {
  if (next === MASK) return (current !== undefined && isScalar(current) ? current : next) as T;
  // A text with a secret masked inside it (a URL's password) sent back as it was read.
  if (typeof next === "string" && typeof current === "string" && next.includes(MASK) && redactText(current) === next) return current as T;
  if (Array.isArray(next)) {
    // A word list (a runner, flags): a mask stands for the word at its place only while the word before it (its flag) is
    // the same; a list whose words moved would else put the secret behind another flag, one no read masks. Left masked,
    // the write is refused (validation.invalid masked_value) rather than write the mask over the secret.
    const out: unknown[] = [];
    next.forEach((v, i) => {
      const cur = Array.isArray(current) ? current[i] : undefined;
      const samePlace = i === 0 || (Array.isArray(current) && i - 1 < current.length && out[i - 1] === current[i - 1]);
      out.push(restoreMasked(v, samePlace ? cur : undefined));
    });
    return out as T;
  }
  if (isPlainObject(next)) {
    const cur = isPlainObject(current) ? current : {};
    return Object.fromEntries(Object.entries(next).map(([k, v]) => [k, restoreMasked(v, cur[k])])) as T;
  }
  return next;
}

/**
 * Where the TOML text `after` holds `[redacted]` in a string that `before`
 * had at the same key path without it: the mask written over a value (dotted
 * paths, `upstream.0.url`). A key new in `after`, a text that does not parse
 * (the compiler says so) or a value that was masked already are not counted.
 */
export function maskedOverValues(before: string | null, after: string | null): string[] {
  if (before === null || after === null || !after.includes(MASK)) return [];
  let was: unknown;
  let now: unknown;
  try {
    was = parseToml(before);
    now = parseToml(after);
  } catch {
    return [];
  }
  const out: string[] = [];
  const walk = (a: unknown, b: unknown, path: string[]): void => {
    if (typeof b === "string") {
      if (b.includes(MASK) && typeof a === "string" && !a.includes(MASK)) out.push(path.join("."));
    } else if (Array.isArray(b) && Array.isArray(a)) {
      b.forEach((v, i) => walk(a[i], v, [...path, String(i)]));
    } else if (isPlainObject(b) && isPlainObject(a)) {
      for (const k of Object.keys(b)) if (Object.hasOwn(a, k)) walk(a[k], b[k], [...path, k]);
    }
  };
  walk(was, now, []);
  return out;
}

function isScalar(v: unknown): boolean {
  return v !== null && typeof v !== "object";
}

function isPlainObject(v: unknown): v is Record<string, unknown> {
  if (v === null || typeof v !== "object" || Array.isArray(v)) return false;
  const proto = Object.getPrototypeOf(v);
  return proto === Object.prototype || proto === null;
}
