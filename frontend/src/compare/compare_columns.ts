/**
 * A comparison's columns: one run per JAX version (or per flag set), what
 * each run said (`VersionRun`), and what is drawn from them side by side:
 * each run's output, with the lines that differ from the first run's marked;
 * one table of status, run time, cost, memory and compile times; and the note
 * that says which runs the result cache answered, whose times were measured
 * when they were recorded, not now.
 */

import { el, formatDuration } from "../core/dom";
import { flagsSummary } from "../flags/flags_editor";
import { formatBytes, formatCount, formatMs } from "../ir/inspect_format";
import type { CompiledEvent } from "../ir/inspect_types";
import type { RunFlags, RuntimeInfo } from "../wire/protocol";

export interface VersionRun {
  runtime: RuntimeInfo;
  /** Flags mode: this column's flag set ("A" or "B") and its flags (null: none). Versions mode: null. */
  set: string | null;
  flags: RunFlags | null;
  state: "waiting" | "sent" | "done";
  /** Cancels the run once sent. */
  cancel: (() => void) | null;
  output: string;
  error: string | null;
  status: string | null;
  elapsedMs: number | null;
  jax: string | null;
  compiled: Map<string, CompiledEvent>;
  /** When the result cache answered: the recorded run's end (ISO 8601); null for a run made now. */
  cachedAt: string | null;
}

/** "f #2" for the second compilation of f: how compilations are matched across versions. */
export function functionKey(ev: CompiledEvent): string {
  return `${ev.fn} #${ev.compile_index}`;
}

/** "1 line differs", "3 lines differ", or "same output". */
export function differenceCount(lines: number): string {
  if (!lines) return "same output";
  return lines === 1 ? "1 line differs" : `${lines} lines differ`;
}

/** "14:02:09" (today) or "12 Nov, 14:02" for when a cached run was recorded. */
export function recordedWhen(iso: string, now: Date = new Date()): string {
  const at = new Date(iso);
  if (Number.isNaN(at.getTime())) return "earlier";
  const sameDay = at.toDateString() === now.toDateString();
  return sameDay
    ? at.toLocaleTimeString(undefined, { hour: "2-digit", minute: "2-digit", second: "2-digit" })
    : at.toLocaleString(undefined, { day: "numeric", month: "short", hour: "2-digit", minute: "2-digit" });
}

/** Marks per line: true where the line differs from the same line of `reference`. */
export function differingLines(reference: string, other: string): boolean[] {
  const a = reference.split("\n");
  return other.split("\n").map((line, i) => line !== a[i]);
}

/** A column's heading: its JAX version, or its flag set and what it sets. */
export function label(r: VersionRun): string {
  const jax = `JAX ${r.jax ?? r.runtime.jax_version}`;
  if (r.set === null) return r.flags ? `${jax} · ${flagsSummary(r.flags)}` : jax;  // the Flags tab's, on each version
  return `${r.set}: ${flagsSummary(r.flags) || "no flags"} (${jax})`;
}

/** Says which versions' times were replayed from the result cache, with the way to measure them now. */
export function drawReplayed(replayed: HTMLElement, runs: readonly VersionRun[], compareFresh: () => void): void {
  const cached = runs.filter((r) => r.cachedAt !== null);
  replayed.hidden = !cached.length;
  if (!cached.length) {
    replayed.replaceChildren();
    return;
  }
  const which = cached.map((r) => `${label(r)} (recorded ${recordedWhen(r.cachedAt ?? "")})`);
  replayed.replaceChildren(
    el("span", {},
      `Replayed from the result cache: ${which.join(", ")}. Their times, marked “cached”, were measured ` +
      "when that run was recorded; nothing ran now. "),
    el("button", { class: "btn btn-ghost", type: "button", "data-testid": "compare-fresh",
                   title: "Run every version again, past the result cache, and measure now",
                   onclick: compareFresh }, "Compare fresh"),
  );
}

export function drawSummary(summary: HTMLElement, runs: readonly VersionRun[]): void {
  if (!runs.length) {
    summary.replaceChildren();
    return;
  }
  const keys = [...new Set(runs.flatMap((r) => [...r.compiled.keys()]))];
  const header = el("tr", {}, el("th", {}, ""), ...runs.map((r) => el("th", {}, label(r))));
  const row = (label: string, cell: (r: VersionRun) => string, timing = false) =>
    el("tr", {}, el("th", { scope: "row" }, label), ...runs.map((r) => timedCell(cell(r), timing && r.cachedAt !== null)));
  const rows = [
    row("status", (r) => (r.status ? `${r.status}${r.cachedAt !== null ? " · cached" : ""}` : r.state === "sent" ? "running…" : "waiting")),
    row("run time", (r) => (r.elapsedMs === null ? "" : formatDuration(r.elapsedMs)), true),
  ];
  for (const key of keys) {
    const pick = (r: VersionRun) => r.compiled.get(key);
    rows.push(row(`${key}: flops`, (r) => formatCount(num(pick(r)?.cost?.flops))));
    rows.push(row(`${key}: bytes accessed`, (r) => formatBytes(num(pick(r)?.cost?.["bytes accessed"]))));
    rows.push(row(`${key}: temp memory`, (r) => formatBytes(pick(r)?.memory?.temp_size_in_bytes)));
    rows.push(row(`${key}: compile`, (r) => formatMs(pick(r)?.phases_ms?.compile), true));
    rows.push(row(`${key}: trace + lower`, (r) => {
      const p = pick(r)?.phases_ms;
      return p ? formatMs((p.trace ?? 0) + (p.lower ?? 0)) : "";
    }, true));
  }
  summary.replaceChildren(el("table", { class: "compare-table", "data-testid": "compare-table" }, header, ...rows));
}

export function drawOutputs(outputs: HTMLElement, runs: readonly VersionRun[]): void {
  const reference = runs[0];
  outputs.replaceChildren(
    ...runs.map((run, index) => {
      const text = outputText(run);
      const marks = index === 0 || !reference ? [] : differingLines(outputText(reference), text);
      const lines = text.replace(/\n$/, "").split("\n").map((line, i) =>
        el("div", { class: `compare-line${marks[i] ? " compare-differs" : ""}`, "data-testid": marks[i] ? "compare-diff-line" : null }, line || " "));
      const differs = marks.filter(Boolean).length;
      return el(
        "section",
        { class: "compare-column", "data-testid": "compare-column", "data-runtime": run.runtime.name,
          "data-set": run.set },
        el("h4", {}, label(run),
          index > 0 && run.state === "done" ? el("span", { class: "compare-count" }, ` · ${differenceCount(differs)}`) : null),
        el("pre", { class: "compare-output" }, ...lines),
      );
    }),
  );
}

/** What a run printed, then its error. */
function outputText(run: VersionRun): string {
  return run.output + (run.error ? `${run.output && !run.output.endsWith("\n") ? "\n" : ""}${run.error}` : "");
}

/** A table cell; a time the result cache replayed says so. */
function timedCell(text: string, cached: boolean): HTMLElement {
  if (!cached || !text || text === "—") return el("td", {}, text);
  return el("td", { class: "compare-cached", "data-testid": "compare-cached-time",
                    title: "Replayed from the result cache: measured when the run was recorded, not now" },
    text, el("span", { class: "compare-cached-tag" }, " cached"));
}

function num(value: unknown): number | null {
  return typeof value === "number" ? value : null;
}
