// The server serves frontend/dist/assets/* at /assets/* and links app.js and
// app.css by fixed names (cache-busted with ?v=<asset_version>), so the build
// emits unhashed names and no index.html.
import { defineConfig } from "vite";

export default defineConfig({
  base: "/assets/",
  build: {
    outDir: "dist",
    assetsDir: "assets",
    emptyOutDir: true,
    target: "es2022",
    sourcemap: true,
    cssCodeSplit: false,
    rollupOptions: {
      input: "src/main.ts",
      output: {
        entryFileNames: "assets/app.js",
        chunkFileNames: "assets/[name].js",
        assetFileNames: (info) =>
          (info.names ?? []).some((n) => n.endsWith(".css")) ? "assets/app.css" : "assets/[name][extname]",
      },
    },
  },
});
