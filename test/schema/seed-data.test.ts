import { describe, expect, it } from "vitest";
import {
  AUTONOMOUS_READ_TOOLS, AUTONOMOUS_WRITE_TOOLS, EXCLUDED_TOOLS, GATED_TOOLS, NEVER_LOOSEN_TOOLS,
  AGENTS_GATED_TOOLS, AGENTS_READ_TOOLS, AGENTS_WRITE_TOOLS, HAL0_GATED_TOOLS, HAL0_READ_TOOLS, HAL0_WRITE_TOOLS, Profile, SEED_PROFILES, defaultTiers,
} from "../../schema/index.js";

describe("seed profiles", () => {
  it("are the seven seeds of hal0, each valid under the Profile schema", () => {
    expect(Object.keys(SEED_PROFILES).sort()).toEqual(["comfyui", "flm", "rocm", "rocm-dnse", "rocm-moe", "tts", "vulkan"]);
    for (const [name, raw] of Object.entries(SEED_PROFILES)) {
      const parsed = Profile.safeParse(raw);
      expect(parsed.success, name).toBe(true);
    }
  });
});

describe("default policy (seed 001 tables)", () => {
  const all = [...AUTONOMOUS_READ_TOOLS, ...AUTONOMOUS_WRITE_TOOLS, ...GATED_TOOLS].map((t) => t.tool);

  it("puts each tool in exactly one tier", () => {
    expect(new Set(all).size).toBe(all.length);
    for (const tool of EXCLUDED_TOOLS) expect(all).not.toContain(tool);
    const hal0 = [...HAL0_READ_TOOLS, ...HAL0_WRITE_TOOLS, ...HAL0_GATED_TOOLS, ...AGENTS_READ_TOOLS, ...AGENTS_WRITE_TOOLS, ...AGENTS_GATED_TOOLS].map((t) => t.tool);
    for (const tool of hal0) expect(all).not.toContain(tool);
    expect(new Set(hal0).size).toBe(hal0.length);
    expect(defaultTiers().size).toBe(all.length + hal0.length + EXCLUDED_TOOLS.length);
  });

  it("has the seed's table sizes and the 26 memory tools", () => {
    expect(AUTONOMOUS_READ_TOOLS).toHaveLength(108);
    expect(AUTONOMOUS_WRITE_TOOLS).toHaveLength(24);
    expect(GATED_TOOLS).toHaveLength(57);
    expect(all.filter((t) => t.startsWith("memory_"))).toHaveLength(26);
  });

  it("classifies representative tools as the seed does", () => {
    const tiers = defaultTiers();
    expect(tiers.get("slot_list")).toBe("autonomous_read");
    expect(tiers.get("slot_edit")).toBe("autonomous_write");
    expect(tiers.get("config_write")).toBe("gated");
    expect(tiers.get("memory_directive_delete")).toBe("gated");
    expect(tiers.get("updater_apply")).toBe("blocked");
  });

  it("has hal0-agents' sixteen tools at the issue's default tiers", () => {
    const tiers = defaultTiers();
    expect([...AGENTS_READ_TOOLS, ...AGENTS_WRITE_TOOLS, ...AGENTS_GATED_TOOLS]).toHaveLength(16);
    expect(tiers.get("agent_run_events")).toBe("autonomous_read");
    expect(tiers.get("profile_persona_get")).toBe("autonomous_read");
    expect(tiers.get("agent_run_start")).toBe("autonomous_write");
    expect(tiers.get("profile_memory_add")).toBe("autonomous_write");
    expect(tiers.get("profile_skill_put")).toBe("gated");
    expect(tiers.get("profile_skill_delete")).toBe("gated");
  });

  it("lists only known tools as never-loosen", () => {
    for (const tool of NEVER_LOOSEN_TOOLS) expect(all).toContain(tool);
  });
});
