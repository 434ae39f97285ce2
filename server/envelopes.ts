import { z } from "zod";
import { hashOf } from "../compiler/index.js";
import { Profile, ProfileName, ResourceId, Stack } from "../schema/index.js";
import { ApiError } from "./errors.js";
import { redact } from "./redact.js";

/**
 * The export/import envelopes (`.hal0profile.json`, `.hal0stack.json`).
 * `checksum` = `sha256:<hex>` of the canonical JSON (keys sorted at every
 * depth) of the envelope without its `checksum` member, so a change to any
 * other member — the payload, the name, the version — breaks it.
 */

export const ENVELOPE_VERSION = 1;

type Kind = "hal0.profile" | "hal0.stack";

const CODES = {
  "hal0.profile": { bad: "profiles.bad_envelope", tooNew: "profiles.envelope_too_new" },
  "hal0.stack": { bad: "stacks.bad_envelope", tooNew: "stacks.envelope_too_new" },
} as const;

/** Seals `body` (everything but the checksum) with its checksum. */
export function seal<T extends Record<string, unknown>>(body: T): T & { checksum: string } {
  const clean = JSON.parse(JSON.stringify(body)) as T;
  return { ...clean, checksum: hashOf(clean) };
}

/** An envelope's outer shape; the payload is checked against its schema after the checksum. */
const Outer = z.looseObject({
  kind: z.string(),
  version: z.int().min(1),
  checksum: z.string().regex(/^sha256:[0-9a-f]{64}$/),
});

/** Checks kind, version and checksum; returns the envelope without its checksum. Throws the kind's codes. */
function open(kind: Kind, envelope: unknown): Record<string, unknown> {
  const codes = CODES[kind];
  const outer = Outer.safeParse(envelope);
  if (!outer.success) throw new ApiError(codes.bad, `not a ${kind} envelope: ${outer.error.issues.map((i) => `${i.path.join(".") || "envelope"}: ${i.message}`).join("; ")}`, { issues: outer.error.issues.map((i) => ({ path: i.path.map(String), message: i.message })) });
  if (outer.data.kind !== kind) throw new ApiError(codes.bad, `the envelope's kind is ${JSON.stringify(outer.data.kind)}, expected ${kind}`, { kind: outer.data.kind, expected: kind });
  if (outer.data.version > ENVELOPE_VERSION) throw new ApiError(codes.tooNew, `the envelope is version ${outer.data.version}; this hal0 reads up to version ${ENVELOPE_VERSION}`, { version: outer.data.version, supported: ENVELOPE_VERSION });
  const { checksum, ...body } = outer.data;
  const actual = hashOf(body);
  if (actual !== checksum) throw new ApiError(codes.bad, "the envelope's checksum does not match its content (edited or truncated)", { expected: checksum, actual });
  return body;
}

function payload<T>(kind: Kind, schema: z.ZodType<T>, value: unknown, what: string): T {
  const r = schema.safeParse(value);
  if (r.success) return r.data;
  throw new ApiError(CODES[kind].bad, `the envelope's ${what} does not validate: ${r.error.issues.map((i) => `${i.path.join(".") || what}: ${i.message}`).join("; ")}`, {
    issues: r.error.issues.map((i) => ({ path: [what, ...i.path.map(String)], message: i.message })),
  });
}

export interface ProfileEnvelope {
  readonly name?: string;
  /** The profile as profiles.toml writes it (input shape: absent keys stay absent). */
  readonly profile: Record<string, unknown>;
}

/** Secret values (an env API_KEY…) are masked before sealing: an envelope is for sharing, and its checksum covers what it carries. */
export function profileEnvelope(name: string, profile: Record<string, unknown>): Record<string, unknown> {
  return seal({ kind: "hal0.profile", version: ENVELOPE_VERSION, name, profile: redact(profile) });
}

export function openProfileEnvelope(envelope: unknown): ProfileEnvelope {
  const body = open("hal0.profile", envelope);
  const name = body.name === undefined || body.name === null || body.name === "" ? undefined : payload("hal0.profile", ProfileName, body.name, "name");
  const raw = payload("hal0.profile", z.record(z.string(), z.unknown()), body.profile, "profile");
  payload("hal0.profile", Profile, raw, "profile");
  return { name, profile: raw };
}

export interface StackEnvelope {
  readonly slug?: string;
  readonly stack: Record<string, unknown>;
  /** Profiles the stack names that the exporting box defined itself (not seeds), keyed by name. */
  readonly profiles: Record<string, Record<string, unknown>>;
}

export function stackEnvelope(slug: string, stack: Record<string, unknown>, profiles: Record<string, Record<string, unknown>>, exportedAt: string): Record<string, unknown> {
  return seal({ kind: "hal0.stack", version: ENVELOPE_VERSION, slug, exported_at: exportedAt, stack: redact(stack), profiles: redact(profiles) });
}

export function openStackEnvelope(envelope: unknown): StackEnvelope {
  const body = open("hal0.stack", envelope);
  const slug = body.slug === undefined || body.slug === null || body.slug === "" ? undefined : payload("hal0.stack", ResourceId, body.slug, "slug");
  const stack = payload("hal0.stack", z.record(z.string(), z.unknown()), body.stack, "stack");
  payload("hal0.stack", Stack, stack, "stack");
  const profiles = payload("hal0.stack", z.record(ProfileName, z.record(z.string(), z.unknown())).default({}), body.profiles, "profiles");
  for (const [name, p] of Object.entries(profiles)) payload("hal0.stack", Profile, p, `profiles.${name}`);
  return { slug, stack, profiles };
}
