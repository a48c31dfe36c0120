/**
 * The Inspect tab: what JAX made of each jitted function.
 *
 * Top: every function compiled in the run, each compilation listed under it
 * (a recompilation shows JAX's reason), with call counts and times from
 * `fn_timing`, then the `timing` results of `playground.timeit` as charts.
 * Below: the selected compilation: phases, cost and memory, and its jaxpr,
 * StableHLO or optimized HLO in a highlighted, searchable view whose lines
 * point back at the code under the pointer, or diffed against another
 * compilation of the same function.
 *
 * Events carry megabytes of text: the list redraws at most once a frame and
 * only the artifact on screen is handed to CodeMirror.
 */

import { el } from "../core/dom";
import "./inspect.css";
import type { PanelFactory } from "../panel/types";
import type { RunFlags } from "../wire/protocol";
import { callStats } from "./inspect_calls";
import { costTable, formatBytes, formatMs, memoryTable, phaseBar, timingChart } from "../ir/inspect_format";
import { outputsCode, signatureCode, signatureToggle } from "./inspect_signature";
import type { ArtifactName, CompiledEvent, FunctionTiming, TimingEvent } from "../ir/inspect_types";
import { ArtifactView, DiffView } from "../ir/inspect_view";
import { eqnCountsTable, type EqnTableState } from "./eqn_counts";
import { PassesView } from "../passes/passes";
import { MemoryPanel } from "../memory/memory_view";
import "../memory/oom_hint";
import { initialPanes, PANES_PARAM, withPanes } from "../panes/pane_layout";
import { PanesView } from "../panes/panes_view";
import { eqnCountsOf, type RooflineRow } from "../performance/perf_types";
import { rooflineVerdict } from "../performance/roofline";

const ARTIFACTS: [ArtifactName, string][] = [
  ["jaxpr", "jaxpr"],
  ["stablehlo", "StableHLO"],
  ["hlo", "Optimized HLO"],
];
const INSPECT_KEY = "jaxplay.inspect";
const WRAP_KEY = "jaxplay.inspect.wrap";
const HOVER_OWNER = "inspect";
const BANDS_OWNER = "inspect-bands";
/** Besides one text: the side-by-side panes (panes/) and where the memory goes (memory/). */
const VIEWS: ["panes" | "memory", string][] = [
  ["panes", "Side by side"],
  ["memory", "Memory"],
];

interface FunctionEntry {
  fnId: number;
  fn: string;
  line: number | null;
  module: string | null;
  compiles: CompiledEvent[];
  timing: FunctionTiming | null;
  /** The compilation being made now (its index), until its `compiled` event fills it in. */
  compiling: number | null;
}

export const inspectPanel: PanelFactory = (ctx) => {
  const functions = new Map<number, FunctionEntry>();
  const byKey = new Map<string, CompiledEvent>();
  let timings: TimingEvent[] = [];
  let selected: string | null = null;
  let compareWith: string | null = null;
  let artifact: ArtifactName = "jaxpr";
  // A link may open on panes side by side (?panes=... or the shared snippet's settings.view.panes).
  const linkedPanes = initialPanes(window.location.search, ctx.boot.snippet?.settings);
  let view: "text" | "panes" | "memory" = linkedPanes ? "panes" : "text";
  let wrap = localStorage.getItem(WRAP_KEY) === "1";
  // A shared snippet opens with the setting it was shared with; otherwise this browser's choice.
  const sharedSettings = ctx.boot.snippet?.settings as { inspect?: unknown } | undefined;
  let inspectOn =
    typeof sharedSettings?.inspect === "boolean" ? sharedSettings.inspect : localStorage.getItem(INSPECT_KEY) !== "0";
  let runInspected = true;
  let finished = false;
  let redrawScheduled = false;
  // What a "passes" request needs to run the same program again: its code and backend.
  let runCode = "";
  let runBackend: string | undefined;
  let runRuntime: string | undefined;
  let runFlags: RunFlags | undefined;
  let passesShown = false;
  const eqnState: EqnTableState = { sort: "count", expanded: false };
  const roofline = new Map<string, RooflineRow>();

  const inspectToggle = el("input", { type: "checkbox", "data-testid": "inspect-toggle" });
  inspectToggle.checked = inspectOn;
  inspectToggle.addEventListener("change", () => {
    inspectOn = inspectToggle.checked;
    localStorage.setItem(INSPECT_KEY, inspectOn ? "1" : "0");
  });
  // Which JAX produced what is shown (runs may name a runtime: runtimes.ts).
  const jaxTag = el("span", { class: "inspect-jax", "data-testid": "inspect-jax" });
  const optionBar = el(
    "label",
    { class: "inspect-option", title: "Off: the next run skips capturing compilations (no overhead)" },
    inspectToggle,
    " Capture compilations",
  );
  const list = el("div", { class: "inspect-list", "data-testid": "inspect-list" });
  const detail = el("div", { class: "inspect-detail", "data-testid": "inspect-detail", hidden: true });
  const top = el(
    "div",
    { class: "inspect-top" },
    el("div", { class: "inspect-top-bar" }, el("h3", { class: "inspect-heading" }, "Compiled functions"), jaxTag, optionBar),
    list,
  );
  const element = el("div", { class: "inspect" }, top, detail);

  const code = new ArtifactView({
    onHoverSource(line) {
      if (line === null) ctx.editor.clearLineMarks(HOVER_OWNER);
      else ctx.editor.setLineMarks(HOVER_OWNER, [{ line, kind: "hover" }], { clearOnEdit: true });
    },
    onOpenSource(line) {
      ctx.editor.goToLine(line);
    },
  });
  const diff = new DiffView();
  const panes = new PanesView({
    onHotSource(line) {
      if (line === null) ctx.editor.clearLineMarks(HOVER_OWNER);
      else ctx.editor.setLineMarks(HOVER_OWNER, [{ line, kind: "hover" }], { clearOnEdit: true });
    },
    onOpenSource(line) {
      ctx.editor.goToLine(line);
    },
    onArrangement() {
      keepPanesInAddress();
    },
  });
  if (linkedPanes) panes.setArrangement(linkedPanes);
  const memory = new MemoryPanel({
    openHlo(line) {
      artifact = "hlo";
      view = "text";
      compareWith = null;
      drawDetail();
      code.revealLine(line);
    },
    openSource(line) {
      ctx.editor.goToLine(line);
    },
  });
  // An address naming panes (not another tab) opens on Inspect.
  const askedView = new URLSearchParams(window.location.search).get("view");
  if (linkedPanes && new URLSearchParams(window.location.search).has(PANES_PARAM) && (!askedView || askedView === "inspect")) {
    queueMicrotask(() => ctx.activate());
  }

  /** The address names the panes while they show, so a copied address opens on them. */
  function keepPanesInAddress(): void {
    const href = withPanes(window.location.href, view === "panes" ? panes.arrangement : null);
    if (href !== window.location.href) window.history.replaceState(window.history.state, "", href);
  }

  /** The editor's lines wear the panes' colours while the panes show. */
  function showBands(on: boolean): void {
    if (!on || !panes.bands.size) ctx.editor.clearLineMarks(BANDS_OWNER);
    else ctx.editor.setLineMarks(BANDS_OWNER, [...panes.bands].map(([line, band]) => ({ line, kind: "band" as const, band })));
  }
  const passes = new PassesView(
    ctx,
    {
      onHoverSource(line) {
        if (line === null) ctx.editor.clearLineMarks(HOVER_OWNER);
        else ctx.editor.setLineMarks(HOVER_OWNER, [{ line, kind: "hover" }], { clearOnEdit: true });
      },
      onOpenSource(line) {
        ctx.editor.goToLine(line);
      },
    },
    () => {
      passesShown = false;
      passes.close();
      drawDetail();
    },
  );
  // A timeline slice or a roofline point names a compilation: show it here.
  window.addEventListener("jaxplay:show-compiled", (e) => {
    const detail = (e as CustomEvent<{ key: string; view?: string }>).detail;
    const key = detail?.key;
    if (!key || !byKey.has(key)) return;
    if (detail.view === "memory") {
      view = "memory";
      passesShown = false;
      passes.close();
    }
    ctx.activate();
    select(key);
  });

  function scheduleRedraw(): void {
    if (redrawScheduled) return;
    redrawScheduled = true;
    requestAnimationFrame(() => {
      redrawScheduled = false;
      drawList();
    });
  }

  function select(key: string): void {
    if (selected !== key) {
      compareWith = null;
      passesShown = false;
      passes.close();
    }
    selected = key;
    drawList();
    drawDetail();
  }

  // --- the list ---------------------------------------------------------------

  function drawList(): void {
    const count = byKey.size;
    ctx.setBadge(count || null);
    if (!functions.size && !timings.length) {
      list.replaceChildren(emptyHint());
      return;
    }
    const blocks: HTMLElement[] = [];
    for (const entry of functions.values()) {
      if (entry.compiles.length || entry.timing || entry.compiling !== null) blocks.push(functionBlock(entry));
    }
    if (timings.length) {
      blocks.push(el("h3", { class: "inspect-heading" }, "timeit"));
      for (const timing of timings) blocks.push(timingBlock(timing));
    }
    // A function that began compiling and failed (a tracing error) leaves nothing to list.
    list.replaceChildren(...(blocks.length ? blocks : [emptyHint()]));
  }

  function emptyHint(): HTMLElement {
    let text: string;
    if (!runInspected) text = "Capturing compilations was off for this run.";
    else if (finished) text = "This run compiled nothing through jax.jit.";
    else
      text =
        "Every function compiled through jax.jit appears here with its jaxpr, StableHLO, optimized HLO, " +
        "cost, memory and the time each phase took. Time a call with `from playground import timeit`.";
    return el("div", { class: "inspect-empty" }, text);
  }

  function sourceLink(line: number | null, label: string, title: string): HTMLElement {
    if (line === null) return el("span", { class: "inspect-fn-name" }, label);
    return el(
      "button",
      { class: "inspect-fn-name inspect-link", type: "button", title, onclick: () => ctx.editor.goToLine(line) },
      label,
    );
  }

  function functionBlock(entry: FunctionEntry): HTMLElement {
    const timing = entry.timing;
    const stats = timing ? callStats(timing) : { text: "", title: "" };
    const where = entry.line !== null ? `line ${entry.line}` : entry.module ? `from ${entry.module}` : "";
    const head = el(
      "div",
      { class: "inspect-fn-head" },
      sourceLink(entry.line, entry.fn, `Go to the definition of ${entry.fn}`),
      el("span", { class: "inspect-fn-where" }, where),
      el("span", { class: "inspect-fn-stats", "data-testid": "inspect-fn-stats", title: stats.title }, stats.text),
    );
    const compiles = el("ol", { class: "inspect-compiles" });
    for (const compiled of entry.compiles) compiles.append(compileRow(compiled));
    if (entry.compiling !== null) {
      compiles.append(
        el(
          "li",
          { class: "inspect-compiling", "data-testid": "inspect-compiling" },
          el("span", { class: "inspect-compile-index" }, `#${entry.compiling}`),
          "compiling…",
        ),
      );
    }
    if (!entry.compiles.length && timing?.traced_calls) {
      compiles.append(
        el(
          "li",
          { class: "inspect-note" },
          "Only called under a transformation (grad, vmap, an outer jit …): its code is compiled as part of " +
            "the enclosing computation, listed under that function when it is jitted.",
        ),
      );
    }
    return el("section", { class: "inspect-fn", "data-fn": entry.fn }, head, compiles);
  }

  function compileRow(compiled: CompiledEvent): HTMLElement {
    const total = compiled.phases_ms.trace + compiled.phases_ms.lower + compiled.phases_ms.compile;
    const button = el(
      "button",
      {
        class: "inspect-compile",
        type: "button",
        "aria-pressed": String(compiled.key === selected),
        "data-key": compiled.key,
        onclick: () => select(compiled.key),
      },
      el("span", { class: "inspect-compile-index" }, `#${compiled.compile_index}`),
      signatureCode(compiled.signature),
      outputsCode(compiled.outputs),
      el("span", { class: "inspect-compile-time", title: "trace + lower + compile" }, formatMs(total)),
    );
    const item = el("li", { class: "inspect-compile-item" }, button);
    const toggle = signatureToggle(compiled.signature, item);
    if (toggle) item.append(toggle);
    if (compiled.cache_miss_reason) {
      item.append(el("div", { class: "inspect-reason", "data-testid": "inspect-reason" }, compiled.cache_miss_reason));
    }
    return item;
  }

  function timingBlock(timing: TimingEvent): HTMLElement {
    const summary =
      `median ${formatMs(timing.median_ms)} · min ${formatMs(timing.min_ms)} · IQR ${formatMs(timing.iqr_ms)} · ` +
      `${timing.repeats} runs × ${timing.loops.toLocaleString()} loops · first call ${formatMs(timing.warmup_ms)}`;
    return el(
      "section",
      { class: "inspect-timing", "data-testid": "inspect-timing" },
      el(
        "div",
        { class: "inspect-fn-head" },
        sourceLink(timing.line, timing.label, "Go to the timeit call"),
        el("span", { class: "inspect-fn-stats" }, summary),
      ),
      timingChart(timing.samples_ms, timing.q1_ms, timing.median_ms, timing.q3_ms),
    );
  }

  // --- the selected compilation ----------------------------------------------------

  function drawDetail(): void {
    const compiled = selected ? byKey.get(selected) : undefined;
    if (!compiled) {
      detail.hidden = true;
      return;
    }
    detail.hidden = false;
    const siblings = functions.get(compiled.fn_id)?.compiles ?? [];
    const head = el(
      "div",
      { class: "inspect-detail-head" },
      sourceLink(compiled.line, compiled.fn, `Go to the definition of ${compiled.fn}`),
      signatureCode(compiled.signature),
      outputsCode(compiled.outputs),
      el(
        "span",
        { class: "inspect-fn-where" },
        `compilation #${compiled.compile_index}${compiled.persistent_cache_hit ? " · from the persistent cache" : ""}`,
      ),
    );
    const parts: (HTMLElement | null)[] = [head, signatureToggle(compiled.signature, head)];
    if (compiled.cache_miss_reason) {
      const previous = compiled.previous_key;
      parts.push(
        el(
          "div",
          { class: "inspect-reason-box" },
          el("div", { class: "inspect-reason-title" }, "Compiled again because (JAX's explanation):"),
          el("div", { class: "inspect-reason" }, compiled.cache_miss_reason),
          previous && byKey.has(previous)
            ? el(
                "button",
                {
                  class: "btn btn-ghost inspect-diff-button",
                  type: "button",
                  "data-testid": "inspect-diff-previous",
                  onclick: () => {
                    compareWith = previous;
                    drawDetail();
                  },
                },
                `Diff with #${byKey.get(previous)!.compile_index}`,
              )
            : null,
        ),
      );
    }
    if (passesShown) {
      // XLA's passes take the room the figures below would: the head and the toolbar stay.
      diff.clear();
      showBands(false);
      parts.push(toolbar(compiled, siblings), passes.element);
      detail.replaceChildren(...parts.filter((p): p is HTMLElement => p !== null));
      return;
    }
    parts.push(phaseBar(compiled.phases_ms));
    parts.push(el("div", { class: "inspect-tables" }, costTable(compiled.cost), memoryTable(compiled.memory)));
    const verdict = roofline.get(compiled.key);
    if (verdict) parts.push(rooflineVerdict(verdict, () => ctx.showPanel("performance")));
    const counts = eqnCountsOf(compiled);
    if (counts && counts.lines.length) parts.push(eqnCountsTable(counts, ctx.editor, eqnState, drawDetail));
    if (compiled.capture_errors?.length) {
      parts.push(
        el("div", { class: "inspect-notice" }, `Parts of this capture failed: ${compiled.capture_errors.join("; ")}`),
      );
    }
    parts.push(toolbar(compiled, siblings));
    const cut = compiled.truncated?.[artifact];
    const other = compareWith ? byKey.get(compareWith) : undefined;
    if (cut) {
      parts.push(
        el(
          "div",
          { class: "inspect-notice", "data-testid": "inspect-truncated" },
          `Showing the first ${formatBytes(compiled.artifact_limit_bytes)} of ${formatBytes(cut)}: ` +
            "the rest was cut to keep the page responsive (worker setting JAXPLAY_ARTIFACT_LIMIT_BYTES).",
        ),
      );
    }
    if (view !== "text" && !other) {
      diff.clear();
      if (view === "panes") {
        panes.show(compiled, runCode);
        parts.push(panes.element);
      } else {
        memory.show(compiled);
        parts.push(memory.element);
      }
      detail.replaceChildren(...parts.filter((p): p is HTMLElement => p !== null));
      showBands(view === "panes");
      panes.refresh();
      return;
    }
    showBands(false);
    if (other) {
      parts.push(
        el(
          "div",
          { class: "inspect-diff-legend" },
          el("span", {}, `#${other.compile_index} (${other.signature})`),
          el("span", {}, `#${compiled.compile_index} (${compiled.signature})`),
        ),
      );
      diff.show(other[artifact], compiled[artifact], artifact, wrap);
      parts.push(diff.element);
    } else {
      diff.clear();
      code.show(compiled[artifact], artifact, compiled.source_lines?.[artifact] ?? []);
      parts.push(code.element);
    }
    detail.replaceChildren(...parts.filter((p): p is HTMLElement => p !== null));
    code.refresh();
  }

  function toolbar(compiled: CompiledEvent, siblings: CompiledEvent[]): HTMLElement {
    const tabs = el("div", { class: "inspect-artifact-tabs", role: "tablist" });
    for (const [name, title] of ARTIFACTS) {
      tabs.append(
        el(
          "button",
          {
            class: "inspect-artifact-tab",
            type: "button",
            role: "tab",
            "aria-selected": String(view === "text" && name === artifact),
            "data-artifact": name,
            onclick: () => {
              artifact = name;
              view = "text";
              passesShown = false;
              passes.close();
              drawDetail();
              keepPanesInAddress();
            },
          },
          title,
        ),
      );
    }
    for (const [name, title] of VIEWS) {
      tabs.append(
        el(
          "button",
          {
            class: "inspect-artifact-tab",
            type: "button",
            role: "tab",
            "aria-selected": String(view === name && !passesShown),
            "data-artifact": name,
            "data-testid": `inspect-view-${name}`,
            onclick: () => {
              view = name;
              compareWith = null;
              passesShown = false;
              passes.close();
              drawDetail();
              keepPanesInAddress();
            },
          },
          title,
        ),
      );
    }
    const compare = el("select", { class: "inspect-compare", "data-testid": "inspect-compare" });
    compare.append(el("option", { value: "" }, "none"));
    for (const sibling of siblings) {
      if (sibling.key === compiled.key) continue;
      const option = el("option", { value: sibling.key }, `#${sibling.compile_index}`);
      option.selected = sibling.key === compareWith;
      compare.append(option);
    }
    compare.disabled = siblings.length < 2;
    compare.addEventListener("change", () => {
      compareWith = compare.value || null;
      if (compareWith) view = "text"; // a diff is of one text
      drawDetail();
      keepPanesInAddress();
    });
    const wrapBox = el("input", { type: "checkbox" });
    wrapBox.checked = wrap;
    wrapBox.addEventListener("change", () => {
      wrap = wrapBox.checked;
      localStorage.setItem(WRAP_KEY, wrap ? "1" : "0");
      if (compareWith) drawDetail();
      else code.setWrap(wrap);
    });
    const copy = el("button", { class: "btn btn-ghost", type: "button", title: "Copy this text", disabled: view !== "text" }, "Copy");
    copy.addEventListener("click", () => {
      void navigator.clipboard?.writeText(compiled[artifact]).then(
        () => flash(copy, "Copied"),
        () => flash(copy, "Copy failed"),
      );
    });
    const passesButton = el(
      "button",
      {
        class: "btn btn-ghost inspect-passes-button",
        type: "button",
        "aria-pressed": String(passesShown),
        "data-testid": "inspect-passes",
        title: "Run the program again until this compilation and show what each of XLA's passes did to it",
        onclick: () => {
          passesShown = !passesShown;
          if (passesShown) passes.open(compiled, runCode, runBackend, runRuntime, runFlags);
          else passes.close();
          drawDetail();
        },
      },
      "XLA passes",
    );
    return el(
      "div",
      { class: "inspect-toolbar" },
      tabs,
      el("span", { class: "topbar-spacer" }),
      passesButton,
      el("label", { class: "inspect-option inspect-compare-label",
                    title: siblings.length < 2 ? "One compilation: nothing to diff it with" : "Diff this text with another compilation's" },
        "Diff with ", compare),
      el(
        "button",
        {
          class: "btn btn-ghost",
          type: "button",
          title: "Search this text (Ctrl+F inside it)",
          disabled: compareWith !== null || view !== "text",
          onclick: () => code.openSearch(),
        },
        "Search",
      ),
      copy,
      el("label", { class: "inspect-option" }, wrapBox, " Wrap"),
    );
  }

  function flash(button: HTMLElement, text: string): void {
    const original = button.textContent;
    button.textContent = text;
    window.setTimeout(() => (button.textContent = original), 1200);
  }

  // --- events --------------------------------------------------------------------

  function entryFor(fnId: number, fn: string, line: number | null, module: string | null): FunctionEntry {
    let entry = functions.get(fnId);
    if (!entry) {
      entry = { fnId, fn, line, module, compiles: [], timing: null, compiling: null };
      functions.set(fnId, entry);
    }
    return entry;
  }

  drawList();

  return {
    id: "inspect",
    title: "Inspect",
    element,
    handles: ["started", "compiling", "compiled", "fn_timing", "timing", "roofline"],
    runFields: () => ({ inspect: inspectOn }),
    // A shared link opens on the panes the page showed (pane_layout.ts).
    linkFields: () => (view === "panes" ? { view: { panes: panes.arrangement } } : {}),
    onRunStart() {
      runCode = ctx.editor.getCode();
      runBackend = undefined;
      runRuntime = undefined;
      runFlags = undefined;
      passesShown = false;
      passes.reset();
      roofline.clear();
      functions.clear();
      byKey.clear();
      timings = [];
      selected = null;
      compareWith = null;
      runInspected = inspectOn;
      finished = false;
      jaxTag.textContent = "";
      ctx.editor.clearLineMarks(HOVER_OWNER);
      ctx.editor.clearLineMarks(BANDS_OWNER);
      diff.clear();
      panes.clear();
      detail.hidden = true;
      drawList();
    },
    onEvent(ev) {
      if (ev.type === "started") {
        runBackend = ev.backend;
        runRuntime = ev.runtime;
        runFlags = ev.flags;
        jaxTag.textContent = ev.jax_version ? `JAX ${ev.jax_version}` : "";
      } else if (ev.type === "roofline") {
        for (const row of ev.functions) roofline.set(row.key, row);
        if (selected !== null && roofline.has(selected)) drawDetail();
      } else if (ev.type === "compiling") {
        entryFor(ev.fn_id, ev.fn, ev.line, null).compiling = ev.compile_index;
        scheduleRedraw();
      } else if (ev.type === "compiled") {
        const entry = entryFor(ev.fn_id, ev.fn, ev.line, ev.module);
        entry.module = ev.module;
        entry.compiles.push(ev);
        if (entry.compiling !== null && ev.compile_index >= entry.compiling) entry.compiling = null;
        byKey.set(ev.key, ev);
        if (selected === null) select(ev.key);
        else scheduleRedraw();
      } else if (ev.type === "fn_timing") {
        for (const timing of ev.functions) entryFor(timing.fn_id, timing.fn, timing.line, null).timing = timing;
        scheduleRedraw();
      } else if (ev.type === "timing") {
        timings.push(ev);
        scheduleRedraw();
      }
    },
    onRunDone() {
      finished = true;
      // A run that ended while compiling (an error, Stop): nothing will fill the entry in.
      for (const entry of functions.values()) entry.compiling = null;
      drawList();
    },
    onShow() {
      code.refresh();
      panes.refresh();
    },
  };
};
