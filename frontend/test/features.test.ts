// Runtimes and backends, sharing and export, rooms and the gallery: what each decides from its data.
import { describe, expect, it } from "vitest";
import type { Boot } from "../src/core/boot";
import { GALLERY, parseExample } from "../src/gallery/gallery";
import { parseDeck, slideTitle } from "../src/rooms/room_deck";
import { changedSpan } from "../src/rooms/room_editor";
import { chooseBackend } from "../src/runtimes/backends";
import { compareVersions, nearestVersion, runtimeForMissingApi, usable } from "../src/runtimes/runtimes";
import { linkedRuntime } from "../src/runtimes/runtimes_link";
import { embedUrlFor, embedViewFrom } from "../src/sharing/embed_view";
import { describeEnvironment } from "../src/sharing/share_banner";
import {
  exportBaseName, exportablePython, exportedData, inertSvg, notebookFor, notebookOutputs, sourceLines,
} from "../src/sharing/share_export";
import { ensureUsableStorage, storageUsable } from "../src/sharing/share_storage";
import type { BackendInfo, ErrorEvent, RuntimeInfo, ServerEvent } from "../src/wire/protocol";

function runtime(name: string, extra: Partial<RuntimeInfo> = {}): RuntimeInfo {
  return { name, jax_version: name, jaxlib_version: name, default: false, libraries: {}, workers: 1, problem: null, ...extra };
}

function backend(name: string, workers: number, runtimes: RuntimeInfo[] = []): BackendInfo {
  return { name, device_kind: "cpu", device_count: 8, jax_version: "0.6.2", jaxlib_version: "0.6.2", workers, slots: 2,
    free_slots: 2, queued: 0, sandbox: "bwrap", runtimes };
}

describe("JAX versions", () => {
  it("orders versions numerically, not as text", () => {
    expect(compareVersions("0.4.38", "0.10.2")).toBeLessThan(0);
    expect(compareVersions("0.6.2", "0.6.2")).toBe(0);
    expect(compareVersions("0.6.2", "0.6")).toBeGreaterThan(0);
    expect(["0.10.2", "0.4.38", "0.6.2"].sort(compareVersions)).toEqual(["0.4.38", "0.6.2", "0.10.2"]);
  });

  it("offers the nearest version for a link whose JAX is gone, the same line first", () => {
    expect(nearestVersion("0.4.30", ["0.6.2", "0.4.38", "0.10.2"])).toBe("0.4.38");
    expect(nearestVersion("0.5.0", ["0.4.38", "0.6.2"])).toBe("0.6.2"); // equally far: the newer
    expect(nearestVersion("0.4.30", [])).toBeNull();
  });

  it("lists only the runtimes a worker can run", () => {
    const broken = runtime("0.5.0", { problem: "its install failed" });
    expect(usable(backend("cpu", 1, [runtime("0.6.2"), broken])).map((r) => r.name)).toEqual(["0.6.2"]);
    expect(usable(undefined)).toEqual([]);
  });

  it("offers, for an API this JAX lacks, the newest version that has it", () => {
    const offered = [runtime("0.4.38"), runtime("0.4.30"), runtime("0.6.2"), runtime("0.7.0")];
    const error = (extra: Partial<ErrorEvent>): ErrorEvent =>
      ({ type: "error", id: "r", ename: "AttributeError", message: "", line: 1, traceback: "", ...extra });
    const removed = error({ api: "jax.tree_map", api_versions: { removed_in: "0.6.0" } });
    expect(runtimeForMissingApi(removed, "0.7.0", offered, () => null)?.name).toBe("0.4.38");
    const added = error({ api: "jax.typeof", api_versions: { added_in: "0.6.0" } });
    expect(runtimeForMissingApi(added, "0.4.38", offered, () => null)?.name).toBe("0.7.0");
    const unknown = error({ api: "jax.shiny" });
    expect(runtimeForMissingApi(unknown, "0.7.0", offered, (version) => version === "0.6.2")?.name).toBe("0.6.2");
    expect(runtimeForMissingApi(error({}), "0.7.0", offered, () => true)).toBeNull();
  });

  it("reads a link's version from the snippet, else from its recorded run", () => {
    const boot = (snippet: Record<string, unknown> | null) => ({ mode: "editor", page_title: "", snippet } as Boot);
    expect(linkedRuntime(boot({ code: "", runtime: "0.4.38" }))).toBe("0.4.38");
    expect(linkedRuntime(boot({ code: "", recorded_run: [{ type: "started", id: "r", backend: "cpu", devices: {},
      jax_version: "0.6.2" }] }))).toBe("0.6.2");
    expect(linkedRuntime(boot(null))).toBeNull();
  });
});

describe("chooseBackend", () => {
  const cpu = backend("cpu", 1);
  const gpu = backend("gpu", 0);

  it("keeps the remembered backend while it has a worker, else takes the server's default, else one with a worker", () => {
    expect(chooseBackend([cpu, backend("tpu", 1)], "tpu", "cpu")).toBe("tpu");
    expect(chooseBackend([cpu, gpu], "gpu", "cpu")).toBe("cpu");
    expect(chooseBackend([gpu, cpu], null, "gpu")).toBe("cpu");
  });

  it("keeps the remembered one when no backend has a worker", () => {
    expect(chooseBackend([gpu, backend("tpu", 0)], "tpu", null)).toBe("tpu");
  });
});

describe("export", () => {
  const events: ServerEvent[] = [
    { type: "stdout", id: "r", text: "a\n" },
    { type: "stdout", id: "r", text: "b" },
    { type: "stderr", id: "r", text: "warn\n" },
    { type: "display", id: "r", mime: "text/plain", data: "Array(3)", role: "result" },
    { type: "display", id: "r", mime: "image/png", data: "iVBOR", role: "figure", width: 40, height: 30 },
    { type: "error", id: "r", ename: "ValueError", message: "bad", line: 2, traceback: "Traceback\nValueError: bad\n",
      hint: "Pass a shape." },
  ];

  it("turns a run's events into notebook outputs, merging consecutive chunks of a stream", () => {
    expect(notebookOutputs(events)).toEqual([
      { output_type: "stream", name: "stdout", text: ["a\n", "b"] },
      { output_type: "stream", name: "stderr", text: ["warn\n"] },
      { output_type: "execute_result", execution_count: 1, data: { "text/plain": ["Array(3)"] }, metadata: {} },
      { output_type: "display_data", data: { "text/plain": ["[image/png output: run the cell to see it]"], "image/png": "iVBOR" },
        metadata: { "image/png": { width: 40, height: 30 } } },
      { output_type: "error", ename: "ValueError", evalue: "bad", traceback: ["Traceback", "ValueError: bad", "", "Hint: Pass a shape."] },
    ]);
  });

  it("keeps HTML only with the server's vouch and SVG only when inert, and text for every output", () => {
    const html = "<div>view</div><script>go()</script>";
    expect(exportedData({ type: "display", id: "r", mime: "text/html", data: html, role: "result", text: "Array(3)" }))
      .toEqual({ "text/plain": ["Array(3)"] });
    expect(exportedData({ type: "display", id: "r", mime: "text/html", data: html, role: "result", text: "Array(3)",
      vouch: "ab" })).toEqual({ "text/plain": ["Array(3)"], "text/html": ["<div>view</div><script>go()</script>"] });
    expect(exportedData({ type: "display", id: "r", mime: "application/javascript", data: "alert(1)", role: "display" }))
      .toEqual({ "text/plain": ["[application/javascript output: run the cell to see it]"] });
    expect(inertSvg('<svg xmlns="http://www.w3.org/2000/svg"><path d="M0 0" fill="url(#g)"/></svg>')).toBe(true);
    for (const active of ['<svg onload="x()"/>', "<svg><script>x()</script></svg>", "<svg><foreignObject/></svg>",
      '<svg><a href="javascript:x()"/></svg>', '<svg><image href="https://evil.example/t.png"/></svg>',
      "<svg><style>@import 'https://evil.example/s.css';</style></svg>"]) {
      expect(inertSvg(active), active).toBe(false);
    }
  });

  it("keeps a cell's source as lines and puts the helpers' stand-ins first when the code imports them", () => {
    expect(sourceLines("a = 1\nb = 2\n\n")).toEqual(["a = 1\n", "b = 2"]);
    expect(sourceLines("")).toEqual([]);
    const plain = notebookFor("print(1)");
    expect(plain.cells.map((c) => c.id)).toEqual(["jax-playground"]);
    expect(plain.cells[0].execution_count).toBeNull();
    const helped = notebookFor("from playground import timeit\ntimeit(f)", events);
    expect(helped.cells.map((c) => c.id)).toEqual(["playground-helpers", "jax-playground"]);
    expect(helped.cells[1].execution_count).toBe(1);
  });

  it("writes a .py that runs outside the playground", () => {
    expect(exportablePython("print(1)")).toBe("print(1)\n");
    const helped = exportablePython("import playground\nplayground.display(1)");
    expect(helped.startsWith("# --- Exported from the JAX Playground")).toBe(true);
    expect(helped.endsWith("import playground\nplayground.display(1)\n")).toBe(true);
    expect(exportablePython("# import playground later\n")).toBe("# import playground later\n");
    expect(exportBaseName("k3v7q2xa")).toBe("snippet-k3v7q2xa");
    expect(exportBaseName(null)).toBe("jax-playground");
  });
});

describe("embeds and the recorded run's banner", () => {
  it("opens an embed on a tab its link names, and only on one it offers", () => {
    expect(embedViewFrom("?view=sharding")).toBe("sharding");
    expect(embedViewFrom("?view=gallery")).toBeNull();
    expect(embedUrlFor("https://p.example/e/abc", "inspect")).toBe("https://p.example/e/abc?view=inspect");
    expect(embedUrlFor("https://p.example/e/abc", "output")).toBe("https://p.example/e/abc");
  });

  it("describes where a recorded run ran", () => {
    expect(describeEnvironment([{ type: "started", id: "r", backend: "cpu", devices: { kind: "cpu", count: 8 },
      jax_version: "0.6.2", jaxlib_version: "0.6.2" }])).toBe("cpu · 8× cpu · jax 0.6.2 · jaxlib 0.6.2");
    expect(describeEnvironment([])).toBe("");
  });

  it("puts a memory store in place of localStorage where the browser refuses it", () => {
    expect(storageUsable()).toBe(true);
    const real = Object.getOwnPropertyDescriptor(window, "localStorage");
    Object.defineProperty(window, "localStorage", { get() { throw new Error("Access is denied"); }, configurable: true });
    try {
      expect(storageUsable()).toBe(false);
      expect(ensureUsableStorage()).toBe(false);
      window.localStorage.setItem("jaxplay.split", "0.4");
      expect(window.localStorage.getItem("jaxplay.split")).toBe("0.4");
      expect(window.localStorage.length).toBe(1);
    } finally {
      if (real) Object.defineProperty(window, "localStorage", real);
    }
  });
});

describe("rooms", () => {
  it("reads snippet ids from pasted share links and ids, in order, and says why it rejects each other entry", () => {
    const origin = "https://p.example";
    expect(parseDeck("https://p.example/s/abc234, xyz\n/e/qq7  p.example/s/k3v7q2xa/", origin))
      .toEqual({ ids: ["abc234", "xyz", "qq7", "k3v7q2xa"], rejected: [] });
    const { ids, rejected } = parseDeck(
      "zzz nonexistent123 http://example.com/s/zzz https://p.example/about http://p.example/s/abc NOT-AN-ID https://p.example/s/x1",
      origin);
    expect(ids).toEqual(["zzz"]);
    expect(rejected.map((r) => r.text)).toEqual([
      "nonexistent123", "http://example.com/s/zzz", "https://p.example/about", "http://p.example/s/abc", "NOT-AN-ID",
      "https://p.example/s/x1"]);
    expect(rejected[0].why).toMatch(/^malformed: a snippet id has only/);
    expect(rejected[1].why).toBe("not a link of this server (http://example.com): share it here first");
    expect(rejected[2].why).toMatch(/^malformed: a share link ends in \/s\//);
    expect(rejected[3].why).toMatch(/^not a link of this server/); // another scheme is another server
    expect(rejected[5].why).toMatch(/^malformed: a snippet id/);
    expect(parseDeck("", origin)).toEqual({ ids: [], rejected: [] });
  });

  it("names a slide by its first comment, else its first line, cut at 70 characters", () => {
    expect(slideTitle("#\n## Grad of sin\nimport jax")).toBe("Grad of sin"); // a bare # line is no title
    expect(slideTitle("\n  import jax\n")).toBe("import jax");
    expect(slideTitle("")).toBe("(empty)");
    expect(slideTitle(`# ${"x".repeat(80)}`)).toBe(`${"x".repeat(69)}…`);
  });

  it("sends a presenter's edit as the one span that changed", () => {
    expect(changedSpan("abcdef", "abXYef")).toEqual({ from: 2, to: 4, insert: "XY" });
    expect(changedSpan("abc", "abcd")).toEqual({ from: 3, to: 3, insert: "d" });
    expect(changedSpan("aaa", "aa")).toEqual({ from: 2, to: 3, insert: "" });
    expect(changedSpan("same", "same")).toBeNull();
  });
});

describe("the gallery", () => {
  it("takes an example's title and description from its leading comment lines", () => {
    expect(parseExample("../examples/gallery/03_grad.py", "# Gradients\n# with jax.grad\n# of sin.\nimport jax\n\n"))
      .toEqual({ id: "03_grad", title: "Gradients", description: "with jax.grad of sin.", code: "# Gradients\n# with jax.grad\n# of sin.\nimport jax\n" });
    expect(parseExample("x/04_vmap_batching.py", "import jax").title).toBe("vmap batching");
  });

  it("ships every example in file order, each with a title and code", () => {
    expect(GALLERY.length).toBeGreaterThanOrEqual(16);
    expect(GALLERY[0].id).toBe("01_jit_recompilation");
    expect(GALLERY.map((e) => e.id)).toEqual([...GALLERY.map((e) => e.id)].sort((a, b) => a.localeCompare(b)));
    expect(GALLERY.every((e) => e.title && e.code.endsWith("\n"))).toBe(true);
  });
});
