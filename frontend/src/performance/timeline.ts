/**
 * A profile's timeline: one row of tracks per thread (the program's Python first, then XLA's
 * execution threads, the compiler, and on a GPU each device stream), slices stacked by nesting and
 * coloured by kind (your Python, dispatch, compile, XLA op or kernel, transfer). Drawn on a canvas
 * (tens of thousands of slices); drag to pan, Ctrl+wheel or the buttons to zoom. Pointing at a
 * slice names it; clicking one shows what it links to (its jitted function in Inspect, its source
 * line in the editor). Below: the slices totalled by name, and the raw trace for Perfetto.
 */

import { el } from "../core/dom";
import { formatMs } from "../ir/inspect_format";
import type { ProfileEvent, TimelineSlice } from "./perf_types";

const ROW_PX = 16;
const MAX_DEPTH_SHOWN = 14;
const KIND_COLOURS: Record<string, string> = {
  python: "#8b5cf6", dispatch: "#3b82f6", compile: "#d97706", op: "#16a34a", transfer: "#db2777",
};
const KIND_HELP: Record<string, string> = {
  python: "your Python functions", dispatch: "JAX and XLA's host work: dispatch, arguments, launches",
  compile: "tracing, lowering, XLA compiling", op: "XLA operations (on a GPU: kernels)",
  transfer: "copies between host and devices",
};
const SUMMARY_ROWS = 15;

export interface TimelineHooks {
  onLine(line: number): void;
  onCompiled(key: string): void;
}

interface Track {
  name: string;
  top: number;
  depth: number;
  /** Slices per depth, sorted by start. */
  rows: TimelineSlice[][];
}

export function timelineBlock(ev: ProfileEvent, hooks: TimelineHooks): HTMLElement {
  const header = el(
    "div",
    { class: "timeline-head" },
    el("span", { class: "timeline-label" }, ev.label),
    ev.line !== null
      ? el("button", { type: "button", class: "inspect-link", onclick: () => hooks.onLine(ev.line as number) },
        `line ${ev.line}`)
      : null,
    ev.duration_us !== undefined ? el("span", { class: "timeline-dim" }, formatMs(ev.duration_us / 1000)) : null,
    ev.slices ? el("span", { class: "timeline-dim" }, `${ev.slices.length.toLocaleString()} slices`) : null,
    el("span", { class: "topbar-spacer" }),
    downloadButton(ev),
  );
  const notices = ev.notices.map((text) => el("div", { class: "inspect-notice", "data-testid": "timeline-notice" }, text));
  if (!ev.slices || !ev.slices.length) {
    return el("section", { class: "timeline", "data-testid": "timeline" }, header, ...notices,
      el("div", { class: "inspect-empty" }, "Nothing was recorded."));
  }
  const view = new TimelineView(ev, hooks);
  return el("section", { class: "timeline", "data-testid": "timeline" }, header, ...notices, legend(), view.element,
    summary(ev, hooks));
}

function legend(): HTMLElement {
  return el("div", { class: "timeline-legend" }, ...Object.entries(KIND_COLOURS).map(([kind, colour]) => {
    const swatch = el("span", { class: "timeline-swatch" });
    swatch.style.background = colour;
    return el("span", { class: "timeline-key", title: KIND_HELP[kind] }, swatch, kind);
  }));
}

function downloadButton(ev: ProfileEvent): HTMLElement | null {
  const trace = ev.trace;
  if (!trace) return null;
  return el("button", {
    type: "button", class: "btn btn-ghost", "data-testid": "timeline-download",
    title: "The profiler's trace (Chrome trace JSON, gzip): open it at ui.perfetto.dev" +
      (trace.filtered ? " — the slices shown, the full trace was over the size limit" : ""),
    onclick: () => void perfettoTrace(trace.data).then((blob) => {
      const url = URL.createObjectURL(blob);
      const link = el("a", { href: url, download: `${ev.label.replace(/[^\w.-]+/g, "_") || "profile"}.trace.json.gz` });
      document.body.append(link);
      link.click();
      link.remove();
      window.setTimeout(() => URL.revokeObjectURL(url), 10_000);
    }),
  }, `Download trace (${(trace.bytes / 1024).toFixed(0)} KiB)`);
}

/** The profiler's gzipped Chrome trace without its "metadata" field, which Perfetto refuses. */
async function perfettoTrace(base64: string): Promise<Blob> {
  const bytes = Uint8Array.from(atob(base64), (c) => c.charCodeAt(0));
  const text = await new Response(new Blob([bytes]).stream().pipeThrough(new DecompressionStream("gzip"))).text();
  const trace = JSON.parse(text) as Record<string, unknown>;
  delete trace.metadata;
  const stream = new Blob([JSON.stringify(trace)]).stream().pipeThrough(new CompressionStream("gzip"));
  return new Blob([await new Response(stream).arrayBuffer()], { type: "application/gzip" });
}

function summary(ev: ProfileEvent, hooks: TimelineHooks): HTMLElement {
  const rows = (ev.summary ?? []).slice(0, SUMMARY_ROWS);
  const body = el("tbody", {});
  for (const row of rows) {
    const link = row.link >= 0 ? ev.links?.[row.link] : undefined;
    const swatch = el("span", { class: "timeline-swatch" });
    swatch.style.background = KIND_COLOURS[row.kind] ?? "#888";
    body.append(el(
      "tr", {},
      el("td", { class: "timeline-name", title: row.name }, swatch, row.name),
      el("td", {}, row.count.toLocaleString()),
      el("td", {}, formatMs(row.total_us / 1000)),
      el("td", {}, ...linkButtons(link, hooks)),
    ));
  }
  return el("details", { class: "timeline-summary", open: true },
    el("summary", {}, "Where the time went (slices totalled by name)"),
    el("table", { class: "timeline-table", "data-testid": "timeline-summary" },
      el("thead", {}, el("tr", {}, ...["Slice", "Count", "Total", "Links to"].map((h) => el("th", { scope: "col" }, h)))),
      body));
}

function linkButtons(link: [string | null, number | null, string | null, number | null] | undefined,
                     hooks: TimelineHooks): HTMLElement[] {
  if (!link) return [];
  const [fn, , key, line] = link;
  const buttons: HTMLElement[] = [];
  if (fn) {
    buttons.push(key
      ? el("button", { type: "button", class: "inspect-link inspect-fn-name", title: "Show this compilation in Inspect",
                       onclick: () => hooks.onCompiled(key) }, fn)
      : el("span", { class: "inspect-fn-name" }, fn));
  }
  if (line !== null) {
    buttons.push(el("button", { type: "button", class: "inspect-link timeline-line", title: `Go to line ${line}`,
                                onclick: () => hooks.onLine(line) }, ` line ${line}`));
  }
  return buttons;
}

class TimelineView {
  readonly element: HTMLElement;
  private readonly canvas = el("canvas", { class: "timeline-canvas", "data-testid": "timeline-canvas" });
  private readonly names = el("div", { class: "timeline-tracks" });
  private readonly tooltip = el("div", { class: "timeline-tooltip", hidden: true });
  private readonly details = el("div", { class: "timeline-details", "data-testid": "timeline-details" },
    "Point at a slice to name it; click it for its function and line.");
  private readonly tracks: Track[] = [];
  private readonly height: number;
  private start = 0;
  private span: number;
  private drag: { x: number; start: number } | null = null;

  constructor(private readonly ev: ProfileEvent, private readonly hooks: TimelineHooks) {
    const slices = ev.slices ?? [];
    this.span = Math.max(1, ev.duration_us ?? 1);
    let top = 0;
    (ev.tracks ?? []).forEach((info, index) => {
      const own = slices.filter((s) => s[0] === index && s[1] < MAX_DEPTH_SHOWN);
      if (!own.length) return;
      const depth = Math.max(...own.map((s) => s[1])) + 1;
      const rows: TimelineSlice[][] = Array.from({ length: depth }, () => []);
      for (const slice of own) rows[slice[1]].push(slice);
      for (const row of rows) row.sort((a, b) => a[2] - b[2]);
      this.tracks.push({ name: info.name, top, depth, rows });
      const label = el("div", { class: "timeline-track-name", title: `${info.name} (${info.process})` }, info.name);
      label.style.height = `${depth * ROW_PX}px`;
      this.names.append(label);
      top += depth * ROW_PX + 4;
    });
    this.height = Math.max(top, ROW_PX);
    this.canvas.style.height = `${this.height}px`;
    const zoom = (factor: number) => () => this.zoom(factor, 0.5);
    const controls = el("div", { class: "timeline-controls" },
      el("button", { type: "button", class: "btn btn-ghost", title: "Zoom in", onclick: zoom(0.5) }, "+"),
      el("button", { type: "button", class: "btn btn-ghost", title: "Zoom out", onclick: zoom(2) }, "−"),
      el("button", { type: "button", class: "btn btn-ghost", title: "The whole profile",
                     onclick: () => this.reset() }, "Fit"),
      el("span", { class: "timeline-dim" }, "drag to pan, Ctrl+wheel to zoom"));
    const stage = el("div", { class: "timeline-stage" }, this.canvas, this.tooltip);
    this.element = el("div", { class: "timeline-view" }, controls,
      el("div", { class: "timeline-body" }, this.names, stage), this.details);
    this.canvas.addEventListener("mousemove", (e) => this.onMove(e));
    this.canvas.addEventListener("mouseleave", () => {
      this.tooltip.hidden = true;
      this.drag = null;
    });
    this.canvas.addEventListener("mousedown", (e) => (this.drag = { x: e.clientX, start: this.start }));
    this.canvas.addEventListener("mouseup", (e) => {
      const moved = this.drag && Math.abs(e.clientX - this.drag.x) > 3;
      this.drag = null;
      if (!moved) this.onClick(e);
    });
    this.canvas.addEventListener("wheel", (e) => {
      if (!e.ctrlKey && !e.metaKey) return;
      e.preventDefault();
      const rect = this.canvas.getBoundingClientRect();
      this.zoom(e.deltaY > 0 ? 1.25 : 0.8, (e.clientX - rect.left) / rect.width);
    }, { passive: false });
    new ResizeObserver(() => this.draw()).observe(this.canvas);
  }

  private reset(): void {
    this.start = 0;
    this.span = Math.max(1, this.ev.duration_us ?? 1);
    this.draw();
  }

  private zoom(factor: number, at: number): void {
    const total = Math.max(1, this.ev.duration_us ?? 1);
    const pivot = this.start + at * this.span;
    this.span = Math.min(total, Math.max(0.5, this.span * factor));
    this.start = Math.min(Math.max(0, pivot - at * this.span), total - this.span);
    this.draw();
  }

  private draw(): void {
    const width = this.canvas.clientWidth;
    if (!width) return;
    const ratio = window.devicePixelRatio || 1;
    this.canvas.width = Math.round(width * ratio);
    this.canvas.height = Math.round(this.height * ratio);
    const context = this.canvas.getContext("2d");
    if (!context) return;
    context.scale(ratio, ratio);
    context.clearRect(0, 0, width, this.height);
    context.font = "11px system-ui, sans-serif";
    context.textBaseline = "middle";
    const names = this.ev.names ?? [];
    const kinds = this.ev.kinds ?? [];
    const scale = width / this.span;
    for (const track of this.tracks) {
      track.rows.forEach((row, depth) => {
        const y = track.top + depth * ROW_PX;
        for (const slice of row) {
          const x = (slice[2] - this.start) * scale;
          const w = Math.max(1, slice[3] * scale);
          if (x > width || x + w < 0) continue;
          context.fillStyle = KIND_COLOURS[kinds[slice[5]]] ?? "#888";
          context.fillRect(x, y + 1, w, ROW_PX - 2);
          if (w > 40) {
            context.save();
            context.beginPath();
            context.rect(Math.max(x, 0), y, Math.min(w, width), ROW_PX);
            context.clip();
            context.fillStyle = "#ffffff";
            context.fillText(names[slice[4]] ?? "", Math.max(x, 0) + 3, y + ROW_PX / 2);
            context.restore();
          }
        }
      });
    }
  }

  private sliceAt(e: MouseEvent): TimelineSlice | null {
    const rect = this.canvas.getBoundingClientRect();
    const px = e.clientX - rect.left;
    const py = e.clientY - rect.top;
    const time = this.start + (px / rect.width) * this.span;
    const slop = (2 / rect.width) * this.span;
    for (const track of this.tracks) {
      if (py < track.top || py >= track.top + track.depth * ROW_PX) continue;
      const row = track.rows[Math.floor((py - track.top) / ROW_PX)] ?? [];
      let lo = 0;
      let hi = row.length - 1;
      while (lo <= hi) {  // the last slice starting at or before the pointer
        const mid = (lo + hi) >> 1;
        if (row[mid][2] <= time + slop) lo = mid + 1;
        else hi = mid - 1;
      }
      for (let i = hi; i >= 0 && i >= hi - 3; i--) {
        if (row[i][2] + row[i][3] >= time - slop) return row[i];
      }
    }
    return null;
  }

  /** "dot.1 — op, 38 µs · at 1.2 ms", and with `links` its function and line. */
  private describe(slice: TimelineSlice, links = true): string {
    const link = slice[6] >= 0 ? this.ev.links?.[slice[6]] : undefined;
    const parts = [`${this.ev.names?.[slice[4]] ?? "?"} — ${this.ev.kinds?.[slice[5]] ?? ""}, ${formatMs(slice[3] / 1000)}`,
      `at ${formatMs(slice[2] / 1000)}`];
    if (links && link?.[0]) parts.push(`in ${link[0]}`);
    if (links && link?.[3] !== null && link?.[3] !== undefined) parts.push(`line ${link[3]}`);
    return parts.join(" · ");
  }

  private onMove(e: MouseEvent): void {
    if (this.drag) {
      const total = Math.max(1, this.ev.duration_us ?? 1);
      const shift = ((this.drag.x - e.clientX) / this.canvas.clientWidth) * this.span;
      this.start = Math.min(Math.max(0, this.drag.start + shift), total - this.span);
      this.draw();
      return;
    }
    const slice = this.sliceAt(e);
    this.tooltip.hidden = slice === null;
    if (!slice) return;
    this.tooltip.textContent = this.describe(slice);
    const rect = this.canvas.getBoundingClientRect();
    this.tooltip.style.left = `${Math.min(e.clientX - rect.left + 12, rect.width - 260)}px`;
    this.tooltip.style.top = `${e.clientY - rect.top + 14}px`;
  }

  private onClick(e: MouseEvent): void {
    const slice = this.sliceAt(e);
    if (!slice) return;
    const link = slice[6] >= 0 ? this.ev.links?.[slice[6]] : undefined;
    this.details.replaceChildren(el("span", {}, this.describe(slice, false)), link ? " · " : "",
      ...linkButtons(link, this.hooks));
  }
}
