/**
 * The Inspect tab: what JAX made of each jitted function.
 *
 * Top: every function compiled in the run and the `playground.timeit`
 * results (`inspect_list.ts`). Below: the selected compilation, its figures
 * and its jaxpr, StableHLO or optimized HLO, diff, panes, memory or passes
 * (`inspect_detail.ts`). This module is the panel: the capture option, the
 * run's events filling in what the two show, and what a link keeps.
 *
 * Events carry megabytes of text: the list redraws at most once a frame and
 * only the artifact on screen is handed to CodeMirror.
 */

import { el } from "../core/dom";
import "./inspect.css";
import type { PanelFactory } from "../panel/types";
import "../memory/oom_hint";
import { initialPanes, PANES_PARAM } from "../panes/pane_layout";
import { CompilationDetail } from "./inspect_detail";
import { FunctionList, InspectedRun } from "./inspect_list";

const INSPECT_KEY = "jaxplay.inspect";

export const inspectPanel: PanelFactory = (ctx) => {
  const run = new InspectedRun();
  // A shared snippet opens with the setting it was shared with; otherwise this browser's choice.
  const sharedSettings = ctx.boot.snippet?.settings as { inspect?: unknown } | undefined;
  let inspectOn =
    typeof sharedSettings?.inspect === "boolean" ? sharedSettings.inspect : localStorage.getItem(INSPECT_KEY) !== "0";
  let redrawScheduled = false;

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
  const list = new FunctionList(run, { editor: ctx.editor, setBadge: (value) => ctx.setBadge(value), select });
  // A link may open on panes side by side (?panes=... or the shared snippet's settings.view.panes).
  const linkedPanes = initialPanes(window.location.search, ctx.boot.snippet?.settings);
  const detail = new CompilationDetail(ctx, run, linkedPanes);
  const top = el(
    "div",
    { class: "inspect-top" },
    el("div", { class: "inspect-top-bar" }, el("h3", { class: "inspect-heading" }, "Compiled functions"), jaxTag, optionBar),
    list.element,
  );
  const element = el("div", { class: "inspect" }, top, detail.element);

  // An address naming panes (not another tab) opens on Inspect.
  const askedView = new URLSearchParams(window.location.search).get("view");
  if (linkedPanes && new URLSearchParams(window.location.search).has(PANES_PARAM) && (!askedView || askedView === "inspect")) {
    queueMicrotask(() => ctx.activate());
  }
  // A timeline slice or a roofline point names a compilation: show it here.
  window.addEventListener("jaxplay:show-compiled", (e) => {
    const asked = (e as CustomEvent<{ key: string; view?: string }>).detail;
    const key = asked?.key;
    if (!key || !run.byKey.has(key)) return;
    if (asked.view === "memory") detail.showMemory();
    ctx.activate();
    select(key);
  });

  function scheduleRedraw(): void {
    if (redrawScheduled) return;
    redrawScheduled = true;
    requestAnimationFrame(() => {
      redrawScheduled = false;
      list.draw(detail.selected);
    });
  }

  function select(key: string): void {
    detail.select(key);
    list.draw(detail.selected);
    detail.draw();
  }

  list.draw(detail.selected);

  return {
    id: "inspect",
    title: "Inspect",
    element,
    handles: ["started", "compiling", "compiled", "fn_timing", "timing", "roofline"],
    runFields: () => ({ inspect: inspectOn }),
    // A shared link opens on the panes the page showed (pane_layout.ts).
    linkFields: () => (detail.view === "panes" ? { view: { panes: detail.panes.arrangement } } : {}),
    onRunStart() {
      run.code = ctx.editor.getCode();
      run.backend = undefined;
      run.runtime = undefined;
      run.flags = undefined;
      detail.clear();
      run.roofline.clear();
      run.functions.clear();
      run.byKey.clear();
      run.timings = [];
      run.inspected = inspectOn;
      run.finished = false;
      jaxTag.textContent = "";
      list.draw(detail.selected);
    },
    onEvent(ev) {
      if (ev.type === "started") {
        run.backend = ev.backend;
        run.runtime = ev.runtime;
        run.flags = ev.flags;
        jaxTag.textContent = ev.jax_version ? `JAX ${ev.jax_version}` : "";
      } else if (ev.type === "roofline") {
        for (const row of ev.functions) run.roofline.set(row.key, row);
        if (detail.selected !== null && run.roofline.has(detail.selected)) detail.draw();
      } else if (ev.type === "compiling") {
        run.entryFor(ev.fn_id, ev.fn, ev.line, null).compiling = ev.compile_index;
        scheduleRedraw();
      } else if (ev.type === "compiled") {
        const entry = run.entryFor(ev.fn_id, ev.fn, ev.line, ev.module);
        entry.module = ev.module;
        entry.compiles.push(ev);
        if (entry.compiling !== null && ev.compile_index >= entry.compiling) entry.compiling = null;
        run.byKey.set(ev.key, ev);
        if (detail.selected === null) select(ev.key);
        else scheduleRedraw();
      } else if (ev.type === "fn_timing") {
        for (const timing of ev.functions) run.entryFor(timing.fn_id, timing.fn, timing.line, null).timing = timing;
        scheduleRedraw();
      } else if (ev.type === "timing") {
        run.timings.push(ev);
        scheduleRedraw();
      }
    },
    onRunDone() {
      run.finished = true;
      // A run that ended while compiling (an error, Stop): nothing will fill the entry in.
      for (const entry of run.functions.values()) entry.compiling = null;
      list.draw(detail.selected);
    },
    onShow() {
      detail.code.refresh();
      detail.panes.refresh();
    },
  };
};
