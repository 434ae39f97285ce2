import { z } from "zod";
import { EnvName, ProfileName } from "./names.js";
import { Tune } from "./tune.js";

/** `profiles.toml`: `[profile.<name>]`. A profile named like a seed overrides that seed. */

export const DEVICE_CLASSES = ["gpu", "cpu", "npu", "img"] as const;
export const BACKENDS = ["rocm", "vulkan"] as const;

/**
 * A container image reference as the engine reads one (distribution's grammar): `[host[:port]/]path[:tag][@digest]`,
 * the path lowercase. Anything else can never run, and its text would go into the engine's request paths as it is
 * (`a?b` or `../x` name another endpoint).
 */
const DOMAIN_PART = "(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])";
const PATH_PART = "[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*";
export const IMAGE_REF_PATTERN = new RegExp(
  `^(?:(?:${DOMAIN_PART}(?:\\.${DOMAIN_PART})*|\\[[0-9a-fA-F:]+\\])(?::[0-9]+)?/)?${PATH_PART}(?:/${PATH_PART})*` +
  "(?::[\\w][\\w.-]{0,127})?(?:@[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,})?$",
);

export const Profile = z.strictObject({
  /** Container image for the docker runtime. */
  image: z.string().max(512).regex(IMAGE_REF_PATTERN, "an image reference: [host[:port]/]name[:tag][@digest], the name in lowercase (ghcr.io/ggml-org/llama.cpp:server)").optional(),
  /** argv prefix for the process runtime; the image's entrypoint plays this role in docker. */
  runner: z.array(z.string().min(1)).min(1).default(["llama-server"]),
  /** Runner flags, shell-quoted. Never the model, host, port or context: hal0 owns those. */
  flags: z.string().default(""),
  device_class: z.enum(DEVICE_CLASSES).default("gpu"),
  backend: z.enum(BACKENDS).optional(),
  intent: z.string().optional(),
  quant: z.string().optional(),
  description: z.string().optional(),
  cloned_from: ProfileName.optional(),
  /** Environment for the runner, merged under a slot's `[server] env`. */
  env: z.record(EnvName, z.string()).default({}),
  /** The base tune; slots override it key by key. */
  tune: Tune.prefault({}),
});
export type Profile = z.infer<typeof Profile>;

export const ProfilesFile = z.strictObject({
  profile: z.record(ProfileName, Profile).prefault({}),
});
export type ProfilesFile = z.infer<typeof ProfilesFile>;
