/**
 * The memory view's chart: bytes alive (y) over the program's schedule (x), stacked by kind (arguments at
 * the bottom, then donated arguments, outputs, temporaries), the peak marked. The steps are drawn as one
 * path per kind, so a module with thousands of positions is still four SVG elements. Pointing at the
 * chart says what is alive there and which instruction runs; a click opens that instruction's HLO.
 */

import { el } from "../core/dom";
import { formatBytes } from "../ir/inspect_format";
import { aliveAt, BUFFER_KINDS, KIND_TITLES, type MemoryView } from "./memory_types";

const SVG_NS = "http://www.w3.org/2000/svg";
const WIDTH = 1000;
const HEIGHT = 180;

function svg<K extends keyof SVGElementTagNameMap>(tag: K, attrs: Record<string, string | number>): SVGElementTagNameMap[K] {
  const node = document.createElementNS(SVG_NS, tag);
  for (const [key, value] of Object.entries(attrs)) node.setAttribute(key, String(value));
  return node;
}

/** One closed path per kind: the band between the kinds below it and its own top, step by step. */
export function stackedPaths(view: MemoryView, width = WIDTH, height = HEIGHT): string[] {
  const positions = Math.max(1, view.positions);
  const top = Math.max(1, ...view.steps.map(([, a, b, c, d]) => a + b + c + d));
  const x = (p: number) => ((p / positions) * width).toFixed(2);
  const y = (v: number) => (height - (v / top) * (height - 4)).toFixed(2);
  return BUFFER_KINDS.map((_, kind) => {
    const upper: string[] = [];
    const lower: string[] = [];
    view.steps.forEach((step, i) => {
      const from = step[0];
      const to = i + 1 < view.steps.length ? view.steps[i + 1][0] : positions;
      let below = 0;
      for (let k = 0; k < kind; k++) below += step[1 + k];
      const above = below + step[1 + kind];
      upper.push(`${x(from)},${y(above)}`, `${x(to)},${y(above)}`);
      lower.push(`${x(from)},${y(below)}`, `${x(to)},${y(below)}`);
    });
    return upper.length ? `M${upper.join("L")}L${lower.reverse().join("L")}Z` : "";
  });
}

export interface ChartHooks {
  /** A position of the schedule was clicked: show its instruction's HLO. */
  onPick(position: number): void;
  /** What the readout says about a position. */
  describe(position: number): string;
}

export function memoryChart(view: MemoryView, hooks: ChartHooks): HTMLElement {
  const positions = Math.max(1, view.positions);
  const chart = svg("svg", {
    class: "memory-chart",
    viewBox: `0 0 ${WIDTH} ${HEIGHT}`,
    preserveAspectRatio: "none",
    role: "img",
    "data-testid": "memory-chart",
  });
  chart.setAttribute("aria-label", `Bytes alive over the schedule's ${view.positions} positions; peak ${formatBytes(view.peak.bytes)} at position ${view.peak.position}`);
  stackedPaths(view).forEach((d, kind) => {
    if (d) chart.append(svg("path", { d, class: `memory-area memory-kind-${BUFFER_KINDS[kind]}` }));
  });
  const peakX = ((view.peak.position + 0.5) / positions) * WIDTH;
  chart.append(svg("line", { x1: peakX, x2: peakX, y1: 0, y2: HEIGHT, class: "memory-peak-line" }));
  const cursor = svg("line", { x1: 0, x2: 0, y1: 0, y2: HEIGHT, class: "memory-cursor", visibility: "hidden" });
  chart.append(cursor);
  const readout = el("div", { class: "memory-readout", "data-testid": "memory-readout" }, hooks.describe(view.peak.position));
  const positionAt = (e: MouseEvent): number => {
    const box = chart.getBoundingClientRect();
    return Math.min(positions - 1, Math.max(0, Math.floor(((e.clientX - box.left) / Math.max(1, box.width)) * positions)));
  };
  chart.addEventListener("mousemove", (e) => {
    const position = positionAt(e);
    const at = ((position + 0.5) / positions) * WIDTH;
    cursor.setAttribute("x1", String(at));
    cursor.setAttribute("x2", String(at));
    cursor.setAttribute("visibility", "visible");
    readout.textContent = hooks.describe(position);
  });
  chart.addEventListener("mouseleave", () => {
    cursor.setAttribute("visibility", "hidden");
    readout.textContent = hooks.describe(view.peak.position);
  });
  chart.addEventListener("click", (e) => hooks.onPick(positionAt(e)));
  const legend = el(
    "div",
    { class: "memory-legend" },
    ...BUFFER_KINDS.map((kind) => el("span", { class: "memory-key" }, el("span", { class: `memory-swatch memory-kind-${kind}` }), KIND_TITLES[kind])),
  );
  const axis = el("div", { class: "memory-axis" }, el("span", {}, "0"),
    el("span", {}, `position in the schedule (${view.positions})`), el("span", {}, String(view.positions)));
  return el("figure", { class: "memory-figure" },
    el("div", { class: "memory-scale" }, el("span", {}, formatBytes(Math.max(...view.steps.map(([, a, b, c, d]) => a + b + c + d), 0))), el("span", {}, "0")),
    el("div", { class: "memory-plot" }, chart, axis),
    el("figcaption", {}, legend, readout));
}

/** "2.0 MiB alive: arguments 1.0 MiB, temporaries 1.0 MiB". */
export function aliveText(view: MemoryView, position: number): string {
  const alive = aliveAt(view, position);
  const parts = BUFFER_KINDS.map((kind, i) => (alive[i] ? `${KIND_TITLES[kind].split(" (")[0]} ${formatBytes(alive[i])}` : null))
    .filter((p): p is string => p !== null);
  return `${formatBytes(alive.reduce((a, b) => a + b, 0))} alive${parts.length ? `: ${parts.join(", ")}` : ""}`;
}
