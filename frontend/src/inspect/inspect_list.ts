/**
 * The top of the Inspect tab: what the run on screen compiled and timed, as
 * its events said (`InspectedRun`), and the list that shows it
 * (`FunctionList`): every function compiled in the run, each compilation
 * listed under it (a recompilation shows JAX's reason), with call counts and
 * times from `fn_timing`, then the `timing` results of `playground.timeit` as
 * charts. A compilation in the list is a button that selects it.
 */

import { el } from "../core/dom";
import type { EditorAccess } from "../editor/editor";
import { formatMs, timingChart } from "../ir/inspect_format";
import type { CompiledEvent, FunctionTiming, TimingEvent } from "../ir/inspect_types";
import type { RooflineRow } from "../performance/perf_types";
import type { RunFlags } from "../wire/protocol";
import { callStats } from "./inspect_calls";
import { outputsCode, signatureCode, signatureToggle } from "./inspect_signature";

export interface FunctionEntry {
  fnId: number;
  fn: string;
  line: number | null;
  module: string | null;
  compiles: CompiledEvent[];
  timing: FunctionTiming | null;
  /** The compilation being made now (its index), until its `compiled` event fills it in. */
  compiling: number | null;
}

/** What the run on screen compiled and timed, filled in as its events arrive. */
export class InspectedRun {
  readonly functions = new Map<number, FunctionEntry>();
  readonly byKey = new Map<string, CompiledEvent>();
  readonly roofline = new Map<string, RooflineRow>();
  timings: TimingEvent[] = [];
  /** Capturing compilations was on for this run. */
  inspected = true;
  finished = false;
  // What a "passes" request needs to run the same program again: its code and backend.
  code = "";
  backend: string | undefined;
  runtime: string | undefined;
  flags: RunFlags | undefined;

  entryFor(fnId: number, fn: string, line: number | null, module: string | null): FunctionEntry {
    let entry = this.functions.get(fnId);
    if (!entry) {
      entry = { fnId, fn, line, module, compiles: [], timing: null, compiling: null };
      this.functions.set(fnId, entry);
    }
    return entry;
  }
}

/** A function's or a timeit call's name: a button to its line in the code, when it has one. */
export function sourceLink(editor: EditorAccess, line: number | null, label: string, title: string): HTMLElement {
  if (line === null) return el("span", { class: "inspect-fn-name" }, label);
  return el(
    "button",
    { class: "inspect-fn-name inspect-link", type: "button", title, onclick: () => editor.goToLine(line) },
    label,
  );
}

export interface FunctionListHooks {
  editor: EditorAccess;
  setBadge(value: number | null): void;
  select(key: string): void;
}

export class FunctionList {
  readonly element = el("div", { class: "inspect-list", "data-testid": "inspect-list" });

  constructor(private readonly run: InspectedRun, private readonly hooks: FunctionListHooks) {}

  /** Draws the list anew, `selected` (a compilation's key) pressed. */
  draw(selected: string | null): void {
    const { functions, byKey, timings } = this.run;
    const count = byKey.size;
    this.hooks.setBadge(count || null);
    if (!functions.size && !timings.length) {
      this.element.replaceChildren(this.emptyHint());
      return;
    }
    const blocks: HTMLElement[] = [];
    for (const entry of functions.values()) {
      if (entry.compiles.length || entry.timing || entry.compiling !== null) blocks.push(this.functionBlock(entry, selected));
    }
    if (timings.length) {
      blocks.push(el("h3", { class: "inspect-heading" }, "timeit"));
      for (const timing of timings) blocks.push(this.timingBlock(timing));
    }
    // A function that began compiling and failed (a tracing error) leaves nothing to list.
    this.element.replaceChildren(...(blocks.length ? blocks : [this.emptyHint()]));
  }

  private emptyHint(): HTMLElement {
    let text: string;
    if (!this.run.inspected) text = "Capturing compilations was off for this run.";
    else if (this.run.finished) text = "This run compiled nothing through jax.jit.";
    else
      text =
        "Every function compiled through jax.jit appears here with its jaxpr, StableHLO, optimized HLO, " +
        "cost, memory and the time each phase took. Time a call with `from playground import timeit`.";
    return el("div", { class: "inspect-empty" }, text);
  }

  private functionBlock(entry: FunctionEntry, selected: string | null): HTMLElement {
    const timing = entry.timing;
    const stats = timing ? callStats(timing) : { text: "", title: "" };
    const where = entry.line !== null ? `line ${entry.line}` : entry.module ? `from ${entry.module}` : "";
    const head = el(
      "div",
      { class: "inspect-fn-head" },
      sourceLink(this.hooks.editor, entry.line, entry.fn, `Go to the definition of ${entry.fn}`),
      el("span", { class: "inspect-fn-where" }, where),
      el("span", { class: "inspect-fn-stats", "data-testid": "inspect-fn-stats", title: stats.title }, stats.text),
    );
    const compiles = el("ol", { class: "inspect-compiles" });
    for (const compiled of entry.compiles) compiles.append(this.compileRow(compiled, selected));
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

  private compileRow(compiled: CompiledEvent, selected: string | null): HTMLElement {
    const total = compiled.phases_ms.trace + compiled.phases_ms.lower + compiled.phases_ms.compile;
    const button = el(
      "button",
      {
        class: "inspect-compile",
        type: "button",
        "aria-pressed": String(compiled.key === selected),
        "data-key": compiled.key,
        onclick: () => this.hooks.select(compiled.key),
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

  private timingBlock(timing: TimingEvent): HTMLElement {
    const summary =
      `median ${formatMs(timing.median_ms)} · min ${formatMs(timing.min_ms)} · IQR ${formatMs(timing.iqr_ms)} · ` +
      `${timing.repeats} runs × ${timing.loops.toLocaleString()} loops · first call ${formatMs(timing.warmup_ms)}`;
    return el(
      "section",
      { class: "inspect-timing", "data-testid": "inspect-timing" },
      el(
        "div",
        { class: "inspect-fn-head" },
        sourceLink(this.hooks.editor, timing.line, timing.label, "Go to the timeit call"),
        el("span", { class: "inspect-fn-stats" }, summary),
      ),
      timingChart(timing.samples_ms, timing.q1_ms, timing.median_ms, timing.q3_ms),
    );
  }
}
