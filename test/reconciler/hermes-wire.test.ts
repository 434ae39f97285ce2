import { describe, expect, it } from "vitest";
import { parse } from "yaml";
import { applyHal0Keys, BEARER_PLACEHOLDER, currentHal0Keys, desiredHal0Keys, fillBearer, HermesYamlError, redactHal0Keys, type JoinableServer } from "../../reconciler/hermes-wire.js";

/** A person's Hermes profile: comments everywhere, odd quoting and indentation, flow collections, a foreign MCP server. */
const PERSON = `# Hermes profile "coder" — edited by hand, keep my notes
model:
  default: "qwen3-coder"   # the model we like
  provider: custom
  base_url: http://127.0.0.1:8080/v1

# tools this profile may use
toolsets:
  - hermes-cli
  - web
  - 'file'

memory:
    provider: holographic      # four-space indent on purpose
    memory_enabled: true
    nested: {a: 1, b: [x, y]}

mcp_servers:
  # my own server, hal0 must not touch it
  github:
    command: npx
    args: ["-y", "@modelcontextprotocol/server-github"]
    env:
      GITHUB_TOKEN: "ghp_xxx"

agent:
  max_turns: 60
long: >
  folded text
  continues here
num: 0x1F
`;

const BASE = "http://127.0.0.1:8080";
const SEARCH: JoinableServer = { id: "search", transport: "streamable-http", url: "http://127.0.0.1:9100/mcp", enabled: true, exposure: { hermes: true, brain: false }, tools: { allow: [], gated: [], blocked: [] } };

/** A token as the store mints them (the executor reads it through the credentials; here it is fixed). */
const TOKEN = "hal0_ag_0123456789abcdefghijABCDEFGHIJ-_";

/** The desired keys with the bearer placeholder: what the planner puts in a plan. */
function desired(text: string, servers: readonly JoinableServer[] = [], identity = "hermes__coder") {
  return desiredHal0Keys(text, identity, BASE, servers, { bearer: true });
}

/** What the executor writes: the desired keys with the placeholder replaced by the token. */
function wire(text: string, owned: readonly string[] = [], servers: readonly JoinableServer[] = []): string {
  return applyHal0Keys(text, fillBearer(desired(text, servers), () => TOKEN), owned);
}

/** The text with hal0's entries (the lines from `  hal0-…:`/`  search:` to the next key at that indent or a blank line) cut out. */
function withoutHal0(text: string, ids: readonly string[] = ["hal0-admin", "hal0-memory"]): string {
  const lines = text.split("\n");
  const out: string[] = [];
  let skipping = false;
  for (const line of lines) {
    const m = /^( *)([\w-]+):/.exec(line);
    if (line.trim() === "") skipping = false;
    else if (m && m[1]!.length <= 2) skipping = m[1]!.length === 2 && ids.includes(m[2]!);
    if (!skipping) out.push(line);
  }
  return out.join("\n");
}

describe("hermes-wire", () => {
  it("adds hal0-admin and hal0-memory and keeps every other byte", () => {
    const out = wire(PERSON);
    expect(withoutHal0(out)).toBe(PERSON);
    const js = parse(out) as { mcp_servers: Record<string, unknown> };
    expect(js.mcp_servers["hal0-admin"]).toEqual({ type: "http", url: `${BASE}/mcp/admin`, timeout: 60, headers: { Authorization: `Bearer ${TOKEN}` } });
    expect(js.mcp_servers["hal0-memory"]).toEqual({ type: "http", url: `${BASE}/mcp/memory`, timeout: 60, headers: { Authorization: `Bearer ${TOKEN}` } });
    expect(Object.keys(js.mcp_servers)).toEqual(["github", "hal0-admin", "hal0-memory"]);
    expect(out).toContain("\n  hal0-admin:\n    type: http\n");
    expect(out).toContain(`      Authorization: "Bearer ${TOKEN}"\n`);
    // The server trusts only the token: no X-hal0-Agent, and never the placeholder.
    expect(out).not.toContain("X-hal0-Agent");
    expect(out).not.toContain("[redacted]");
  });

  it("is idempotent: wiring twice gives the same text, and the current keys, redacted, equal the desired ones", () => {
    const once = wire(PERSON, [], [SEARCH]);
    expect(wire(once, ["search"], [SEARCH])).toBe(once);
    expect(currentHal0Keys(once, ["search"])).toEqual(fillBearer(desired(once, [SEARCH]), () => TOKEN));
    expect(redactHal0Keys(currentHal0Keys(once, ["search"]))).toEqual({ view: desired(once, [SEARCH]), bearers: { "hal0-admin": TOKEN, "hal0-memory": TOKEN } });
  });

  it("a new token replaces the bearer in place, and nothing else", () => {
    const once = wire(PERSON, [], [SEARCH]);
    const rotated = applyHal0Keys(once, fillBearer(desired(once, [SEARCH]), () => "hal0_ag_ANOTHERtokenANOTHERtokenANOTHERto"), ["search"]);
    expect(rotated).toBe(once.replaceAll(TOKEN, "hal0_ag_ANOTHERtokenANOTHERtokenANOTHERto"));
  });

  it("desired keys carry the bearer only as the placeholder, and only on hal0's two servers; without it no Authorization header", () => {
    const withBearer = desired(PERSON, [SEARCH]);
    expect(withBearer["hal0-admin"]!.headers).toEqual({ Authorization: BEARER_PLACEHOLDER });
    expect(withBearer.search).not.toHaveProperty("headers");
    const bare = desiredHal0Keys(PERSON, "hermes__coder", BASE, [SEARCH]);
    expect(bare["hal0-admin"]).toEqual({ type: "http", url: `${BASE}/mcp/admin`, timeout: 60 });
    const privateOnly = desiredHal0Keys(`${PERSON}hal0:\n  memory_private: true\n`, "hermes__coder", BASE, []);
    expect(privateOnly["hal0-memory"]!.headers).toEqual({ "X-hal0-Private": "1" });
  });

  it("fillBearer: the token once, for every placeholder; without a token the header (and a headers left empty) goes; the input is untouched", () => {
    const text = `${PERSON}hal0:\n  memory_private: true\n`;
    const want = desired(text, [SEARCH]);
    const copy = structuredClone(want);
    let reads = 0;
    const filled = fillBearer(want, () => (reads++, TOKEN));
    expect(reads).toBe(1);
    expect(filled["hal0-memory"]).toMatchObject({ headers: { Authorization: `Bearer ${TOKEN}`, "X-hal0-Private": "1" } });
    expect(fillBearer(want, undefined)["hal0-memory"]).toMatchObject({ headers: { "X-hal0-Private": "1" } });
    expect(JSON.stringify(fillBearer(want, undefined))).not.toContain("Authorization");
    expect(fillBearer(desired(PERSON), undefined)["hal0-admin"]).toEqual({ type: "http", url: `${BASE}/mcp/admin`, timeout: 60 });
    expect(fillBearer(want, undefined).search).toBe(want.search);
    expect(want).toEqual(copy);
    // Nothing to fill: the token is not read.
    expect(fillBearer(desiredHal0Keys(PERSON, "hermes__coder", BASE, []), () => { throw new Error("read"); })).toBeDefined();
  });

  it("redactHal0Keys hides every Authorization header, keeps the bearers apart, and leaves its input alone", () => {
    const current = {
      "hal0-admin": { url: "u", headers: { Authorization: `Bearer ${TOKEN}`, "X-hal0-Private": "1" } },
      "hal0-memory": { url: "u", headers: { authorization: "Basic dXNlcjpwYXNz" } },
      search: { url: "u", headers: { Authorization: "Bearer sk-live-secret" } },
      plain: { url: "u" },
    };
    const copy = structuredClone(current);
    const { view, bearers } = redactHal0Keys(current);
    expect(view).toEqual({
      "hal0-admin": { url: "u", headers: { Authorization: BEARER_PLACEHOLDER, "X-hal0-Private": "1" } },
      "hal0-memory": { url: "u", headers: { authorization: "[redacted]" } },
      search: { url: "u", headers: { Authorization: BEARER_PLACEHOLDER } },
      plain: { url: "u" },
    });
    expect(bearers).toEqual({ "hal0-admin": TOKEN, search: "sk-live-secret" });
    expect(JSON.stringify(view)).not.toMatch(/hal0_ag_|dXNlcjpwYXNz|sk-live/);
    expect(current).toEqual(copy);
  });

  it("emits X-hal0-Private as the quoted string \"1\" with hal0: {memory_private: true}", () => {
    const text = `${PERSON}hal0:\n  memory_private: true\n`;
    const out = wire(text);
    expect(out).toContain('X-hal0-Private: "1"');
    expect(out).not.toMatch(/X-hal0-Private: 1\s/);
    const js = parse(out) as { mcp_servers: Record<string, { headers: Record<string, unknown> }> };
    expect(js.mcp_servers["hal0-memory"]!.headers["X-hal0-Private"]).toBe("1");
    expect(withoutHal0(out)).toBe(text);
  });

  it("treats an integer X-hal0-Private written by hand as a difference and restores the string", () => {
    const text = `${PERSON}hal0:\n  memory_private: true\n`;
    const edited = wire(text).replace('X-hal0-Private: "1"', "X-hal0-Private: 1");
    expect(redactHal0Keys(currentHal0Keys(edited, [])).view).not.toEqual(desired(edited));
    expect(wire(edited)).toBe(wire(text));
  });

  it("reads the hal0: switches as Hermes does (YAML 1.1): wire_mcp: no / off opts out, memory_private: yes / on opts in; a quoted \"no\" is a string and changes nothing", () => {
    for (const word of ["no", "No", "NO", "off", "Off", "false"]) expect(desired(`model: x\nhal0:\n  wire_mcp: ${word}\n`), word).toEqual({});
    for (const word of ['"no"', "'off'", "yes", "nope"]) expect(Object.keys(desired(`model: x\nhal0:\n  wire_mcp: ${word}\n`)), word).toEqual(["hal0-admin", "hal0-memory"]);
    for (const word of ["yes", "Yes", "on", "ON", "true"]) expect(desired(`hal0: {memory_private: ${word}}\n`)["hal0-memory"]!.headers, word).toEqual({ Authorization: BEARER_PLACEHOLDER, "X-hal0-Private": "1" });
    for (const word of ['"yes"', "no", "1"]) expect(desired(`hal0: {memory_private: ${word}}\n`)["hal0-memory"]!.headers, word).toEqual({ Authorization: BEARER_PLACEHOLDER });
    // An opted-out profile wired before loses exactly hal0's entries.
    expect(applyHal0Keys(`${wire(PERSON)}hal0:\n  wire_mcp: off\n`, desired(`${wire(PERSON)}hal0:\n  wire_mcp: off\n`), [])).toBe(`${PERSON}hal0:\n  wire_mcp: off\n`);
  });

  it("with hal0: {wire_mcp: false} removes exactly hal0's keys; the person's server stays", () => {
    const wired = wire(PERSON, [], [SEARCH]);
    const optedOut = `${wired}hal0:\n  wire_mcp: false\n`;
    expect(desired(optedOut, [SEARCH])).toEqual({});
    const out = wire(optedOut, ["search"], [SEARCH]);
    expect(out).toBe(`${PERSON}hal0:\n  wire_mcp: false\n`);
    expect(currentHal0Keys(out, ["search"])).toEqual({});
  });

  it("joins an exposed, enabled http server, and removes a joined one only if hal0 added it", () => {
    const joined = wire(PERSON, [], [SEARCH]);
    expect((parse(joined) as { mcp_servers: Record<string, unknown> }).mcp_servers.search).toEqual({ type: "http", url: SEARCH.url, timeout: 60 });
    // Exposure turned off: hal0 added `search`, so it goes.
    expect(withoutHal0(wire(joined, ["search"], []))).toBe(PERSON);
    // Not recorded as hal0's: it stays.
    expect(wire(joined, [], [])).toContain("\n  search:\n");
    // The person's github server is never hal0's, even if named in a stale record of another id.
    expect(wire(PERSON, ["search"], [])).toContain("github:");
  });

  it("skips servers that are disabled, not exposed to hermes, or without a url", () => {
    const servers: JoinableServer[] = [
      { ...SEARCH, id: "off", enabled: false },
      { ...SEARCH, id: "hidden", exposure: { hermes: false, brain: true } },
      { ...SEARCH, id: "local", transport: "stdio", url: undefined },
      { ...SEARCH, id: "held", tools: { allow: [], gated: ["drop_table"], blocked: [] } }, // Hermes cannot hold a call for a person
    ];
    expect(Object.keys(desiredHal0Keys(PERSON, "hermes__coder", BASE, servers))).toEqual(["hal0-admin", "hal0-memory"]);
  });

  it("reaches hal0-brain by exposure.brain and every other profile by exposure.hermes, with the [tools] policy as Hermes' filter", () => {
    const servers: JoinableServer[] = [
      { ...SEARCH, id: "for-brain", exposure: { hermes: false, brain: true } },
      { ...SEARCH, id: "for-hermes", tools: { allow: ["search", "fetch"], gated: [], blocked: ["delete_all"] } },
    ];
    expect(Object.keys(desiredHal0Keys(PERSON, "hermes__hal0-brain", BASE, servers))).toEqual(["hal0-admin", "hal0-memory", "for-brain"]);
    const coder = desiredHal0Keys(PERSON, "hermes__coder", BASE, servers);
    expect(Object.keys(coder)).toEqual(["hal0-admin", "hal0-memory", "for-hermes"]);
    expect(coder["for-hermes"]).toEqual({ type: "http", url: SEARCH.url, timeout: 60, tools: { include: ["fetch", "search"], exclude: ["delete_all"] } });
    expect(wire(PERSON, [], servers)).toMatch(/ {2}for-hermes:\n {4}type: http\n[\s\S]*? {4}tools:\n {6}include:\n {8}- fetch\n {8}- search\n {6}exclude:\n {8}- delete_all\n/);
  });

  it("replaces a hand-edited hal0 key in place, keeping the entries after it", () => {
    const wired = wire(PERSON);
    const edited = wired.replace(`${BASE}/mcp/admin`, "http://elsewhere:1/mcp/admin");
    expect(currentHal0Keys(edited, [])["hal0-admin"]).toMatchObject({ url: "http://elsewhere:1/mcp/admin" });
    expect(wire(edited)).toBe(wired);
  });

  it("creates mcp_servers in a file that has none, and fills an empty one", () => {
    const bare = "# just a model\nmodel:\n  default: x\n";
    const out = wire(bare);
    expect(out.startsWith(bare)).toBe(true);
    expect(out).toContain("mcp_servers:\n  hal0-admin:\n");
    expect(wire(out)).toBe(out);
    const empty = "model: x\nmcp_servers:\nagent: {}\n";
    const filled = wire(empty);
    expect(filled).toMatch(/^model: x\nmcp_servers:\n  hal0-admin:\n[\s\S]*\nagent: \{\}\n$/);
    expect(wire("")).toContain("mcp_servers:\n");
    expect(wire("model: x")).toBe(`model: x\n${wire("").trimStart()}`);
  });

  it("creates mcp_servers inside a document closed by an end marker (`...`), not after it, where it would be a second document Hermes cannot load", () => {
    for (const text of ["model: x\n...\n", "---\nmodel: x\n# note\n... # end\n# after\n", "---\n...\n", "model: x\n..."]) {
      const out = wire(text);
      expect(() => parse(out), JSON.stringify(out)).not.toThrow();
      expect(parse(out), JSON.stringify(out)).toMatchObject({ mcp_servers: { "hal0-admin": { url: `${BASE}/mcp/admin` } } });
      // The marker and what follows it stay, after hal0's lines; wiring again changes nothing.
      expect(out.slice(out.lastIndexOf("\n  hal0-memory:"))).toMatch(/\n\.\.\.[^\n]*\n?(# after\n)?$/);
      expect(wire(out)).toBe(out);
    }
  });

  it("an entry of hal0's that uses an anchor of one hal0 rewrites (headers: *h beside &h) is rewritten too, not left with an alias to nothing", () => {
    const shared = `model: x\nmcp_servers:\n  hal0-admin:\n    type: http\n    url: ${BASE}/mcp/admin\n    timeout: 5\n    headers: &h\n      Authorization: "Bearer ${TOKEN}"\n  hal0-memory:\n    type: http\n    url: ${BASE}/mcp/memory\n    timeout: 60\n    headers: *h\n  mine:\n    url: http://x\n`;
    const out = wire(shared);
    expect(() => parse(out)).not.toThrow();
    expect(parse(out)).toEqual({ model: "x", mcp_servers: { ...fillBearer(desired(shared), () => TOKEN), mine: { url: "http://x" } } });
    expect(out).not.toContain("*h");
    expect(wire(out)).toBe(out);
  });

  it("refuses a file that is not YAML it can edit", () => {
    expect(() => wire("model: [unclosed\n")).toThrow(HermesYamlError);
    expect(() => wire("- a list\n")).toThrow(HermesYamlError);
    expect(() => wire("mcp_servers: {a: {url: x}}\n")).toThrow(HermesYamlError);
  });

  describe("round trips on files shaped in many ways", () => {
    const SHAPES: Record<string, string> = {
      "four-space indent": "model: x\nmcp_servers:\n    mine:\n        url: http://a/mcp\n        timeout: 5\nagent: {max_turns: 3}\n",
      "mcp_servers first, comments after it": "mcp_servers:\n  mine: {url: http://a}   # flow entry\n  # a note at the end of the map\n\n# and a section comment\nmodel: x\n",
      "last key, no final newline": "model: x\nmcp_servers:\n  mine:\n    url: http://a",
      "CRLF line ends": "model: x\r\nmcp_servers:\r\n  mine:\r\n    url: http://a\r\nagent:\r\n  max_turns: 3\r\n",
      "document start marker": "---\n# top\nmodel: x\nmcp_servers:\n  mine:\n    url: http://a\n",
      "quoted keys and a block scalar": "\"model\": x\nmcp_servers:\n  'mine':\n    args: |\n      a\n      b\n    url: http://a\nz: 1\n",
    };
    it.each(Object.entries(SHAPES))("%s: wire, re-wire (same text), unwire (the original text), values as desired", (_name, text) => {
      const wired = wire(text, [], [SEARCH]);
      expect(wire(wired, ["search"], [SEARCH])).toBe(wired);
      expect(redactHal0Keys(currentHal0Keys(wired, ["search"])).view).toEqual(desired(wired, [SEARCH]));
      // The only byte hal0 adds for good: a final newline, when the file had none and hal0 appended after its last line.
      expect(applyHal0Keys(wired, {}, ["search"])).toBe(text.endsWith("\n") ? text : `${text}\n`);
      const js = parse(wired) as { mcp_servers: Record<string, unknown> };
      expect(Object.keys(js.mcp_servers)).toEqual(["mine", "hal0-admin", "hal0-memory", "search"]);
      if (text.includes("\r\n")) expect(wired.replace(/\r\n/g, "")).not.toContain("\n");
    });
  });
});
