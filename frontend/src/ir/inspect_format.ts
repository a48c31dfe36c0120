/**
 * The Inspect panel's small pieces: human units, the phase bar, the cost and
 * memory tables, and the timeit chart. Pure DOM builders, no state.
 */

import { el } from "../core/dom";

const SVG_NS = "http://www.w3.org/2000/svg";

/** 1536 -> "1.5 KiB". */
export function formatBytes(bytes: number | null | undefined): string {
  if (bytes === null || bytes === undefined || !Number.isFinite(bytes)) return "—";
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let value = bytes;
  let unit = 0;
  while (Math.abs(value) >= 1024 && unit < units.length - 1) {
    value /= 1024;
    unit += 1;
  }
  return unit === 0 ? `${value} B` : `${value.toPrecision(3)} ${units[unit]}`;
}

/** 33619968 -> "33.6 M"; used with a unit after it ("33.6 MFLOP"). */
export function formatCount(count: number | null | undefined): string {
  if (count === null || count === undefined || !Number.isFinite(count)) return "—";
  const steps: [number, string][] = [[1e12, "T"], [1e9, "G"], [1e6, "M"], [1e3, "k"]];
  for (const [scale, prefix] of steps) {
    if (Math.abs(count) >= scale) return `${(count / scale).toPrecision(3)} ${prefix}`;
  }
  return `${Number.isInteger(count) ? count : count.toPrecision(3)} `;
}

/** Milliseconds at timer resolution: "14.2 µs", "3.61 ms", "1.20 s". */
export function formatMs(ms: number | null | undefined): string {
  if (ms === null || ms === undefined || !Number.isFinite(ms)) return "—";
  if (ms < 0.0009995) return `${(ms * 1e6).toPrecision(3)} ns`;
  if (ms < 0.9995) return `${(ms * 1e3).toPrecision(3)} µs`;
  if (ms < 999.5) return `${ms.toPrecision(3)} ms`; // 999.7 would print as "1.00e+3"
  return `${(ms / 1000).toPrecision(3)} s`;
}

export const PHASES = ["trace", "lower", "compile", "execute"] as const;
export type Phase = (typeof PHASES)[number];
const PHASE_HELP: Record<Phase, string> = {
  trace: "Python function traced to a jaxpr",
  lower: "jaxpr lowered to StableHLO",
  compile: "XLA optimized and compiled the module",
  execute: "rest of the first call: dispatch and run, until the result was ready",
};

/** A stacked bar, one segment per phase, widths proportional to time. */
export function phaseBar(phases: Partial<Record<Phase, number>>): HTMLElement {
  const total = PHASES.reduce((sum, p) => sum + Math.max(0, phases[p] ?? 0), 0);
  const bar = el("div", { class: "inspect-phases-bar", role: "img", "aria-label": "Time per phase" });
  const legend = el("div", { class: "inspect-phases-legend" });
  for (const phase of PHASES) {
    const ms = Math.max(0, phases[phase] ?? 0);
    const title = `${phase}: ${formatMs(ms)} — ${PHASE_HELP[phase]}`;
    if (total > 0 && ms > 0) {
      const segment = el("span", { class: `inspect-phase inspect-phase-${phase}`, title });
      segment.style.flexGrow = String(ms / total);
      bar.append(segment);
    }
    legend.append(
      el(
        "span",
        { class: "inspect-phase-key", title },
        el("span", { class: `inspect-swatch inspect-phase-${phase}` }),
        `${phase} `,
        el("b", {}, formatMs(ms)),
      ),
    );
  }
  return el("div", { class: "inspect-phases", "data-testid": "inspect-phases" }, bar, legend);
}

function row(label: string, value: string, title?: string): HTMLElement {
  return el("tr", { title: title ?? null }, el("th", { scope: "row" }, label), el("td", {}, value));
}

/** cost_analysis(): the three numbers people read, then every other key JAX gave. */
export function costTable(cost: Record<string, number | string | null> | null): HTMLElement {
  const table = el("table", { class: "inspect-table", "data-testid": "inspect-cost" });
  table.append(el("caption", {}, "Cost (XLA estimate)"));
  if (!cost) {
    table.append(row("cost", "not available on this backend"));
    return table;
  }
  const num = (key: string): number | null => (typeof cost[key] === "number" ? (cost[key] as number) : null);
  table.append(
    row("flops", `${formatCount(num("flops"))}FLOP`, String(cost.flops ?? "")),
    row("transcendentals", formatCount(num("transcendentals")).trim() || "0", String(cost.transcendentals ?? "")),
    row("bytes accessed", formatBytes(num("bytes accessed")), String(cost["bytes accessed"] ?? "")),
  );
  const flops = num("flops");
  const bytes = num("bytes accessed");
  if (flops !== null && bytes) {
    table.append(row("intensity", `${(flops / bytes).toPrecision(3)} FLOP/byte`, "flops ÷ bytes accessed"));
  }
  return table;
}

/** memory_analysis() in reading order: what goes in and out, what the program needs besides, then the totals. */
const MEMORY_ROWS: [string, string, string][] = [
  ["argument_size_in_bytes", "arguments", "the inputs' buffers"],
  ["output_size_in_bytes", "outputs", "the results' buffers"],
  ["alias_size_in_bytes", "aliased (donated)", "outputs written into donated inputs' buffers: counted in both above"],
  ["temp_size_in_bytes", "temporaries", "scratch buffers XLA allocates for the program's intermediate values"],
  ["generated_code_size_in_bytes", "generated code", "the compiled program itself"],
];

/** arguments + outputs + temporaries − aliased: every buffer at once, or null without the numbers. */
export function memorySum(memory: Record<string, number>): number | null {
  const parts = ["argument_size_in_bytes", "output_size_in_bytes", "temp_size_in_bytes"];
  if (!parts.every((key) => typeof memory[key] === "number")) return null;
  return parts.reduce((sum, key) => sum + memory[key], 0) - (memory.alias_size_in_bytes ?? 0);
}

export const PEAK_NOTE =
  "peak is XLA's figure for the most bytes live at once: at most the sum, since buffers never live " +
  "together count once (XLA:CPU's can leave the temporaries out).";

/** The memory table; with XLA's peak, a note under it says how peak and the sum relate. */
export function memoryTable(memory: Record<string, number> | null): HTMLElement {
  const table = el("table", { class: "inspect-table", "data-testid": "inspect-memory" });
  table.append(el("caption", {}, "Memory (per device)"));
  if (!memory) {
    table.append(row("memory", "not available on this backend"));
    return table;
  }
  for (const [key, label, help] of MEMORY_ROWS) {
    if (key in memory) table.append(row(label, formatBytes(memory[key]), `${memory[key]} bytes: ${help}`));
  }
  const sum = memorySum(memory);
  if (sum !== null) {
    table.append(el("tr", { class: "inspect-table-total", title: `${sum} bytes` },
      el("th", { scope: "row" }, "sum"), el("td", {}, formatBytes(sum))));
  }
  if (!("peak_memory_in_bytes" in memory)) return table;
  const peak = memory.peak_memory_in_bytes;
  table.append(row("peak (XLA)", formatBytes(peak), `${peak} bytes`));
  // The note wraps at the table's width (inspect.css), beside the cost table.
  return el("div", { class: "inspect-memory" }, table,
    el("p", { class: "inspect-table-note", "data-testid": "inspect-peak-note" },
      `sum = arguments + outputs + temporaries − aliased. ${PEAK_NOTE}`));
}

function svg<K extends keyof SVGElementTagNameMap>(tag: K, attrs: Record<string, string | number>): SVGElementTagNameMap[K] {
  const node = document.createElementNS(SVG_NS, tag);
  for (const [key, value] of Object.entries(attrs)) node.setAttribute(key, String(value));
  return node;
}

/**
 * Every sample as a dot on a time axis, the interquartile range as a box and
 * the median as a bar: spread and outliers at a glance.
 */
export function timingChart(samplesMs: number[], q1: number, median: number, q3: number): SVGSVGElement {
  const width = 320;
  const height = 44;
  const pad = 8;
  const lo = Math.min(...samplesMs);
  const hi = Math.max(...samplesMs);
  const span = hi - lo || Math.max(hi, 1e-9) * 0.1;
  const x = (v: number) => pad + ((v - lo + span * 0.05) / (span * 1.1)) * (width - 2 * pad);
  const chart = svg("svg", { class: "inspect-timing-chart", viewBox: `0 0 ${width} ${height}`, role: "img" });
  chart.setAttribute("aria-label", `median ${formatMs(median)}, IQR ${formatMs(q3 - q1)}`);
  chart.append(svg("line", { x1: pad, x2: width - pad, y1: 30, y2: 30, class: "inspect-chart-axis" }));
  chart.append(svg("rect", { x: x(q1), y: 10, width: Math.max(1, x(q3) - x(q1)), height: 14, class: "inspect-chart-iqr" }));
  chart.append(svg("line", { x1: x(median), x2: x(median), y1: 6, y2: 28, class: "inspect-chart-median" }));
  samplesMs.forEach((sample, i) => {
    const dot = svg("circle", { cx: x(sample), cy: 17 + ((i % 3) - 1) * 3, r: 2.6, class: "inspect-chart-dot" });
    dot.append(svg("title", {}));
    dot.firstChild!.textContent = `run ${i + 1}: ${formatMs(sample)} per loop`;
    chart.append(dot);
  });
  for (const [value, anchor] of [[lo, "start"], [hi, "end"]] as const) {
    const label = svg("text", { x: anchor === "start" ? pad : width - pad, y: 41, "text-anchor": anchor, class: "inspect-chart-label" });
    label.textContent = formatMs(value);
    chart.append(label);
  }
  return chart;
}
