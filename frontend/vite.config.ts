// The server serves frontend/dist/assets/* at /assets/* and finds the entry's script and stylesheet
// in dist/manifest.json (server/pages/assets.py). Every file name carries a hash of its content, so
// browsers keep them for a year and never ask again; a new build has new names.
//
// Each text asset is also written compressed beside it (name.br, name.gz), once, at build time: the
// server sends the one the browser accepts with nothing to compress per request.
import { readdirSync, readFileSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { brotliCompressSync, constants, gzipSync } from "node:zlib";
import { defineConfig, type Plugin } from "vite";

const COMPRESSED = /\.(js|css|svg|json|txt|html)$/;
// Below this a compressed copy saves less than its headers cost.
const MIN_BYTES = 1024;

function precompress(outDir: string): Plugin {
  return {
    name: "jaxplay-precompress",
    apply: "build",
    writeBundle() {
      const folder = join(outDir, "assets");
      for (const name of readdirSync(folder)) {
        const path = join(folder, name);
        if (!COMPRESSED.test(name) || statSync(path).size < MIN_BYTES) continue;
        const data = readFileSync(path);
        writeFileSync(`${path}.gz`, gzipSync(data, { level: 9 }));
        writeFileSync(`${path}.br`, brotliCompressSync(data, {
          params: { [constants.BROTLI_PARAM_QUALITY]: 11, [constants.BROTLI_PARAM_SIZE_HINT]: data.length },
        }));
      }
    },
  };
}

export default defineConfig({
  // Files live in dist/assets/ and are served at /assets/: URLs are the site root plus their path in dist.
  base: "/",
  plugins: [precompress("dist")],
  build: {
    outDir: "dist",
    assetsDir: "assets",
    emptyOutDir: true,
    target: "es2022",
    sourcemap: true,
    cssCodeSplit: false,
    // dist/manifest.json (not .vite/, which packaging tools skip as hidden): the entry's files by name.
    manifest: "manifest.json",
    rollupOptions: {
      input: "src/main.ts",
      output: {
        entryFileNames: "assets/app-[hash].js",
        chunkFileNames: "assets/[name]-[hash].js",
        assetFileNames: (info) =>
          (info.names ?? []).some((n) => n.endsWith(".css")) ? "assets/app-[hash].css" : "assets/[name]-[hash][extname]",
      },
    },
  },
});
