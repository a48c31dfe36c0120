/**
 * Rooflines: each compiled function that ran, placed by its arithmetic intensity (FLOPs per byte,
 * from XLA's cost analysis) and the FLOP/s it reached (its median call time) under the device's
 * two roofs (measured peak FLOP/s and bytes/s). Says plainly which roof bounds it and how close it
 * came. `rooflineVerdict` is the one-line form Inspect shows for the selected compilation.
 */

import { el } from "../core/dom";
import type { DevicePeak } from "../wire/protocol";
import { formatCount, formatMs } from "../ir/inspect_format";
import { formatFraction, formatRate, type RooflineEvent, type RooflineRow } from "./perf_types";

const SVG_NS = "http://www.w3.org/2000/svg";
const WIDTH = 640;
const HEIGHT = 320;
const MARGIN = { left: 78, right: 18, top: 14, bottom: 44 };
/** Below this share of the roof a function's time is mostly fixed costs, not arithmetic or traffic. */
const OVERHEAD_FRACTION = 0.02;

export function verdictText(row: RooflineRow): string {
  if (row.intensity === null) return "No roofline: XLA's cost analysis reported no bytes accessed for it.";
  if (row.median_ms === null) return "Not timed: every call of this compilation compiled it (no plain call to time).";
  if (row.bound === null) {
    return `${formatRate(row.achieved_flops_per_s, "FLOP/s")} at ${row.intensity.toPrecision(3)} FLOP/byte; ` +
      "the device's peak is not measured on this worker, so there is no roof to compare with.";
  }
  const roof = row.bound === "compute" ? "compute roof (the peak FLOP/s)" : "memory roof (bandwidth × intensity)";
  let text = `${row.bound === "compute" ? "Compute-bound" : "Memory-bound"}: ${formatFraction(row.fraction_of_roof)} ` +
    `of the ${roof}. It reached ${formatRate(row.achieved_flops_per_s, "FLOP/s")} and ` +
    `${formatRate(row.achieved_bytes_per_s, "B/s")} at ${row.intensity.toPrecision(3)} FLOP/byte, where the roof is ` +
    `${formatRate(row.roof_flops_per_s, "FLOP/s")}.`;
  if ((row.fraction_of_roof ?? 1) < OVERHEAD_FRACTION) {
    text += " So far below both roofs, its time is mostly fixed costs (dispatch, launch, synchronization), " +
      "not arithmetic or memory traffic.";
  }
  return text;
}

export function howMeasured(row: RooflineRow | null, peak: DevicePeak | null): string {
  const parts = [];
  if (row) {
    parts.push(`${formatCount(row.flops)}FLOP and ${formatCount(row.bytes)}B accessed per call, from XLA's cost ` +
      `analysis of the compiled function; time: median of ${row.timed_calls} call${row.timed_calls === 1 ? "" : "s"} ` +
      `(${formatMs(row.median_ms)}), each timed until its result was ready, calls that compiled left out.`);
  }
  if (peak) {
    parts.push(`Roofs: ${formatRate(peak.flops_per_s, "FLOP/s")} and ${formatRate(peak.bytes_per_s, "B/s")}, ` +
      `measured by the worker${peak.measured_at ? ` on ${peak.measured_at.slice(0, 10)}` : ""}: ${peak.how ?? ""}.`);
  }
  return parts.join(" ");
}

/** Inspect's line for the selected compilation; `onMore` opens the chart. */
export function rooflineVerdict(row: RooflineRow, onMore: () => void): HTMLElement {
  return el(
    "div",
    { class: "roofline-verdict", "data-testid": "roofline-verdict", "data-bound": row.bound ?? "" },
    el("span", { class: "roofline-verdict-title" }, "Roofline "),
    verdictText(row),
    " ",
    el("button", { type: "button", class: "inspect-link roofline-more", onclick: onMore }, "chart"),
  );
}

function svg<K extends keyof SVGElementTagNameMap>(tag: K, attrs: Record<string, string | number>,
                                                  ...children: (SVGElement | string)[]): SVGElementTagNameMap[K] {
  const node = document.createElementNS(SVG_NS, tag);
  for (const [key, value] of Object.entries(attrs)) node.setAttribute(key, String(value));
  for (const child of children) node.append(child);
  return node;
}

function decades(low: number, high: number): [number, number] {
  return [Math.floor(Math.log10(low)), Math.ceil(Math.log10(high))];
}

/** The chart and its table, for the Performance tab. `onSelect` is told a compilation's key. */
export function rooflineChart(event: RooflineEvent, onSelect: (key: string) => void,
                              onLine: (line: number) => void): HTMLElement {
  const rows = event.functions;
  const peak = event.peak;
  const plotted = rows.filter((r) => r.intensity !== null && r.intensity > 0 && (r.achieved_flops_per_s ?? 0) > 0);
  const parts: Element[] = [];
  if (peak) {
    parts.push(el("div", { class: "roofline-peak", "data-testid": "roofline-peak" },
      el("b", {}, `Device roofs: ${formatRate(peak.flops_per_s, "FLOP/s")} and ${formatRate(peak.bytes_per_s, "B/s")}`),
      ` (ridge at ${(peak.flops_per_s / peak.bytes_per_s).toPrecision(3)} FLOP/byte). `,
      el("span", { class: "roofline-how" }, `Measured by the worker: ${peak.how ?? "a matmul and a copy"}.`)));
  } else {
    parts.push(el("div", { class: "inspect-notice" },
      "This worker has not measured its device's peak, so the functions are shown without roofs."));
  }
  if (plotted.length) parts.push(el("div", { class: "roofline-chart-wrap" }, chart(plotted, peak, onSelect)));
  parts.push(table(rows, onSelect, onLine));
  if (event.left_out) parts.push(el("div", { class: "inspect-note" }, `${event.left_out} more compilations not listed.`));
  return el("section", { class: "roofline", "data-testid": "roofline" }, ...parts);
}

function chart(rows: RooflineRow[], peak: DevicePeak | null, onSelect: (key: string) => void): SVGSVGElement {
  const intensities = rows.map((r) => r.intensity as number);
  const achieved = rows.map((r) => r.achieved_flops_per_s as number);
  const ridge = peak ? peak.flops_per_s / peak.bytes_per_s : Math.max(...intensities);
  const [x0, x1] = decades(Math.min(...intensities, ridge) / 3, Math.max(...intensities, ridge) * 3);
  const [y0, y1] = decades(Math.min(...achieved) / 3, Math.max(...achieved, peak?.flops_per_s ?? 0) * 2);
  const plotW = WIDTH - MARGIN.left - MARGIN.right;
  const plotH = HEIGHT - MARGIN.top - MARGIN.bottom;
  const x = (v: number) => MARGIN.left + ((Math.log10(v) - x0) / (x1 - x0)) * plotW;
  const y = (v: number) => MARGIN.top + (1 - (Math.log10(v) - y0) / (y1 - y0)) * plotH;
  const root = svg("svg", { class: "roofline-chart", viewBox: `0 0 ${WIDTH} ${HEIGHT}`, role: "img",
                            "aria-label": "Roofline chart", "data-testid": "roofline-chart" });
  root.append(svg("rect", { x: MARGIN.left, y: MARGIN.top, width: plotW, height: plotH, class: "roofline-frame" }));
  for (let d = x0; d <= x1; d++) {
    root.append(svg("line", { x1: x(10 ** d), x2: x(10 ** d), y1: MARGIN.top, y2: MARGIN.top + plotH, class: "roofline-grid" }));
    root.append(svg("text", { x: x(10 ** d), y: HEIGHT - 26, class: "roofline-tick", "text-anchor": "middle" },
      d >= 0 ? String(10 ** d) : (10 ** d).toPrecision(1)));
  }
  for (let d = y0; d <= y1; d++) {
    root.append(svg("line", { x1: MARGIN.left, x2: MARGIN.left + plotW, y1: y(10 ** d), y2: y(10 ** d), class: "roofline-grid" }));
    root.append(svg("text", { x: MARGIN.left - 6, y: y(10 ** d) + 4, class: "roofline-tick", "text-anchor": "end" },
      formatRate(10 ** d, "FLOP/s")));
  }
  root.append(svg("text", { x: MARGIN.left + plotW / 2, y: HEIGHT - 6, class: "roofline-axis", "text-anchor": "middle" },
    "arithmetic intensity (FLOP per byte accessed)"));
  if (peak) {
    const left = 10 ** x0;
    const right = 10 ** x1;
    const roof = (i: number) => Math.min(peak.flops_per_s, i * peak.bytes_per_s);
    const points = [left, Math.min(Math.max(ridge, left), right), right]
      .map((i) => `${x(i).toFixed(1)},${y(Math.max(roof(i), 10 ** y0)).toFixed(1)}`).join(" ");
    root.append(svg("polyline", { points, class: "roofline-roof" }));
    root.append(svg("text", { x: x(right) - 4, y: y(peak.flops_per_s) - 6, class: "roofline-label", "text-anchor": "end" },
      `peak ${formatRate(peak.flops_per_s, "FLOP/s")}`));
    root.append(svg("text", { x: x(left) + 6, y: y(Math.max(roof(left), 10 ** y0)) - 8, class: "roofline-label" },
      `${formatRate(peak.bytes_per_s, "B/s")} × intensity`));
  }
  for (const row of rows) {
    const cx = x(row.intensity as number);
    const cy = y(row.achieved_flops_per_s as number);
    const point = svg("g", { class: `roofline-point roofline-${row.bound ?? "unknown"}`, "data-key": row.key, tabindex: 0 },
      svg("title", {}, `${row.fn} #${row.compile_index}: ${verdictText(row)}`),
      svg("circle", { cx, cy, r: 5.5 }),
      svg("text", { x: cx + 8, y: cy - 6, class: "roofline-point-label" }, `${row.fn} #${row.compile_index}`));
    point.addEventListener("click", () => onSelect(row.key));
    root.append(point);
  }
  return root;
}

function table(rows: RooflineRow[], onSelect: (key: string) => void, onLine: (line: number) => void): HTMLElement {
  const head = el("tr", {}, ...["Function", "Bound", "Of the roof", "FLOP/s", "Bytes/s", "FLOP/byte", "Median", "Calls"]
    .map((label) => el("th", { scope: "col" }, label)));
  const body = el("tbody", {});
  for (const row of rows) {
    body.append(el(
      "tr",
      { "data-key": row.key, title: verdictText(row) },
      el("td", {},
        el("button", { type: "button", class: "inspect-link inspect-fn-name", title: "Show this compilation in Inspect",
                       onclick: () => onSelect(row.key) }, `${row.fn} #${row.compile_index}`),
        row.line === null ? "" : el("button", { type: "button", class: "inspect-link roofline-line",
                                                 onclick: () => onLine(row.line as number) }, ` line ${row.line}`)),
      el("td", { class: `roofline-bound roofline-${row.bound ?? "unknown"}` }, row.bound ?? "—"),
      el("td", {}, formatFraction(row.fraction_of_roof)),
      el("td", {}, formatRate(row.achieved_flops_per_s, "")),
      el("td", {}, formatRate(row.achieved_bytes_per_s, "")),
      el("td", {}, row.intensity === null ? "—" : row.intensity.toPrecision(3)),
      el("td", {}, formatMs(row.median_ms)),
      el("td", {}, String(row.timed_calls)),
    ));
  }
  return el("div", { class: "roofline-table-wrap" },
    el("table", { class: "roofline-table", "data-testid": "roofline-table" }, el("thead", {}, head), body));
}
