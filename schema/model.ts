import { z } from "zod";
import { ResourceId } from "./names.js";
import { DEVICES, SLOT_TYPES } from "./slot.js";
import { whenValid } from "./when.js";

/** `models.toml`: `[model.<id>]` file facts only. Tuning lives on profiles and slots. */

export const CAPABILITY_PATTERN = /^[a-z][a-z0-9_-]{0,31}$/;

export const ModelFacts = z
  .strictObject({
  name: z.string().optional(),
  /** Relative paths resolve against the config folder. */
  path: z.string().min(1).optional(),
  type: z.enum(SLOT_TYPES).default("llm"),
  capabilities: z.array(z.string().regex(CAPABILITY_PATTERN, "a capability: 1–32 characters, lowercase a–z, digits, `_` and `-`, starting with a letter")).default([]),
  devices: z.array(z.enum(DEVICES)).default([]),
  hf_repo: z.string().regex(/^[A-Za-z0-9][A-Za-z0-9._-]*\/[A-Za-z0-9][A-Za-z0-9._-]*$/, "a Hub repository as owner/name (letters, digits, `.`, `_` and `-`)").optional(),
  hf_filename: z.string().min(1).optional(),
  /** The Hub commit the file was pulled at (x-repo-commit); model_update_check compares it with the Hub's. */
  revision: z.string().regex(/^[0-9a-f]{7,64}$/, "a commit: 7 to 64 lowercase hex digits").optional(),
  /** The file's sha256 as the Hub's LFS oid said and the pull verified. */
  sha256: z.string().regex(/^[0-9a-f]{64}$/, "a sha256: 64 lowercase hex digits").optional(),
  /** The model's native context window in tokens. */
  context_length: z.int().min(1).optional(),
  /** The architecture its GGUF header names (`general.architecture`: llama, qwen3, gemma3, …); a fact, checked against the header when the file is a GGUF. */
  architecture: z.string().regex(/^[a-z0-9][a-z0-9_.-]*$/, "an architecture as GGUF names it: lowercase a–z, digits, `_`, `.` and `-`").optional(),
  size_bytes: z.int().min(0).optional(),
  /**
   * A split model's other parts (`-00002-of-00003.gguf`, …), each beside its
   * `path` under `file`, with the sha256 and size a pull verified (`sha256`
   * and `size_bytes` above are its first part's): the health check and the
   * update check look at every part, not only the first.
   */
  parts: z.array(z.strictObject({
    file: z.string().regex(/^(?!\.\.?$)[^/\\\u0000]+$/, "a file name beside the model's path (no folder, not `.` or `..`)"),
    sha256: z.string().regex(/^[0-9a-f]{64}$/, "a sha256: 64 lowercase hex digits").optional(),
    size_bytes: z.int().min(0).optional(),
  })).optional(),
  quant: z.string().optional(),
  /** "auto" uses the template embedded in the GGUF. */
  chat_template: z.string().min(1).default("auto"),
  tokenizer_repo: z.string().optional(),
  jinja: z.boolean().default(false),
  /** The model carries multi-token-prediction heads. */
  mtp: z.boolean().default(false),
  /** Drafter model file for `speculation = "draft"`; absent = none. */
  draft: z.string().min(1).optional(),
  /** Vision projector; absent = none. */
  mmproj: z.string().min(1).optional(),
  tags: z.array(z.string()).default([]),
  })
  .superRefine((m, ctx) => {
    if (m.path === undefined && (m.hf_repo === undefined || m.hf_filename === undefined)) {
      ctx.addIssue({ code: "custom", path: [], message: "a model needs a path, or hf_repo and hf_filename", params: { code: "model.source_required", detail: "Give the model a local `path` (relative paths resolve against the config folder), or `hf_repo` and `hf_filename` to fetch it." } });
    }
  }, { when: whenValid("path", "hf_repo", "hf_filename") })
  // The rule above, for editors (Taplo reads the JSON Schema).
  .meta({ anyOf: [{ required: ["path"] }, { required: ["hf_repo", "hf_filename"] }] });
export type ModelFacts = z.infer<typeof ModelFacts>;

export const ModelsFile = z.strictObject({
  model: z.record(ResourceId, ModelFacts).prefault({}),
});
