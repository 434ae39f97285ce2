import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ApiError } from "../../server/errors.js";
import { checkUrlTarget, classifyAddress, guardedFetch, MAX_BODY_BYTES, type LookupFn, type ResolvedAddress } from "../../server/mcp-servers/ssrf.js";

// No test here opens a connection outside 127.0.0.0/8: every other target goes through
// checkUrlTarget (which never connects) or is refused before connecting.

/** A resolver over a fixed table; an unknown name fails (as ENOTFOUND would), and every call is recorded. */
function fakeLookup(table: Record<string, string[]>): LookupFn & { calls: string[] } {
  const calls: string[] = [];
  const fn = async (host: string): Promise<ResolvedAddress[]> => {
    calls.push(host);
    const found = table[host];
    if (found === undefined) throw new Error(`getaddrinfo ENOTFOUND ${host}`);
    return found.map((address) => ({ address, family: address.includes(":") ? 6 : 4 }));
  };
  return Object.assign(fn, { calls });
}

async function refusal(p: Promise<unknown>): Promise<ApiError> {
  const err = await p.then(() => undefined, (e: unknown) => e);
  if (!(err instanceof ApiError)) throw new Error(`expected an ApiError, got ${String(err)}`);
  return err;
}

const DNS = {
  "internal.example": ["10.1.2.3"],
  "split.example": ["93.184.215.14", "127.0.0.1"],
  "v6only.example": ["fd00::5"],
  "example.com": ["93.184.215.14"],
  "dual.example": ["2606:4700::1111", "93.184.215.14"],
};

describe("checkUrlTarget: the target table", () => {
  const blockedRows: ReadonlyArray<readonly [string, string, string]> = [
    // [url, address named in the refusal, range]
    ["https://127.0.0.1/", "127.0.0.1", "loopback"],
    ["https://127.255.255.254:8443/x", "127.255.255.254", "loopback"],
    ["https://[::1]/", "::1", "loopback"],
    ["https://[0:0:0:0:0:0:0:1]/", "::1", "loopback"],
    ["https://2130706433/", "127.0.0.1", "loopback"],
    ["https://0177.0.0.1/", "127.0.0.1", "loopback"],
    ["https://0x7f000001/", "127.0.0.1", "loopback"],
    ["https://0x7f.0.0.1/", "127.0.0.1", "loopback"],
    ["https://127.1/", "127.0.0.1", "loopback"],
    ["https://localhost/", "localhost", "localhost"],
    ["https://LocalHost:9000/", "localhost", "localhost"],
    ["https://localhost./", "localhost", "localhost"],
    ["https://foo.localhost/", "foo.localhost", "localhost"],
    ["https://foo.localhost./", "foo.localhost", "localhost"],
    ["https://[::ffff:127.0.0.1]/", "::ffff:7f00:1", "ipv4-mapped:loopback"],
    ["https://[::ffff:7f00:1]/", "::ffff:7f00:1", "ipv4-mapped:loopback"],
    ["https://[::ffff:10.0.0.1]/", "::ffff:a00:1", "ipv4-mapped:private"],
    ["https://[::127.0.0.1]/", "::7f00:1", "ipv4-compatible"],
    ["https://[64:ff9b::169.254.169.254]/", "64:ff9b::a9fe:a9fe", "nat64:link-local"],
    ["https://10.0.0.1/", "10.0.0.1", "private"],
    ["https://172.16.5.4/", "172.16.5.4", "private"],
    ["https://192.168.1.1/", "192.168.1.1", "private"],
    ["https://100.64.0.1/", "100.64.0.1", "cgnat"],
    ["https://169.254.169.254/latest/meta-data/", "169.254.169.254", "link-local"],
    ["https://[fe80::1]/", "fe80::1", "link-local"],
    ["https://[fc00::1]/", "fc00::1", "unique-local"],
    ["https://0.0.0.0/", "0.0.0.0", "unspecified"],
    ["https://0/", "0.0.0.0", "unspecified"],
    ["https://[::]/", "::", "unspecified"],
    ["https://printer.local/", "printer.local", "local-name"],
    ["https://metadata.google.internal/computeMetadata/v1/", "metadata.google.internal", "local-name"],
    ["https://router/", "router", "local-name"],
    ["https://internal.example/manifest.json", "10.1.2.3", "private"],
    ["https://split.example/", "127.0.0.1", "loopback"],
    ["https://v6only.example/", "fd00::5", "unique-local"],
  ];

  it.each(blockedRows)("%s is refused: %s is %s", async (url, address, range) => {
    const err = await refusal(checkUrlTarget(url, { lookup: fakeLookup(DNS) }));
    expect(err.code).toBe("mcp.ssrf_blocked");
    expect(err.status).toBe(403);
    expect(err.details).toEqual({ url, address, range });
    expect(err.message).toContain(url);
    expect(err.message).toContain(address);
  });

  const allowedRows: ReadonlyArray<readonly [string, string[]]> = [
    ["https://93.184.215.14/manifest.json", ["93.184.215.14"]],
    ["https://[2606:4700::1111]/", ["2606:4700::1111"]],
    ["https://example.com/manifest.json", ["93.184.215.14"]],
    ["https://dual.example/", ["2606:4700::1111", "93.184.215.14"]],
    ["https://[::ffff:93.184.215.14]/", ["::ffff:5db8:d70e"]],
  ];

  it.each(allowedRows)("%s passes (classified only, never fetched)", async (url, addresses) => {
    const target = await checkUrlTarget(url, { lookup: fakeLookup(DNS) });
    expect(target.addresses.map((a) => a.address)).toEqual(addresses);
    expect(target.trusted).toBe(false);
    expect(target.port).toBe(443);
    for (const a of target.addresses) expect(classifyAddress(a.address).blocked).toBe(false);
  });

  it("asks the resolver for names only, never for IP literals or refused local names", async () => {
    const lookup = fakeLookup(DNS);
    await checkUrlTarget("https://93.184.215.14/", { lookup });
    await refusal(checkUrlTarget("https://[::1]/", { lookup }));
    await refusal(checkUrlTarget("https://localhost./", { lookup }));
    await checkUrlTarget("https://example.com./", { lookup });
    expect(lookup.calls).toEqual(["example.com"]);
  });
});

describe("checkUrlTarget: schemes, shapes and the allow list", () => {
  const lookup = fakeLookup({ ...DNS, "registry.internal": ["10.9.9.9"] });

  it.each([
    ["", "empty"],
    [`https://example.com/${"a".repeat(2049 - 20)}`, "longer than 2048"],
    ["not a url", "not a URL"],
    ["file:///etc/passwd", "not file:///etc/passwd"],
    ["ftp://example.com/m.json", "only https://"],
    ["gopher://127.0.0.1:70/", "only https://"],
    ["http://93.184.215.14/", "plain http is off"],
    ["https://user:secret@example.com/", "user name or password"],
  ])("%j → mcp.url_invalid (%s)", async (url, why) => {
    const err = await refusal(checkUrlTarget(url, { lookup }));
    expect(err.code).toBe("mcp.url_invalid");
    expect(err.message).toContain(why);
    expect(JSON.stringify(err.details)).not.toContain("secret");
  });

  it("takes http:// to a public address only with allowInsecureHttp, and still refuses http:// to loopback", async () => {
    const ok = await checkUrlTarget("http://93.184.215.14/", { lookup, allowInsecureHttp: true });
    expect(ok.port).toBe(80);
    const err = await refusal(checkUrlTarget("http://127.0.0.1:8080/", { lookup, allowInsecureHttp: true }));
    expect(err.code).toBe("mcp.ssrf_blocked");
  });

  it("lets an exact host:port allow entry reach an internal host, with the default port filled in", async () => {
    const allow = ["registry.internal:443", "10.0.0.5:8443", "[fd00::5]:443", "0x7f.1:9000"];
    expect((await checkUrlTarget("https://registry.internal/m.json", { lookup, allow })).trusted).toBe(true);
    expect((await checkUrlTarget("https://registry.internal./m.json", { lookup, allow })).addresses).toEqual([{ address: "10.9.9.9", family: 4 }]);
    expect((await checkUrlTarget("https://10.0.0.5:8443/", { lookup, allow })).trusted).toBe(true);
    expect((await checkUrlTarget("https://[fd00:0::5]/", { lookup, allow })).trusted).toBe(true);
    expect((await checkUrlTarget("https://127.0.0.1:9000/", { lookup, allow })).trusted).toBe(true);
    // Another port, another host or another scheme's default port is not the entry.
    for (const url of ["https://10.0.0.5:8444/", "https://10.0.0.6:8443/", "https://registry.internal:8443/"]) {
      expect((await refusal(checkUrlTarget(url, { lookup, allow }))).code).toBe("mcp.ssrf_blocked");
    }
    const http = await refusal(checkUrlTarget("http://registry.internal/", { lookup, allow, allowInsecureHttp: true }));
    expect(http.details).toMatchObject({ range: "local-name" });
  });

  it("refuses an allow entry that is not host:port", async () => {
    const err = await refusal(checkUrlTarget("https://example.com/", { lookup, allow: ["example.com"] }));
    expect(err.code).toBe("mcp.url_invalid");
    expect(err.details).toEqual({ allow_entry: "example.com" });
  });

  it("fails a name that does not resolve (or resolves to nothing) with mcp.manifest_fetch_failed", async () => {
    const missing = await refusal(checkUrlTarget("https://nowhere.example/", { lookup }));
    expect(missing.code).toBe("mcp.manifest_fetch_failed");
    expect(missing.message).toContain("ENOTFOUND");
    const empty = await refusal(checkUrlTarget("https://empty.example/", { lookup: async () => [] }));
    expect(empty.details).toEqual({ url: "https://empty.example/", reason: "dns" });
  });
});

describe("classifyAddress", () => {
  it.each([
    ["127.0.0.1", true, "loopback"],
    ["0.255.255.255", true, "unspecified"],
    ["10.255.255.255", true, "private"],
    ["100.63.255.255", false, "public"],
    ["100.64.0.0", true, "cgnat"],
    ["100.127.255.255", true, "cgnat"],
    ["100.128.0.0", false, "public"],
    ["169.254.0.1", true, "link-local"],
    ["172.15.255.255", false, "public"],
    ["172.31.255.255", true, "private"],
    ["172.32.0.0", false, "public"],
    ["192.0.0.8", true, "ietf-protocol"],
    ["192.0.2.1", true, "documentation"],
    ["198.17.255.255", false, "public"],
    ["198.19.255.255", true, "benchmarking"],
    ["198.51.100.7", true, "documentation"],
    ["203.0.113.9", true, "documentation"],
    ["224.0.0.251", true, "multicast"],
    ["239.255.255.250", true, "multicast"],
    ["240.0.0.1", true, "reserved"],
    ["255.255.255.255", true, "broadcast"],
    ["8.8.8.8", false, "public"],
    ["::", true, "unspecified"],
    ["::1", true, "loopback"],
    ["::2", true, "ipv4-compatible"],
    ["::ffff:127.0.0.1", true, "ipv4-mapped:loopback"],
    ["::ffff:7f00:1", true, "ipv4-mapped:loopback"],
    ["::FFFF:A9FE:A9FE", true, "ipv4-mapped:link-local"],
    ["::ffff:8.8.8.8", false, "ipv4-mapped:public"],
    ["64:ff9b::7f00:1", true, "nat64:loopback"],
    ["64:ff9b::100.64.0.1", true, "nat64:cgnat"],
    ["64:ff9b::808:808", false, "nat64:public"],
    ["64:ff9b:1::1", true, "nat64-local"],
    ["2002:c0a8:101::1", true, "6to4:private"],
    ["2002:808:808::1", false, "6to4:public"],
    ["fc00::1", true, "unique-local"],
    ["fdff:ffff::1", true, "unique-local"],
    ["fe80::1%eth0", true, "link-local"],
    ["febf::1", true, "link-local"],
    ["fec0::1", true, "site-local"],
    ["ff02::1", true, "multicast"],
    ["2001:db8::1", true, "documentation"],
    ["100::1", true, "discard"],
    ["4000::1", true, "reserved"],
    ["2606:4700::1111", false, "public"],
    ["2a00:1450:4001:80b::200e", false, "public"],
    ["not-an-ip", true, "invalid"],
    ["", true, "invalid"],
    ["127.0.0.1.nip.io", true, "invalid"],
  ])("%s → blocked %s (%s)", (ip, blocked, range) => {
    expect(classifyAddress(ip)).toEqual({ blocked, range });
  });
});

describe("guardedFetch on loopback", () => {
  let a: Server;
  let b: Server;
  let silent: Server;
  let portA = 0;
  let portB = 0;
  let portSilent = 0;
  const hits = { a: new Map<string, number>(), b: 0 };
  const manifest = JSON.stringify({ id: "demo", name: "Demo" });

  function routeA(req: IncomingMessage, res: ServerResponse): void {
    const path = req.url ?? "/";
    hits.a.set(path, (hits.a.get(path) ?? 0) + 1);
    const redirect = (to: string): void => void res.writeHead(302, { location: to }).end();
    if (path === "/to-b") return redirect(`http://127.0.0.1:${portB}/manifest.json`);
    if (path === "/to-localhost") return redirect(`http://localhost:${portB}/`);
    if (path === "/to-file") return redirect("file:///etc/passwd");
    if (path === "/hop") return redirect("/manifest.json");
    if (path === "/loop") return redirect("/loop");
    if (path === "/manifest.json") return void res.writeHead(200, { "content-type": "application/json", "x-b": "1" }).end(manifest);
    if (path === "/exact") return void res.end("x".repeat(MAX_BODY_BYTES));
    if (path === "/big") {
      // Chunked: no content-length to judge by, so the reader must count.
      res.writeHead(200, { "content-type": "application/json" });
      for (let i = 0; i < 16; i++) res.write("x".repeat(MAX_BODY_BYTES / 16));
      return void res.end("x");
    }
    if (path === "/big-declared") return void res.writeHead(200, { "content-length": String(2 * MAX_BODY_BYTES) }).end("x".repeat(2 * MAX_BODY_BYTES));
    res.writeHead(404).end("no");
  }

  const listen = (srv: Server) => new Promise<number>((resolve) => srv.listen(0, "127.0.0.1", () => resolve((srv.address() as AddressInfo).port)));
  beforeAll(async () => {
    a = createServer(routeA);
    b = createServer((_req, res) => {
      hits.b += 1;
      res.end(manifest);
    });
    silent = createServer(() => undefined);
    [portA, portB, portSilent] = await Promise.all([listen(a), listen(b), listen(silent)]);
  });
  afterAll(async () => {
    for (const srv of [a, b, silent]) {
      srv.closeAllConnections();
      await new Promise((resolve) => srv.close(resolve));
    }
  });

  const noDns = fakeLookup({});
  const opts = () => ({ allow: [`127.0.0.1:${portA}`, `127.0.0.1:${portSilent}`], allowInsecureHttp: true, lookup: noDns });

  it("fetches from an allowed loopback server and follows a relative redirect to it", async () => {
    const doc = await guardedFetch(`http://127.0.0.1:${portA}/hop`, opts());
    expect(doc).toMatchObject({ url: `http://127.0.0.1:${portA}/manifest.json`, status: 200, body: manifest });
    expect(doc.headers).toMatchObject({ "content-type": "application/json", "x-b": "1" });
    expect(Object.keys(doc.headers)).toEqual([...Object.keys(doc.headers)].sort());
  });

  it("refuses a redirect to a loopback server that is not allowed, before connecting to it", async () => {
    const before = hits.b;
    const err = await refusal(guardedFetch(`http://127.0.0.1:${portA}/to-b`, opts()));
    expect(err.code).toBe("mcp.ssrf_blocked");
    expect(err.details).toEqual({ url: `http://127.0.0.1:${portB}/manifest.json`, address: "127.0.0.1", range: "loopback" });
    expect(hits.a.get("/to-b")).toBe(1);
    expect(hits.b).toBe(before);
  });

  it("refuses a redirect to http://localhost:<port>/, and a direct fetch from the unlisted server", async () => {
    const before = hits.b;
    const viaName = await refusal(guardedFetch(`http://127.0.0.1:${portA}/to-localhost`, opts()));
    expect(viaName.details).toEqual({ url: `http://localhost:${portB}/`, address: "localhost", range: "localhost" });
    const direct = await refusal(guardedFetch(`http://127.0.0.1:${portB}/manifest.json`, opts()));
    expect(direct.code).toBe("mcp.ssrf_blocked");
    expect(hits.b).toBe(before);
    expect(noDns.calls).toEqual([]);
  });

  it("connects to the checked address: a trusted name resolved once is never asked of the system resolver", async () => {
    let answers = 0;
    // A rebinding resolver: the first answer is the allowed server, any later one is elsewhere.
    const rebinding: LookupFn = async () => [{ address: answers++ === 0 ? "127.0.0.1" : "192.0.2.1", family: 4 }];
    const doc = await guardedFetch(`http://manifest.invalid:${portA}/manifest.json`, { allow: [`manifest.invalid:${portA}`], allowInsecureHttp: true, lookup: rebinding });
    expect(doc.body).toBe(manifest);
    expect(answers).toBe(1);
  });

  it("fails after 5 redirects of a loop: 6 requests, then mcp.manifest_fetch_failed", async () => {
    const err = await refusal(guardedFetch(`http://127.0.0.1:${portA}/loop`, opts()));
    expect(err.code).toBe("mcp.manifest_fetch_failed");
    expect(err.details).toEqual({ url: `http://127.0.0.1:${portA}/loop`, redirects: 5 });
    expect(hits.a.get("/loop")).toBe(6);
  });

  it("turns a redirect to another scheme, or an https→http downgrade, into mcp.manifest_fetch_failed", async () => {
    const file = await refusal(guardedFetch(`http://127.0.0.1:${portA}/to-file`, opts()));
    expect(file.code).toBe("mcp.manifest_fetch_failed");
    expect(file.details).toEqual({ url: `http://127.0.0.1:${portA}/to-file`, location: "file:///etc/passwd" });
    const strict = await refusal(guardedFetch(`http://127.0.0.1:${portA}/hop`, { ...opts(), allowInsecureHttp: false }));
    expect(strict.code).toBe("mcp.url_invalid");
  });

  it("reads a body of exactly 1 MiB and refuses one byte more, streamed or declared", async () => {
    expect((await guardedFetch(`http://127.0.0.1:${portA}/exact`, opts())).body).toHaveLength(MAX_BODY_BYTES);
    for (const path of ["/big", "/big-declared"]) {
      const err = await refusal(guardedFetch(`http://127.0.0.1:${portA}${path}`, opts()));
      expect(err.code).toBe("mcp.manifest_fetch_failed");
      expect(err.details).toMatchObject({ status: 200, limit: MAX_BODY_BYTES });
    }
  });

  it("fails a non-2xx reply with its status, and a server that never answers at the deadline", async () => {
    const missing = await refusal(guardedFetch(`http://127.0.0.1:${portA}/nope`, opts()));
    expect(missing.code).toBe("mcp.manifest_fetch_failed");
    expect(missing.status).toBe(502);
    expect(missing.details).toEqual({ url: `http://127.0.0.1:${portA}/nope`, status: 404 });
    const hung = await refusal(guardedFetch(`http://127.0.0.1:${portSilent}/`, { ...opts(), timeoutMs: 200 }));
    expect(hung.details).toMatchObject({ reason: "timeout" });
  });
});
