/**
 * One compiled function in the Sharding panel: the collectives XLA inserted
 * (with counts) and how each argument and result is laid out, as a table of
 * small grids beside the function's mesh.
 */

import { el } from "../core/dom";
import { formatBytes, formatIndex } from "./sharding_draw";
import { arrayView, type Interactions } from "./sharding_grid";
import { meshView } from "./sharding_mesh";
import { type CompiledLayout, type CompiledShardingFields, MAIN_COLLECTIVES } from "./sharding_types";

/** Worth a card: it spans several devices or communicates. */
export function isDistributed(ev: CompiledShardingFields): boolean {
  const collectives = Object.values(ev.collectives ?? {}).reduce((a, b) => a + b, 0);
  return (ev.num_devices ?? 0) > 1 || collectives > 0;
}

export function collectivesView(counts: Record<string, number>): HTMLElement {
  const names = [...MAIN_COLLECTIVES, ...Object.keys(counts).filter((n) => !MAIN_COLLECTIVES.includes(n) && counts[n] > 0)];
  const total = names.reduce((sum, name) => sum + (counts[name] ?? 0), 0);
  return el(
    "div",
    { class: "sharding-collectives", "data-testid": "sharding-collectives" },
    el("span", { class: "sharding-collectives-title" }, total ? `${total} collective${total === 1 ? "" : "s"}` : "no collectives"),
    ...names.map((name) =>
      el(
        "span",
        { class: `sharding-chip${counts[name] ? " is-on" : ""}`, "data-op": name, title: `${counts[name] ?? 0} × ${name} in the optimized HLO` },
        name,
        el("b", {}, String(counts[name] ?? 0)),
      ),
    ),
  );
}

function layoutRow(layout: CompiledLayout, interactions: Interactions): HTMLElement {
  const type = `${layout.dtype ?? "?"}[${layout.shape.join(",")}]`;
  return el(
    "tr",
    { "data-name": layout.name },
    el("td", { class: "sharding-io-name" }, layout.name, layout.donated ? el("span", { class: "sharding-tag" }, "donated") : null),
    el("td", { class: "sharding-io-type" }, type, el("div", { class: "sharding-io-bytes" }, formatBytes(layout.bytes))),
    el("td", { class: "sharding-io-spec" }, layout.spec, layout.uneven ? el("span", { class: "sharding-tag" }, "uneven") : null),
    el("td", { class: "sharding-io-grid" }, arrayView(layout, "small", interactions)),
  );
}

function ioTable(title: string, layouts: CompiledLayout[], omitted: number | undefined, interactions: Interactions): HTMLElement | null {
  if (!layouts.length) return null;
  return el(
    "div",
    { class: "sharding-io" },
    el("div", { class: "sharding-io-title" }, title),
    el("table", { class: "sharding-io-table" }, el("tbody", {}, ...layouts.map((l) => layoutRow(l, interactions)))),
    omitted ? el("div", { class: "sharding-note" }, `${omitted} more not shown.`) : null,
  );
}

/** What a device holds of every argument and result: the mesh tooltip of a function. */
function deviceSummary(layouts: CompiledLayout[], device: number): (string | Node)[] {
  const lines: (string | Node)[] = [el("strong", {}, `device ${device}`)];
  for (const layout of layouts.slice(0, 8)) {
    const shard = layout.shards.find((s) => s.device === device);
    lines.push(shard ? `${layout.name} ${formatIndex(shard.index)} · ${formatBytes(shard.bytes)}` : `${layout.name}: not on this device`);
  }
  if (layouts.length > 8) lines.push(`… ${layouts.length - 8} more`);
  return lines;
}

export function compiledCard(ev: CompiledShardingFields, interactions: Interactions, goToLine: (line: number) => void): HTMLElement {
  const ins = ev.in_shardings ?? [];
  const outs = ev.out_shardings ?? [];
  const all = [...ins, ...outs];
  const withMesh = all.find((l) => l.mesh && l.mesh.axis_names.length) ?? all[0];
  const line = ev.line;
  return el(
    "article",
    { class: "sharding-card sharding-fn", "data-testid": "sharding-fn", "data-fn": ev.fn ?? "" },
    el(
      "header",
      { class: "sharding-card-head" },
      el("span", { class: "sharding-kind" }, "jit"),
      el("span", { class: "sharding-name" }, ev.fn ?? "function"),
      ev.compile_index && ev.compile_index > 1 ? el("span", { class: "sharding-tag" }, `compile #${ev.compile_index}`) : null,
      line ? el("button", { class: "sharding-line", type: "button", onclick: () => goToLine(line) }, `line ${line}`) : null,
      el("span", { class: "sharding-meta" }, `${ev.num_devices ?? "?"} devices`),
    ),
    ev.signature ? el("div", { class: "sharding-signature" }, ev.signature) : null,
    collectivesView(ev.collectives ?? {}),
    el(
      "div",
      { class: "sharding-card-body" },
      el(
        "div",
        { class: "sharding-io-list" },
        ioTable("inputs", ins, ev.in_shardings_omitted, interactions),
        ioTable("outputs", outs, ev.out_shardings_omitted, interactions),
      ),
      withMesh ? meshView(withMesh, interactions, (device) => deviceSummary(all, device)) : null,
    ),
  );
}
