import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { Ajv } from "ajv";
import { parse as parseToml } from "smol-toml";
import { describe, expect, it } from "vitest";
import { compile, loadTree, sourceTree } from "../../compiler/index.js";
import { FILE_KINDS, classifyPath, renderJsonSchemas } from "../../schema/index.js";

const committed = join(import.meta.dirname, "../../schema/json");

describe("committed JSON Schemas", () => {
  const rendered = renderJsonSchemas();

  it("has one schema per file kind", () => {
    expect([...rendered.keys()].sort()).toEqual(FILE_KINDS.map((k) => k.jsonSchema).sort());
  });

  it("are current: `npm run schema` regenerates schema/json/", () => {
    const onDisk = readdirSync(committed).filter((f) => f.endsWith(".schema.json")).sort();
    expect(onDisk).toEqual([...rendered.keys()].sort());
    for (const [name, text] of rendered) {
      expect(readFileSync(join(committed, name), "utf8"), `${name} is stale: run npm run schema`).toBe(text);
    }
  });

  it("are draft-07, strict, and keep defaulted keys optional (input side)", () => {
    const slot = JSON.parse(rendered.get("slot.schema.json")!);
    expect(slot.$schema).toBe("http://json-schema.org/draft-07/schema#");
    expect(slot.additionalProperties).toBe(false);
    expect(slot.required.sort()).toEqual(["port", "profile"]);
    expect(slot.properties.priority).toMatchObject({ minimum: 0, maximum: 100, default: 50 });
    const settings = JSON.parse(rendered.get("hal0.schema.json")!);
    expect(settings.required ?? []).toEqual([]);
    expect(settings.properties.slots.properties.runtime.enum).toEqual(["process", "docker", "swarm"]);
  });
});

/**
 * The JSON Schemas against documents (issue 16 point 5): what the compiler
 * refuses and JSON Schema can say, the schemas refuse too, so Taplo in an
 * editor and `hal0 validate` agree. Ajv (draft-07) stands in for Taplo's
 * validator; it is in node_modules through @modelcontextprotocol/sdk.
 */
describe("the JSON Schemas agree with the compiler", () => {
  const rendered = renderJsonSchemas();
  const ajv = new Ajv({ strict: false, allErrors: true });
  const validators = new Map([...rendered].map(([name, text]) => [name, ajv.compile(JSON.parse(text))]));
  const validatorFor = (file: string) => validators.get(classifyPath(file)!.kind.jsonSchema)!;
  const schemaAccepts = (file: string, text: string) => validatorFor(file)(parseToml(text)) as boolean;
  const compilerErrors = (file: string, text: string) =>
    compile(sourceTree("/box", [[file, text]])).diagnostics.filter((d) => d.severity === "error" && d.file === file).map((d) => d.code);

  /** Every `type` keyword of a schema, wherever it sits. */
  function typesIn(node: unknown, out: string[] = []): string[] {
    if (Array.isArray(node)) for (const item of node) typesIn(item, out);
    else if (node && typeof node === "object") {
      for (const [key, value] of Object.entries(node)) {
        if (key === "type" && typeof value === "string") out.push(value);
        else typesIn(value, out);
      }
    }
    return out;
  }

  it("say integer for every number: no hal0 file kind has a float field (schema_version, ports, counts)", () => {
    for (const [name, text] of rendered) expect(typesIn(JSON.parse(text)), name).not.toContain("number");
    const agent = JSON.parse(rendered.get("agent.schema.json")!);
    expect(agent.properties.schema_version).toMatchObject({ type: "integer", const: 1 });
    const settings = JSON.parse(rendered.get("hal0.schema.json")!);
    expect(settings.properties.server.properties.port).toMatchObject({ type: "integer", minimum: 1, maximum: 65535 });
    expect(JSON.parse(rendered.get("slot.schema.json")!).properties.port.type).toBe("integer");
  });

  it("accept every file of fixtures/box", async () => {
    const { tree } = await loadTree(join(import.meta.dirname, "../../fixtures/box"));
    for (const [file, text] of tree.files) {
      const validate = validatorFor(file);
      expect(validate(parseToml(text)), `${file}: ${JSON.stringify(validate.errors)}`).toBe(true);
    }
  });

  const AGENT = (workspace: string) => `[agent]\nname = "coder"\nworkspace = ${JSON.stringify(workspace)}\n`;
  const refused: Array<[string, string, string]> = [
    ["a fractional port", "slots/chat.toml", `profile = "vulkan"\nport = 8081.5\nenabled = false\n`],
    ["a port as a string", "slots/chat.toml", `profile = "vulkan"\nport = "8081"\nenabled = false\n`],
    ["a fractional schema_version", "agents/coder.toml", `schema_version = 1.5\n${AGENT("")}`],
    ["a workspace with a .. segment", "agents/coder.toml", AGENT("/srv/agents/../etc")],
    ["a workspace ending in ..", "agents/coder.toml", AGENT("/srv/..")],
    ["a workspace with a . segment", "agents/coder.toml", AGENT("/srv/./work")],
    ["a relative workspace", "agents/coder.toml", AGENT("work/space")],
    ["a workspace holding NUL", "agents/coder.toml", AGENT("/srv/a\u0000b")],
    ["an agent server that is neither builtin nor has a url", "agents/coder.toml", `${AGENT("")}\n[mcp.servers.files]\nenabled = true\n`],
    ["bearer-from-env auth without env", "agents/coder.toml", `${AGENT("")}\n[mcp.servers.files]\nurl = "http://127.0.0.1:9000/mcp"\nauth = { kind = "bearer-from-env" }\n`],
    ["a stdio MCP server without command", "mcp-servers/files.toml", `name = "Files"\nspec = "uvx:files"\ntransport = "stdio"\n`],
    ["an sse MCP server without url", "mcp-servers/files.toml", `name = "Files"\nspec = "uvx:files"\ntransport = "sse"\n`],
    ["a remote upstream (kind defaulted) without url", "upstreams.toml", `[[upstream]]\nname = "openrouter"\n`],
    ["a slot upstream without slot_name", "upstreams.toml", `[[upstream]]\nname = "local"\nkind = "slot"\n`],
    ["bearer auth without auth_value_env", "upstreams.toml", `[[upstream]]\nname = "a"\nurl = "https://a.example/v1"\nauth_style = "bearer"\n`],
    ["a model without a path or hf_repo and hf_filename", "models.toml", `[model.m]\nhf_repo = "org/repo"\n`],
  ];
  it.each(refused)("both refuse %s", (_what, file, text) => {
    expect(compilerErrors(file, text).length).toBeGreaterThan(0);
    expect(schemaAccepts(file, text)).toBe(false);
  });

  const accepted: Array<[string, string, string]> = [
    ["an empty workspace (the default)", "agents/coder.toml", AGENT("")],
    ["an absolute workspace with dots inside names", "agents/coder.toml", AGENT("/srv/..work/v1.2/...")],
    ["a builtin agent server without url", "agents/coder.toml", `${AGENT("")}\n[mcp.servers.hal0-admin]\nbuiltin = true\n`],
    ["a stdio MCP server with a command", "mcp-servers/files.toml", `name = "Files"\nspec = "uvx:files"\ntransport = "stdio"\ncommand = "uvx"\n`],
    ["a remote upstream with url, a slot upstream with slot_name", "upstreams.toml", `[[upstream]]\nname = "a"\nurl = "https://a.example/v1"\n\n[[upstream]]\nname = "b"\nkind = "slot"\nslot_name = "chat"\n`],
    ["a model from Hugging Face", "models.toml", `[model.m]\nhf_repo = "org/repo"\nhf_filename = "m.gguf"\n`],
  ];
  it.each(accepted)("both accept %s", (_what, file, text) => {
    expect(schemaAccepts(file, text)).toBe(true);
    expect(compilerErrors(file, text).filter((c) => c !== "upstream.unknown_slot")).toEqual([]);
  });

  it("cannot tell `port = 8081.0` from 8081 (JSON Schema counts it an integer); the compiler refuses it", () => {
    expect(compilerErrors("slots/chat.toml", `profile = "vulkan"\nport = 8081.0\nenabled = false\n`)).toContain("config.invalid_type");
    expect(schemaAccepts("slots/chat.toml", `profile = "vulkan"\nport = 8081.0\nenabled = false\n`)).toBe(true);
  });
});
