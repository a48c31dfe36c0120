/**
 * "What made the jaxpr big": a compilation's jaxpr equations counted per line of the user's code,
 * as a compact table in Inspect, sortable by count or by line, each line linked to the editor
 * (hover marks it, click goes there). An unrolled Python loop shows up as one line holding most
 * of the equations.
 */

import { el } from "../core/dom";
import "../passes/passes.css";
import type { EditorAccess } from "../editor/editor";
import type { EqnCountRow, EqnCounts } from "../performance/perf_types";

const SHOWN_ROWS = 8;
const HOVER_OWNER = "eqn-counts";

type SortKey = "count" | "line";

export interface EqnTableState {
  sort: SortKey;
  expanded: boolean;
}

export function eqnCountsTable(counts: EqnCounts, editor: EditorAccess, state: EqnTableState,
                               redraw: () => void): HTMLElement {
  const rows = [...counts.lines].sort(
    state.sort === "count"
      ? (a, b) => b.count - a.count || (a.line ?? Infinity) - (b.line ?? Infinity)
      : (a, b) => (a.line ?? Infinity) - (b.line ?? Infinity),
  );
  const shown = state.expanded ? rows : rows.slice(0, SHOWN_ROWS);
  const largest = Math.max(1, ...counts.lines.map((r) => r.count));
  const header = (key: SortKey, label: string, title: string): HTMLElement =>
    el(
      "th",
      { scope: "col", "aria-sort": state.sort === key ? (key === "count" ? "descending" : "ascending") : "none" },
      el(
        "button",
        {
          type: "button",
          class: "eqn-sort",
          title,
          "data-sort": key,
          onclick: () => {
            state.sort = key;
            redraw();
          },
        },
        label,
        state.sort === key ? (key === "count" ? " ▾" : " ▴") : "",
      ),
    );
  const body = el("tbody", {});
  for (const row of shown) body.append(eqnRow(row, largest, counts.total, editor));
  const table = el(
    "table",
    { class: "eqn-table", "data-testid": "eqn-table" },
    el(
      "thead",
      {},
      el(
        "tr",
        {},
        header("line", "Line", "Sort by line"),
        el("th", { scope: "col" }, "Code"),
        header("count", "Equations", "Sort by equations, most first"),
        el("th", { scope: "col", class: "eqn-prims-head" }, "Mostly"),
      ),
    ),
    body,
  );
  const biggest = counts.lines[0];
  const share = biggest && counts.total ? Math.round((100 * biggest.count) / counts.total) : 0;
  const summary =
    `${counts.total.toLocaleString()} equations` +
    (biggest && biggest.line !== null ? `; line ${biggest.line} made ${share}% of them` : "");
  const parts: HTMLElement[] = [
    el("div", { class: "eqn-head" }, el("span", { class: "eqn-title" }, "Equations per line"),
      el("span", { class: "eqn-summary", "data-testid": "eqn-summary" }, summary)),
    table,
  ];
  if (rows.length > SHOWN_ROWS) {
    parts.push(
      el(
        "button",
        {
          type: "button",
          class: "btn btn-ghost eqn-more",
          onclick: () => {
            state.expanded = !state.expanded;
            redraw();
          },
        },
        state.expanded ? "Show fewer lines" : `Show all ${rows.length} lines`,
      ),
    );
  }
  if (counts.other_lines) {
    parts.push(el("div", { class: "eqn-note" },
      `${counts.other_lines} more lines (${counts.other_count.toLocaleString()} equations) not listed.`));
  }
  return el("section", { class: "eqn-counts", "data-testid": "eqn-counts" }, ...parts);
}

function eqnRow(row: EqnCountRow, largest: number, total: number, editor: EditorAccess): HTMLElement {
  const line = row.line;
  const bar = el("span", { class: "eqn-bar" });
  bar.style.width = `${Math.max(2, (100 * row.count) / largest)}%`;
  const tr = el(
    "tr",
    { class: line === null ? "eqn-row eqn-row-nowhere" : "eqn-row", "data-line": line === null ? null : String(line) },
    el(
      "td",
      { class: "eqn-line" },
      line === null
        ? "—"
        : el("button", { type: "button", class: "inspect-link", title: `Go to line ${line}`,
                         onclick: () => editor.goToLine(line) }, String(line)),
    ),
    el("td", { class: "eqn-source", title: row.source || "" },
      line === null ? el("i", {}, "not from a line of your code") : row.source),
    el("td", { class: "eqn-count", title: `${((100 * row.count) / Math.max(1, total)).toFixed(1)}% of all` },
      el("span", { class: "eqn-count-text" }, row.count.toLocaleString()), bar),
    el("td", { class: "eqn-prims" }, row.primitives.map(([name, n]) => `${name} ×${n}`).join(", ")),
  );
  if (line !== null) {
    tr.addEventListener("mouseenter", () => editor.setLineMarks(HOVER_OWNER, [{ line, kind: "hover" }], { clearOnEdit: true }));
    tr.addEventListener("mouseleave", () => editor.clearLineMarks(HOVER_OWNER));
  }
  return tr;
}
