/**
 * Compare versions, or flags: one program on two (or every) offered JAX versions, or on one version with
 * two sets of JAX options and XLA flags (A and B, each a FlagsEditor), side by side.
 *
 * Shows, for each version: the output, with the lines that differ from the
 * first version's marked; per jitted function, the jaxpr, StableHLO and
 * optimized HLO diff against the first version (Inspect's DiffView); and
 * cost, memory and timing per version in one table. The columns, the table
 * and the outputs are drawn by `compare_columns.ts`; this module is the
 * panel: its controls, sending the runs, and the diff of one function.
 *
 * The runs are this tab's own, sent through `ctx.request` with `runtime` set,
 * at most `MAX_IN_FLIGHT` at once (the server's limit per connection); each
 * run's events come back to it there, never through the run on screen.
 *
 * A version the server answers from its result cache replays the recorded
 * run: its times were measured then, not now. Those cells say so, and
 * "Compare fresh" runs every version again past the cache.
 */

import { el } from "../core/dom";
import type { IrDialect } from "../ir/hlo";
import type { RunFlags, RuntimeInfo, ServerEvent } from "../wire/protocol";
import { FlagsEditor } from "../flags/flags_editor";
import { ComparePassLists } from "./compare_passes";
import type { CompiledEvent } from "../ir/inspect_types";
import { drawOutputs, drawReplayed, drawSummary, functionKey, label, type VersionRun } from "./compare_columns";
import { DiffView } from "../ir/inspect_view";
import type { PanelFactory, RunRequest } from "../panel/types";
import "./compare.css";

const MAX_IN_FLIGHT = 3;
const ARTIFACTS: IrDialect[] = ["jaxpr", "stablehlo", "hlo"];

export const comparePanel: PanelFactory = (ctx) => {
  const picks = el("div", { class: "compare-picks", "data-testid": "compare-picks" });
  const status = el("div", { class: "compare-status", "data-testid": "compare-status" });
  const replayed = el("div", { class: "compare-replayed-note", hidden: true, "data-testid": "compare-replayed" });
  const summary = el("div", { class: "compare-summary" });
  const outputs = el("div", { class: "compare-outputs", "data-testid": "compare-outputs" });
  const functionsBar = el("div", { class: "compare-functions" });
  const diff = new DiffView();
  const same = el("div", { class: "compare-same", hidden: true, "data-testid": "compare-same" });
  const passLists = new ComparePassLists(ctx);
  const runButton = el("button", { class: "btn", type: "button", "data-testid": "compare-run" }, "Compare");
  const modeSelect = el("select", { id: "compare-mode", "data-testid": "compare-mode" },
    el("option", { value: "versions" }, "JAX versions"), el("option", { value: "flags" }, "flags A and B"));
  const setA = new FlagsEditor("compare-a", "Flag set A");
  const setB = new FlagsEditor("compare-b", "Flag set B");
  const flagSets = el("div", { class: "compare-flag-sets", hidden: true, "data-testid": "compare-flag-sets" },
    el("section", { class: "compare-flag-set" }, el("h4", {}, "A"), setA.element),
    el("section", { class: "compare-flag-set" }, el("h4", {}, "B"), setB.element));
  const allButton = el("button", { class: "btn btn-ghost", type: "button", "data-testid": "compare-all" }, "Run on all");
  const element = el(
    "div",
    { class: "compare" },
    el("div", { class: "compare-toolbar" },
      el("label", { class: "compare-label", for: "compare-mode" }, "Compare"), modeSelect, picks, runButton, allButton),
    flagSets,
    status,
    replayed,
    summary,
    outputs,
    functionsBar,
    same,
    diff.element,
    passLists.element,
  );
  let runs: VersionRun[] = [];
  let chosenFunction: string | null = null;
  let artifact: IrDialect = "jaxpr";
  let against = 1;
  let scheduled = false;
  /** This comparison's runs skip the result cache. */
  let fresh = false;
  const checked = new Set<string>();

  function flagsMode(): boolean {
    return modeSelect.value === "flags";
  }

  function drawPicks(): void {
    if (flagsMode()) {
      const choices = ctx.runChoices();
      const runtime = choices.runtime ?? choices.runtimes.find((r) => r.default);
      picks.replaceChildren(el("span", { class: "compare-label" },
        `on JAX ${runtime?.jax_version ?? "(the default)"}, the version chosen for Run`));
      setA.setTarget(runtime?.jax_version, choices.backend);
      setB.setTarget(runtime?.jax_version, choices.backend);
      runButton.disabled = false;
      allButton.hidden = true;
      return;
    }
    allButton.hidden = false;
    const offered = ctx.runChoices().runtimes.filter((r) => !r.problem);
    if (!checked.size) offered.slice(0, 2).forEach((r) => checked.add(r.name));
    picks.replaceChildren(
      el("span", { class: "compare-label" }, "JAX"),
      ...offered.map((r) => {
        const box = el("input", { type: "checkbox", value: r.name, "data-testid": `compare-pick-${r.name}` });
        box.checked = checked.has(r.name);
        box.addEventListener("change", () => (box.checked ? checked.add(r.name) : checked.delete(r.name)));
        return el("label", { class: "compare-pick" }, box, ` ${r.name}`);
      }),
    );
    const enough = offered.length >= 2;
    runButton.disabled = allButton.disabled = !enough;
    if (!enough && !runs.length) {
      status.textContent = "This backend offers one JAX version: there is nothing to compare it with.";
    }
  }

  function start(runtimes: RuntimeInfo[], skipCache = false, sets: [string, RunFlags | null][] = []): void {
    if (runtimes.length < 2 && !sets.length) {
      status.textContent = "Choose at least two JAX versions to compare.";
      return;
    }
    for (const run of runs) if (run.state === "sent") run.cancel?.();
    fresh = skipCache;
    const column = (runtime: RuntimeInfo, set: string | null, flags: RunFlags | null): VersionRun => ({
      runtime, set, flags, state: "waiting", cancel: null, output: "", error: null, status: null,
      elapsedMs: null, jax: null, compiled: new Map(), cachedAt: null,
    });
    const tabFlags = (ctx.runChoices().fields.flags as RunFlags | undefined) ?? null;
    runs = sets.length ? sets.map(([set, flags]) => column(runtimes[0], set, flags))
      : runtimes.map((runtime) => column(runtime, null, tabFlags));
    chosenFunction = null;
    against = 1;
    passLists.clear();
    diff.clear();
    pump();
    draw();
  }

  /** Sends waiting runs while fewer than MAX_IN_FLIGHT are out. */
  function pump(): void {
    const code = ctx.editor.getCode();
    for (const run of runs) {
      if (runs.filter((r) => r.state === "sent").length >= MAX_IN_FLIGHT) break;
      if (run.state !== "waiting") continue;
      run.state = "sent";
      const choices = ctx.runChoices();
      const message: RunRequest = {
        type: "run", code, ...choices.fields, inspect: true, compare: true, ...(fresh ? { fresh: true } : {}),
      };
      if (choices.backend) message.backend = choices.backend;
      if (!run.runtime.default) message.runtime = run.runtime.name;
      if (run.set !== null) {
        if (run.flags) message.flags = run.flags;
        else delete message.flags;
      }
      run.cancel = ctx.request(message, (ev) => onEvent(run, ev));
    }
  }

  function onEvent(run: VersionRun, ev: ServerEvent): void {
    if (!runs.includes(run)) return; // a run of an earlier comparison
    switch (ev.type) {
      case "started":
        run.jax = ev.jax_version;
        break;
      case "stdout":
      case "stderr":
        run.output += ev.text;
        break;
      case "error":
        run.error = `${ev.ename}: ${ev.message}`;
        break;
      case "compiled":
        run.compiled.set(functionKey(ev), ev);
        break;
      case "done":
        run.state = "done";
        run.status = ev.status;
        run.elapsedMs = ev.elapsed_ms;
        run.cachedAt = ev.cached ? ev.cached_at ?? "" : null;
        if (ev.message && !run.error && ev.status !== "ok") run.error = ev.message;
        pump();
        break;
      default:
        return;
    }
    if (!scheduled) {
      scheduled = true;
      requestAnimationFrame(() => {
        scheduled = false;
        draw();
      });
    }
  }

  function draw(): void {
    const done = runs.filter((r) => r.state === "done").length;
    const what = runs[0]?.set != null ? "flag sets" : "versions";
    status.textContent = runs.length
      ? `${done} of ${runs.length} ${what} done${done === runs.length ? "" : "…"}`
      : "Run this program on several JAX versions, or with two sets of flags, side by side: outputs, " +
        "compiled functions, cost and timing.";
    status.dataset.state = runs.length && done === runs.length ? "done" : "running";
    ctx.setBadge(runs.length ? `${done}/${runs.length}` : null);
    // "Compare fresh" runs the same versions (or flag sets) again, past the result cache.
    drawReplayed(replayed, runs, () => start(runs.map((r) => r.runtime), true,
      runs[0]?.set != null ? runs.map((r) => [r.set ?? "", r.flags]) : []));
    drawSummary(summary, runs);
    drawOutputs(outputs, runs);
    drawFunctions();
  }

  function drawFunctions(): void {
    const keys = [...new Set(runs.flatMap((r) => [...r.compiled.keys()]))];
    if (!keys.length || runs.length < 2) {
      functionsBar.replaceChildren();
      passLists.clear();
      diff.clear();
      return;
    }
    if (!chosenFunction || !keys.includes(chosenFunction)) chosenFunction = keys[0];
    const button = (label: string, active: boolean, testid: string, onclick: () => void) =>
      el("button", { class: `btn btn-ghost${active ? " active" : ""}`, type: "button", "data-testid": testid, onclick }, label);
    functionsBar.replaceChildren(
      el("span", { class: "compare-label" }, "Diff"),
      ...keys.map((key) => button(key, key === chosenFunction, "compare-fn", () => { chosenFunction = key; drawFunctions(); })),
      el("span", { class: "compare-sep" }, "·"),
      ...ARTIFACTS.map((a) => button(a, a === artifact, `compare-artifact-${a}`, () => { artifact = a; drawFunctions(); })),
      el("span", { class: "compare-sep" }, "·"),
      ...runs.slice(1).map((r, i) => button(r.set !== null ? `${runs[0].set} → ${r.set}` : `JAX ${runs[0].runtime.name} → ${r.runtime.name}`,
        against === i + 1, "compare-against", () => { against = i + 1; drawFunctions(); })),
    );
    const before = runs[0].compiled.get(chosenFunction);
    const after = runs[against]?.compiled.get(chosenFunction);
    const text = (ev: CompiledEvent | undefined) => (ev?.[artifact] as string | undefined) ?? "(not compiled on this version)";
    same.hidden = text(before) !== text(after);
    same.textContent = `The ${artifact} of ${chosenFunction} is the same with both ${runs[0].set !== null ? "flag sets" : "versions"} (shown folded below).`;
    if (before || after) diff.show(text(before), text(after), artifact, false);
    passLists.show(chosenFunction, [runs[0], runs[against]].filter((r) => r !== undefined).map((r) => ({
      id: runs.indexOf(r), label: label(r), compiled: r.compiled.get(chosenFunction ?? ""), runtime: r.runtime,
      flags: r.flags })));
  }

  modeSelect.addEventListener("change", () => {
    flagSets.hidden = !flagsMode();
    drawPicks();
  });
  runButton.addEventListener("click", () => {
    if (flagsMode()) {
      const choices = ctx.runChoices();
      const runtime = choices.runtime ?? choices.runtimes.find((r) => r.default) ?? choices.runtimes[0];
      if (!runtime) {
        status.textContent = "No JAX version is offered yet; wait for the server's list.";
        return;
      }
      start([runtime], false, [["A", setA.value()], ["B", setB.value()]]);
      return;
    }
    const offered = ctx.runChoices().runtimes.filter((r) => !r.problem && checked.has(r.name));
    start(offered);
  });
  allButton.addEventListener("click", () => {
    const offered = ctx.runChoices().runtimes.filter((r) => !r.problem);
    // "All" is a choice of versions too: the boxes show it, and Compare repeats it.
    checked.clear();
    offered.forEach((r) => checked.add(r.name));
    drawPicks();
    start(offered);
  });

  return {
    id: "compare",
    title: "Compare",
    element,
    handles: [],
    onRunStart() {},
    onEvent() {},
    onShow() {
      drawPicks();
      if (!runs.length) draw();
    },
  };
};
