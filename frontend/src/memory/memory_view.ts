/**
 * Where a compiled function's memory goes (Inspect's Memory view): the peak and where in the program it
 * is reached, the bytes alive over the schedule by kind (memory_chart.ts), and everything alive at the
 * peak, largest first, each linked to the HLO instruction and the line of the program that made it.
 * The totals are set against `memory_analysis()`, which they must equal.
 */

import { el } from "../core/dom";
import { formatBytes } from "../ir/inspect_format";
import type { CompiledEvent } from "../ir/inspect_types";
import { aliveText, memoryChart } from "./memory_chart";
import { KIND_TITLES, memoryViewOf, type MemoryView, type PeakBuffer } from "./memory_types";
import "./memory.css";

export interface MemoryHooks {
  /** Show the optimized HLO at this line of its text. */
  openHlo(line: number): void;
  /** Go to this line of the program. */
  openSource(line: number): void;
}

const TOTALS: [keyof MemoryView["totals"], string, string][] = [
  ["argument", "argument_size_in_bytes", "arguments"],
  ["output", "output_size_in_bytes", "outputs"],
  ["alias", "alias_size_in_bytes", "donated (counted in both)"],
  ["temp", "temp_size_in_bytes", "temporaries"],
];

export class MemoryPanel {
  readonly element = el("div", { class: "memory", "data-testid": "memory-view" });

  constructor(private readonly hooks: MemoryHooks) {}

  show(compiled: CompiledEvent): void {
    const view = memoryViewOf(compiled);
    if (!view) {
      const why = compiled.capture_errors?.find((e) => e.startsWith("hook") && e.includes("memory")) ?? null;
      this.element.replaceChildren(
        el("p", { class: "memory-empty" },
          "No buffer assignment for this compilation" + (why ? `: ${why}` : " (capturing it failed, or this run predates the view)."),
        ),
      );
      return;
    }
    this.element.replaceChildren(
      this.summary(view),
      this.agreement(view, compiled.memory),
      memoryChart(view, {
        describe: (position) => this.describe(view, position),
        onPick: (position) => {
          const index = view.schedule?.[position];
          const line = index !== null && index !== undefined ? view.instructions[index]?.[3] : null;
          if (line) this.hooks.openHlo(line);
        },
      }),
      this.table(view),
    );
  }

  private instructionLink(view: MemoryView, index: number | null | undefined): HTMLElement {
    const row = index !== null && index !== undefined ? view.instructions[index] : undefined;
    if (!row) return el("span", { class: "memory-none" }, "—");
    const [name, opcode, computation, hloLine] = row;
    const title = `${opcode} in ${computation}`;
    if (!hloLine) return el("code", { title: `${title} (past the part of the HLO text that was kept)` }, name);
    return el(
      "button",
      { class: "memory-link", type: "button", title: `${title}: show it in the optimized HLO`, "data-testid": "memory-hlo-link",
        onclick: () => this.hooks.openHlo(hloLine) },
      name,
    );
  }

  private sourceLink(line: number | null | undefined): HTMLElement {
    if (!line) return el("span", { class: "memory-none" }, "—");
    return el(
      "button",
      { class: "memory-link", type: "button", title: "Go to this line of the program", "data-testid": "memory-source-link",
        onclick: () => this.hooks.openSource(line) },
      `line ${line}`,
    );
  }

  private summary(view: MemoryView): HTMLElement {
    const at = view.peak.instruction !== null ? view.instructions[view.peak.instruction] : undefined;
    return el(
      "p",
      { class: "memory-summary", "data-testid": "memory-summary" },
      "Peak ",
      el("strong", { "data-testid": "memory-peak" }, formatBytes(view.peak.bytes)),
      ` at position ${view.peak.position + 1} of ${view.positions}`,
      at ? ", while " : "",
      at ? this.instructionLink(view, view.peak.instruction) : "",
      at ? " runs" : "",
      at?.[4] ? el("span", {}, " (", this.sourceLink(at[4]), ")") : "",
      ".",
    );
  }

  /** The totals beside memory_analysis()'s, and what each counts. */
  private agreement(view: MemoryView, analysis: Record<string, number> | null): HTMLElement {
    const rows = TOTALS.map(([ours, theirs, label]) => {
      const expected = analysis?.[theirs];
      const same = expected === undefined || expected === view.totals[ours];
      return el("li", { class: same ? "" : "memory-mismatch" }, `${label} ${formatBytes(view.totals[ours])}`,
        same ? "" : ` (memory_analysis() says ${formatBytes(expected)})`);
    });
    const agrees = analysis !== null && TOTALS.every(([ours, theirs]) => analysis[theirs] === view.totals[ours]);
    const notes: (HTMLElement | string)[] = [];
    const resident = view.totals.argument + view.totals.output - view.totals.alias;
    const reported = analysis?.peak_memory_in_bytes;
    if (reported !== undefined && reported !== view.peak.bytes) {
      const withoutTemps = reported === resident || reported === resident + view.totals.constant;
      notes.push(el("li", {}, `memory_analysis() reports peak_memory_in_bytes = ${formatBytes(reported)}` +
        (withoutTemps ? ": the arguments and outputs (and constants) without the temporaries alive with them, which the peak here counts." : ".")));
    }
    if (view.totals.constant || view.totals.thread_local) {
      notes.push(el("li", {}, `Not counted in either: constants ${formatBytes(view.totals.constant)} (part of the executable), ` +
        `scratch inside single instructions ${formatBytes(view.totals.thread_local)}.`));
    }
    for (const [xla, ours] of view.heap_simulator ?? []) {
      notes.push(el("li", { class: xla === ours ? "" : "memory-mismatch" },
        `XLA's heap simulator placed temporaries peaking at ${formatBytes(xla)}; this view finds ${formatBytes(ours)} for the same buffers.`));
    }
    return el(
      "div",
      { class: "memory-agreement", "data-testid": "memory-agreement" },
      el("span", { class: agrees ? "memory-ok" : "memory-mismatch", "data-agrees": String(agrees) },
        agrees ? "✓ Totals equal memory_analysis(): " : "Totals from XLA's buffer assignment: "),
      el("ul", { class: "memory-totals" }, ...rows),
      notes.length ? el("ul", { class: "memory-notes" }, ...notes) : null,
    );
  }

  private describe(view: MemoryView, position: number): string {
    const index = view.schedule?.[position];
    const row = index !== null && index !== undefined ? view.instructions[index] : undefined;
    const where = row ? ` · ${row[0]} (${row[1]}${row[4] ? `, line ${row[4]}` : ""})` : "";
    return `Position ${position + 1} of ${view.positions}${where} · ${aliveText(view, position)}` +
      (position === view.peak.position ? " · the peak" : "");
  }

  private table(view: MemoryView): HTMLElement {
    const body = el("tbody");
    for (const buffer of view.at_peak) body.append(this.row(view, buffer));
    if (view.at_peak_others) {
      body.append(el("tr", { class: "memory-others" },
        el("td", { class: "memory-bytes" }, formatBytes(view.at_peak_others.bytes)),
        el("td", { colspan: 5 }, `${view.at_peak_others.count} smaller buffers`)));
    }
    const listed = view.at_peak.reduce((sum, b) => sum + b.bytes, 0) + (view.at_peak_others?.bytes ?? 0);
    return el(
      "table",
      { class: "memory-table", "data-testid": "memory-peak-table" },
      el("caption", {}, `Alive at the peak, largest first (${view.at_peak.length + (view.at_peak_others?.count ?? 0)} buffers, ${formatBytes(listed)})`),
      el("thead", {}, el("tr", {}, ...["Size", "Kind", "Shape", "Made by", "Line", "Alive"].map((h) => el("th", { scope: "col" }, h)))),
      body,
    );
  }

  private row(view: MemoryView, buffer: PeakBuffer): HTMLElement {
    const maker = this.instructionLink(view, buffer.instruction);
    const made: (HTMLElement | string)[] = [];
    if (buffer.kind === "argument" || buffer.kind === "aliased") made.push(`argument ${buffer.parameter ?? "?"} `);
    made.push(maker);
    if (buffer.reused_by !== undefined && buffer.reused_by !== null) made.push(" → ", this.instructionLink(view, buffer.reused_by));
    const sourceIndex = buffer.reused_by ?? buffer.instruction;
    const sourceLine = sourceIndex !== null && sourceIndex !== undefined ? view.instructions[sourceIndex]?.[4] : null;
    const positions = Math.max(1, view.positions);
    const span = el("span", { class: `memory-life memory-kind-${buffer.kind}` });
    span.style.left = `${(buffer.start / positions) * 100}%`;
    span.style.width = `${Math.max(0.5, ((buffer.end - buffer.start + 1) / positions) * 100)}%`;
    return el(
      "tr",
      { "data-kind": buffer.kind },
      el("td", { class: "memory-bytes", title: `${buffer.bytes} bytes` }, formatBytes(buffer.bytes)),
      el("td", {}, el("span", { class: `memory-swatch memory-kind-${buffer.kind}` }), KIND_TITLES[buffer.kind].split(" (")[0]),
      el("td", {}, el("code", {}, buffer.shape ?? "—")),
      el("td", { class: "memory-maker" }, ...made),
      el("td", {}, this.sourceLink(sourceLine)),
      el("td", { class: "memory-lifetime", title: `positions ${buffer.start + 1} to ${buffer.end + 1}` }, span),
    );
  }
}
