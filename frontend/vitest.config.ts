// Unit tests of the page's logic (test/*.test.ts), in Node with happy-dom standing in for the
// browser's DOM and storage. The page itself is tested in Chromium by tests/browser/.
import { defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    include: ["test/**/*.test.ts"],
    environment: "happy-dom",
  },
});
