/**
 * The Sharding tab: how the run's arrays lie on the devices.
 *
 * `sharding` events (jax.debug.visualize_array_sharding, show_sharding) each
 * become a card: the array as a grid of blocks coloured by device, its mesh
 * beside it. `compiled` events that span several devices or communicate
 * become function cards: collectives with counts, and a small grid per
 * argument and result. Hovering a block or a device highlights that device's
 * blocks everywhere in the tab and shows a tooltip; the legend lists every
 * device seen, with its colour and pattern.
 */

import { el } from "../core/dom";
import type { ServerEvent } from "../wire/protocol";
import type { PanelFactory } from "../panel/types";
import { compiledCard, isDistributed } from "./sharding_compiled";
import { formatBytes, patternDefs, replicaSwatch, swatch } from "./sharding_draw";
import { arrayView, type Hover, type Interactions, isEmptyShard } from "./sharding_grid";
import { meshView } from "./sharding_mesh";
import type { ArrayLayout, CompiledShardingFields, ShardingEvent } from "./sharding_types";
import "./sharding.css";

const TOOLTIP_OFFSET_PX = 8;

function blockSummary(layout: ArrayLayout): string {
  const held = layout.shards.filter((s) => !isEmptyShard(s));
  const blocks = new Set(held.map((s) => JSON.stringify(s.index))).size;
  const copies = Math.max(1, ...held.map((s) => s.replica + 1));
  const devices = new Set(layout.shards.map((s) => s.device)).size;
  const each = held.length ? formatBytes(Math.max(...held.map((s) => s.bytes ?? 0))) : "0 B";
  if (layout.local_block) {
    if (!layout.varying_axes) return `inside shard_map: a ${each} block on each of ${devices} devices`;
    const distinct = devices / copies;
    return `inside shard_map: a ${each} block on each of ${devices} devices, ${distinct} distinct${copies > 1 ? `, each on ${copies} devices` : ""}`;
  }
  if (blocks === 1 && copies > 1) return `fully replicated: the whole array on each of ${devices} devices (${each} each)`;
  if (blocks === 1) return `the whole array on one device (${each})`;
  const replication = copies > 1 ? `, each on ${copies} devices` : "";
  return `${blocks} blocks${replication} · up to ${each} per device · ${devices} devices`;
}

function sourceTitle(ev: ShardingEvent): string {
  if (ev.source.name) return ev.source.name;
  if (ev.source.kind === "visualize") return "visualize_array_sharding";
  return "array";
}

export const shardingPanel: PanelFactory = (ctx) => {
  const tooltip = el("div", { class: "sharding-tooltip", role: "tooltip", hidden: true, "data-testid": "sharding-tooltip" });
  const legendChips = el("div", { class: "sharding-legend-chips" });
  const legend = el(
    "div",
    { class: "sharding-legend", "data-testid": "sharding-legend", hidden: true },
    el("span", { class: "sharding-legend-title" }, "Devices"),
    legendChips,
    el(
      "span",
      { class: "sharding-legend-key", title: "A block held by several devices: each holds the same data (replica ids 0, 1, ...)" },
      replicaSwatch(),
      "bands: one block on several devices (copies)",
    ),
  );
  const arrays = el("div", { class: "sharding-list", "data-testid": "sharding-arrays" });
  const functions = el("div", { class: "sharding-list", "data-testid": "sharding-functions" });
  const arraysTitle = el("h3", { class: "sharding-section", hidden: true }, "Arrays");
  const functionsTitle = el("h3", { class: "sharding-section", hidden: true }, "Compiled functions");
  const hint = el("div", { class: "sharding-empty" });
  const scroller = el("div", { class: "sharding-scroll" }, legend, hint, arraysTitle, arrays, functionsTitle, functions);
  const element = el("div", { class: "sharding", "data-testid": "sharding-panel" }, patternDefs(), scroller, tooltip);

  const seenDevices = new Set<number>();
  let deviceKind = "device";
  let arrayCount = 0;
  let functionCount = 0;
  let singleDeviceFunctions = 0;

  function showHint(done: boolean): void {
    hint.hidden = arrayCount + functionCount > 0;
    if (hint.hidden) return;
    hint.replaceChildren(
      el("p", {}, done ? "This run showed no sharded arrays." : "Sharding views appear here while the program runs."),
      el(
        "p",
        {},
        "Call ",
        el("code", {}, "jax.debug.visualize_array_sharding(x)"),
        " or ",
        el("code", {}, "show_sharding(x, name=\"x\")"),
        " (",
        el("code", {}, "from playground import show_sharding"),
        "); jitted functions that run on several devices list their shardings and collectives.",
      ),
    );
    if (singleDeviceFunctions) {
      hint.append(el("p", { class: "sharding-note" }, `${singleDeviceFunctions} compiled function(s) ran on a single device.`));
    }
  }

  const interactions: Interactions = {
    hover(hover: Hover | null, anchor: Element | null): void {
      highlight(hover?.devices ?? null);
      if (!hover || !anchor) {
        tooltip.hidden = true;
        return;
      }
      tooltip.replaceChildren(...hover.lines.map((line) => el("div", {}, line)));
      tooltip.hidden = false;
      const box = anchor.getBoundingClientRect();
      const tip = tooltip.getBoundingClientRect();
      let left = box.right + TOOLTIP_OFFSET_PX;
      if (left + tip.width > window.innerWidth - 4) left = Math.max(4, box.left - tip.width - TOOLTIP_OFFSET_PX);
      const top = Math.min(Math.max(4, box.top), window.innerHeight - tip.height - 4);
      tooltip.style.left = `${left}px`;
      tooltip.style.top = `${top}px`;
    },
  };

  function highlight(devices: number[] | null): void {
    element.classList.toggle("is-highlighting", devices !== null);
    const wanted = new Set(devices ?? []);
    for (const node of element.querySelectorAll<Element>("[data-devices]")) {
      const mine = (node.getAttribute("data-devices") ?? "").split(" ").map(Number);
      node.classList.toggle("is-hl", devices !== null && mine.some((d) => wanted.has(d)));
    }
  }

  function addDevices(layout: ArrayLayout): void {
    if (layout.device_kind || layout.platform) deviceKind = (layout.device_kind ?? layout.platform ?? "device").toUpperCase();
    const ids = [...layout.devices, ...(layout.mesh?.device_ids ?? [])];
    let added = false;
    for (const id of ids) {
      if (!seenDevices.has(id)) {
        seenDevices.add(id);
        added = true;
      }
    }
    if (!added) return;
    legend.hidden = false;
    legendChips.replaceChildren(
      ...[...seenDevices].sort((a, b) => a - b).map((device) => {
        const chip = el("span", { class: "sharding-legend-chip", "data-devices": String(device), tabindex: 0 }, swatch(device), String(device));
        const hover = (): void => interactions.hover({ devices: [device], lines: [`${deviceKind} ${device}`] }, chip);
        chip.addEventListener("mouseenter", hover);
        chip.addEventListener("focus", hover);
        chip.addEventListener("mouseleave", () => interactions.hover(null, null));
        chip.addEventListener("blur", () => interactions.hover(null, null));
        return chip;
      }),
    );
  }

  function markLine(card: HTMLElement, line: number | null | undefined): void {
    if (!line) return;
    card.addEventListener("mouseenter", () => ctx.editor.setLineMarks("sharding", [{ line, kind: "hover" }]));
    card.addEventListener("mouseleave", () => ctx.editor.clearLineMarks("sharding"));
  }

  function tags(ev: ShardingEvent): HTMLElement[] {
    const out: HTMLElement[] = [];
    if (ev.source.traced) out.push(el("span", { class: "sharding-tag", title: "reported when the function was compiled" }, "traced"));
    if (ev.local_block) out.push(el("span", { class: "sharding-tag" }, `shard_map block · manual ${ev.manual_axes?.join(", ")}`));
    if (ev.uneven) out.push(el("span", { class: "sharding-tag is-warn" }, "uneven"));
    if (ev.sharding_type !== "NamedSharding" && !ev.local_block) out.push(el("span", { class: "sharding-tag" }, ev.sharding_type));
    return out;
  }

  function addArray(ev: ShardingEvent): void {
    addDevices(ev);
    arrayCount += 1;
    const line = ev.source.line;
    const type = ev.typeof ?? `${ev.dtype ?? "?"}[${ev.shape.join(",")}]`;
    const card = el(
      "article",
      { class: "sharding-card", "data-testid": "sharding-array", "data-name": ev.source.name ?? "" },
      el(
        "header",
        { class: "sharding-card-head" },
        el("span", { class: "sharding-kind" }, ev.source.kind === "visualize" ? "visualize" : "show"),
        el("span", { class: "sharding-name" }, sourceTitle(ev)),
        line
          ? el("button", { class: "sharding-line", type: "button", onclick: () => ctx.editor.goToLine(line) }, ev.source.fn ? `${ev.source.fn}, line ${line}` : `line ${line}`)
          : null,
        ...tags(ev),
        el("span", { class: "sharding-meta" }, formatBytes(ev.bytes)),
      ),
      el(
        "div",
        { class: "sharding-typeline" },
        el("code", {}, type),
        " ",
        // Inside shard_map there is no global spec: the block is the device's own.
        ev.local_block ? null : el("code", { class: "sharding-spec" }, ev.spec),
      ),
      el("div", { class: "sharding-card-body" }, arrayView(ev, "full", interactions), meshView(ev, interactions)),
      el("div", { class: "sharding-summary" }, blockSummary(ev)),
    );
    markLine(card, line);
    arraysTitle.hidden = false;
    arrays.append(card);
    updateBadge();
  }

  function addFunction(ev: CompiledShardingFields): void {
    if (!ev.in_shardings && !ev.collectives) return; // a compiled event without our fields
    if (!isDistributed(ev)) {
      singleDeviceFunctions += 1;
      return;
    }
    for (const layout of [...(ev.in_shardings ?? []), ...(ev.out_shardings ?? [])]) addDevices(layout);
    functionCount += 1;
    const card = compiledCard(ev, interactions, (line) => ctx.editor.goToLine(line));
    markLine(card, ev.line);
    functionsTitle.hidden = false;
    functions.append(card);
    updateBadge();
  }

  function updateBadge(): void {
    hint.hidden = true;
    ctx.setBadge(arrayCount + functionCount || null);
  }

  function reset(): void {
    arrays.replaceChildren();
    functions.replaceChildren();
    legendChips.replaceChildren();
    legend.hidden = arraysTitle.hidden = functionsTitle.hidden = true;
    tooltip.hidden = true;
    seenDevices.clear();
    arrayCount = functionCount = singleDeviceFunctions = 0;
    ctx.setBadge(null);
    ctx.editor.clearLineMarks("sharding");
    showHint(false);
  }

  reset();

  return {
    id: "sharding",
    title: "Sharding",
    element,
    handles: ["sharding", "compiled"],
    onRunStart(): void {
      reset();
    },
    onEvent(ev: ServerEvent): void {
      const type = (ev as { type: string }).type;
      if (type === "sharding") addArray(ev as ShardingEvent);
      else if (type === "compiled") addFunction(ev as unknown as CompiledShardingFields);
    },
    onRunDone(): void {
      showHint(true);
    },
  };
};
