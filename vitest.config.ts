import { defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    include: ["test/**/*.test.ts"],
    // One temporary folder a run, removed at its end.
    globalSetup: ["test/global-setup.ts"],
    // Goldens change only through a reviewed `vitest -u`, never silently in CI.
    update: false,
    testTimeout: 30_000,
  },
});
