/**
 * One array drawn as a grid of blocks coloured by device.
 *
 * Two array dimensions are drawn (rows, cols); an array with more picks them
 * with two selects and, for each other dimension, which block along it to
 * show. Blocks are grouped by the region they cover in that 2-D view: a
 * region held by several devices is a replicated block, drawn as diagonal
 * bands of its devices' colours with a "×k" plate, so replication never
 * looks like a split (splits are straight edges). Zero-size shards (XLA's padding of uneven shapes) are listed, not
 * drawn.
 */

import { el } from "../core/dom";
import { blockShape, deviceRect, deviceStyle, formatBytes, formatIndex, replicaHatch, svg } from "./sharding_draw";
import type { ArrayLayout, ShardInfo } from "./sharding_types";

export interface Hover {
  /** Devices to highlight everywhere in the panel. */
  devices: number[];
  /** Tooltip lines. */
  lines: (string | Node)[];
}

export interface Interactions {
  hover(hover: Hover | null, anchor: Element | null): void;
}

export type ViewSize = "full" | "small";

interface Block {
  row: [number, number];
  col: [number, number];
  shards: ShardInfo[];
}

const SIZES = {
  full: { maxW: 360, maxH: 260, strip: 44, scalar: 56, font: 12, minLabelW: 14, minLabelH: 13 },
  small: { maxW: 132, maxH: 92, strip: 22, scalar: 28, font: 9, minLabelW: 10, minLabelH: 10 },
};
/** A dimension never shrinks below this share of the longer side, so 1024x4 stays visible. */
const MIN_SIDE_RATIO = 0.18;

export function isEmptyShard(shard: ShardInfo): boolean {
  return shard.index.some(([start, stop]) => stop <= start);
}

/** The dims worth drawing by default: the two split into the most blocks (later dims win ties). */
export function defaultDims(layout: ArrayLayout): [number, number] {
  const ndim = layout.shape.length;
  if (ndim <= 2) return [ndim === 2 ? 0 : -1, ndim >= 1 ? ndim - 1 : -1];
  const splits = layout.shape.map((_, d) => new Set(layout.shards.map((s) => s.index[d][0])).size);
  const order = splits.map((n, d) => [n, d]).sort((a, b) => b[0] - a[0] || b[1] - a[1]);
  const chosen = [order[0][1], order[1][1]].sort((a, b) => a - b);
  return [chosen[0], chosen[1]];
}

/** The distinct non-empty ranges along one dimension: the choices for a hidden dim. */
export function rangesAlong(layout: ArrayLayout, dim: number): [number, number][] {
  const seen = new Map<string, [number, number]>();
  for (const shard of layout.shards) {
    const [start, stop] = shard.index[dim];
    if (stop > start) seen.set(`${start}:${stop}`, [start, stop]);
  }
  return [...seen.values()].sort((a, b) => a[0] - b[0] || a[1] - b[1]);
}

/** Group the shards visible in the chosen 2-D slice by the region they cover. */
export function blocksInView(
  layout: ArrayLayout,
  rowDim: number,
  colDim: number,
  hidden: Map<number, [number, number]>,
): Block[] {
  const blocks = new Map<string, Block>();
  for (const shard of layout.shards) {
    if (isEmptyShard(shard)) continue;
    let visible = true;
    for (const [dim, [start, stop]] of hidden) {
      const [s, e] = shard.index[dim];
      if (!(s < stop && start < e)) visible = false;
    }
    if (!visible) continue;
    const row: [number, number] = rowDim >= 0 ? shard.index[rowDim] : [0, 1];
    const col: [number, number] = colDim >= 0 ? shard.index[colDim] : [0, 1];
    const key = `${row[0]}:${row[1]}/${col[0]}:${col[1]}`;
    const block = blocks.get(key) ?? { row, col, shards: [] };
    block.shards.push(shard);
    blocks.set(key, block);
  }
  for (const block of blocks.values()) block.shards.sort((a, b) => a.replica - b.replica || a.device - b.device);
  return [...blocks.values()];
}

export function describeBlock(layout: ArrayLayout, shards: ShardInfo[]): (string | Node)[] {
  const first = shards[0];
  const devices = shards.map((s) => s.device);
  const kind = (layout.device_kind ?? layout.platform ?? "device").toUpperCase();
  const lines: (string | Node)[] = [
    el("strong", {}, devices.length === 1 ? `${kind} ${devices[0]}` : `${kind} ${devices.join(", ")}`),
    `index ${formatIndex(first.index)} · block ${blockShape(first.index)}`,
    `${formatBytes(first.bytes)}${devices.length > 1 ? " on each device" : ""}`,
  ];
  if (layout.local_block) {
    lines.push("inside shard_map: this device's own block");
  } else if (devices.length > 1) {
    lines.push(`replicated ×${devices.length} (replica ids ${shards.map((s) => s.replica).join(", ")})`);
  }
  return lines;
}

export function describeDevice(layout: ArrayLayout, device: number): (string | Node)[] {
  const shard = layout.shards.find((s) => s.device === device);
  const kind = (layout.device_kind ?? layout.platform ?? "device").toUpperCase();
  const lines: (string | Node)[] = [el("strong", {}, `${kind} ${device}`)];
  const position = meshPosition(layout, device);
  if (position) lines.push(position);
  if (!shard) {
    lines.push("holds nothing of this array");
  } else if (isEmptyShard(shard)) {
    lines.push("holds no elements (XLA pads the uneven last blocks)");
  } else {
    lines.push(`index ${formatIndex(shard.index)} · ${formatBytes(shard.bytes)}`);
    if (shard.replica > 0) lines.push(`replica ${shard.replica} of this block`);
  }
  return lines;
}

function meshPosition(layout: ArrayLayout, device: number): string | null {
  const mesh = layout.mesh;
  if (!mesh || mesh.axis_names.length === 0) return null;
  let flat = mesh.device_ids.indexOf(device);
  if (flat < 0) return null;
  const coords: string[] = [];
  for (let axis = mesh.axis_sizes.length - 1; axis >= 0; axis--) {
    coords.unshift(`${mesh.axis_names[axis]}=${flat % mesh.axis_sizes[axis]}`);
    flat = Math.floor(flat / mesh.axis_sizes[axis]);
  }
  return `mesh position ${coords.join(", ")}`;
}

/** Fit the rows x cols array into the size's box, keeping its aspect within MIN_SIDE_RATIO. */
function geometry(rows: number, cols: number, size: ViewSize, rowDim: number, colDim: number): [number, number] {
  const s = SIZES[size];
  if (rowDim < 0 && colDim < 0) return [s.scalar, s.scalar];
  if (rowDim < 0) return [s.maxW, s.strip];
  let width = s.maxW;
  let height = (width * rows) / Math.max(cols, 1);
  if (height > s.maxH) {
    height = s.maxH;
    width = (height * cols) / Math.max(rows, 1);
  }
  width = Math.max(width, s.maxW * MIN_SIDE_RATIO);
  height = Math.max(height, s.maxH * MIN_SIDE_RATIO);
  return [Math.round(width), Math.round(height)];
}

function drawBlock(block: Block, x: number, y: number, w: number, h: number, size: ViewSize): SVGGElement {
  const s = SIZES[size];
  const devices = block.shards.map((sh) => sh.device);
  const group = svg("g", {
    class: "sharding-block",
    "data-devices": devices.join(" "),
    "data-index": formatIndex(block.shards[0].index),
    tabindex: size === "full" ? 0 : null,
    role: size === "full" ? "img" : null,
    "aria-label": `devices ${devices.join(", ")}: index ${formatIndex(block.shards[0].index)}`,
  });
  const k = devices.length;
  if (k === 1) {
    group.append(...deviceRect(devices[0], x, y, w, h));
    if (w >= s.minLabelW && h >= s.minLabelH) group.append(label(String(devices[0]), x + w / 2, y + h / 2, deviceStyle(devices[0]).ink, s.font));
  } else {
    // Copies are drawn as diagonal bands of the holders' colours: a split is
    // always a straight edge, so a replica never reads as one more block.
    const hatch = replicaHatch(devices, size === "full" ? 9 : 5);
    group.append(svg("defs", {}, hatch), svg("rect", { x, y, width: w, height: h, fill: `url(#${hatch.id})` }));
    const list = devices.length <= 8 ? `${devices.join(",")} ×${k}` : `×${k}`;
    const text = list.length * s.font * 0.62 + 8 <= w - 4 ? list : `×${k}`;
    const plateW = text.length * s.font * 0.62 + 8;
    const plateH = s.font + 6;
    if (plateW <= w - 2 && plateH <= h - 2) {
      const px = x + (w - plateW) / 2;
      const py = y + (h - plateH) / 2;
      group.append(
        svg("rect", { class: "sharding-replica-plate", x: px, y: py, width: plateW, height: plateH, rx: 3 }),
        svg("text", { class: "sharding-replica-text", x: px + plateW / 2, y: py + plateH / 2, "font-size": s.font }, text),
      );
    }
  }
  group.append(svg("rect", { class: "sharding-block-edge", x, y, width: w, height: h }));
  return group;
}

function label(text: string, x: number, y: number, ink: string, font: number): SVGTextElement {
  return svg("text", { class: "sharding-block-label", x, y, fill: ink, "font-size": font }, text);
}

/** Devices holding the same value as ``device`` inside shard_map (equal along the invariant axes). */
function equalBlocks(layout: ArrayLayout, device: number): number[] {
  const mesh = layout.mesh;
  if (!mesh || !layout.varying_axes) return [device];
  const varying = new Set(layout.varying_axes);
  const key = (id: number): string => {
    let flat = mesh.device_ids.indexOf(id);
    const coords: number[] = [];
    for (let axis = mesh.axis_sizes.length - 1; axis >= 0; axis--) {
      if (varying.has(mesh.axis_names[axis])) coords.push(flat % mesh.axis_sizes[axis]);
      flat = Math.floor(flat / mesh.axis_sizes[axis]);
    }
    return coords.join(",");
  };
  const mine = key(device);
  return mesh.device_ids.filter((id) => key(id) === mine);
}

/**
 * Inside shard_map every device holds a block of the local shape: one cell per
 * device, laid out like the mesh (last axis across), each cell shaped like the
 * block. Equal copies are named in the tooltip and highlighted together.
 */
function localBlocksView(layout: ArrayLayout, size: ViewSize, interactions: Interactions): HTMLElement {
  const s = SIZES[size];
  const sizes = layout.mesh?.axis_sizes ?? [layout.shards.length];
  const ids = layout.mesh?.device_ids ?? layout.shards.map((sh) => sh.device);
  const cols = sizes[sizes.length - 1] ?? 1;
  const rows = Math.max(1, Math.round(ids.length / cols));
  const shape = layout.shape;
  const aspect = shape.length >= 2 ? shape[shape.length - 2] / Math.max(shape[shape.length - 1], 1) : shape.length === 1 ? 0.3 : 1;
  const gap = size === "full" ? 6 : 3;
  let cellW = (s.maxW - gap * (cols - 1)) / cols;
  let cellH = cellW * Math.min(Math.max(aspect, 0.25), 4);
  if (rows * cellH + gap * (rows - 1) > s.maxH) {
    cellH = (s.maxH - gap * (rows - 1)) / rows;
    cellW = Math.min(cellW, cellH / Math.min(Math.max(aspect, 0.25), 4));
  }
  const width = cols * cellW + gap * (cols - 1);
  const height = rows * cellH + gap * (rows - 1);
  const image = svg("svg", {
    class: "sharding-grid",
    width: Math.round(width),
    height: Math.round(height),
    viewBox: `0 0 ${width} ${height}`,
    "data-testid": size === "full" ? "sharding-grid" : "sharding-mini-grid",
  });
  ids.forEach((device, i) => {
    const shard = layout.shards.find((sh) => sh.device === device);
    if (!shard) return;
    const node = drawBlock({ row: [0, 1], col: [0, 1], shards: [shard] }, (i % cols) * (cellW + gap), Math.floor(i / cols) * (cellH + gap), cellW, cellH, size);
    const equal = equalBlocks(layout, device);
    const lines = describeBlock(layout, [shard]);
    if (!layout.varying_axes) lines.push("check_vma=False: JAX does not track which blocks are equal");
    else lines.push(equal.length > 1 ? `equal to the blocks of devices ${equal.join(", ")}` : "differs from every other device's block");
    const hover = (): void => interactions.hover({ devices: equal, lines }, node);
    node.addEventListener("mouseenter", hover);
    node.addEventListener("focus", hover);
    node.addEventListener("mouseleave", () => interactions.hover(null, null));
    node.addEventListener("blur", () => interactions.hover(null, null));
    image.append(node);
  });
  const note =
    size === "full"
      ? el(
          "div",
          { class: "sharding-axes" },
          `each device's own block, shape (${shape.join(", ")}), placed like the mesh; ` +
            (!layout.varying_axes
              ? "which blocks are equal is unknown (check_vma=False)"
              : layout.varying_axes.length
                ? `values vary along ${layout.varying_axes.join(", ")}`
                : "equal on every device"),
        )
      : null;
  return el("div", { class: `sharding-array sharding-${size}` }, el("div", { class: "sharding-picture" }, image, note));
}

/** The array's grid (with dimension pickers when it has more than two dimensions). */
export function arrayView(layout: ArrayLayout, size: ViewSize, interactions: Interactions): HTMLElement {
  if (layout.local_block) return localBlocksView(layout, size, interactions);
  const ndim = layout.shape.length;
  let [rowDim, colDim] = defaultDims(layout);
  const hidden = new Map<number, [number, number]>();
  const picture = el("div", { class: "sharding-picture" });
  const controls = el("div", { class: "sharding-dims" });
  const root = el("div", { class: `sharding-array sharding-${size}` }, size === "full" && ndim > 2 ? controls : null, picture);

  function resetHidden(): void {
    hidden.clear();
    for (let d = 0; d < ndim; d++) {
      if (d !== rowDim && d !== colDim) hidden.set(d, rangesAlong(layout, d)[0] ?? [0, layout.shape[d]]);
    }
  }

  function dimSelect(which: "rows" | "cols", current: number, onPick: (d: number) => void): HTMLElement {
    const select = el("select", { class: "sharding-dim-select", "data-role": which, "aria-label": `${which} dimension` });
    for (let d = 0; d < ndim; d++) {
      select.append(el("option", { value: String(d), selected: d === current }, `dim ${d} (${layout.shape[d]})`));
    }
    select.addEventListener("change", () => onPick(Number(select.value)));
    return el("label", {}, `${which} `, select);
  }

  function renderControls(): void {
    if (size !== "full" || ndim <= 2) return;
    const hiddenPickers = [...hidden.keys()].map((dim) => {
      const select = el("select", { class: "sharding-dim-select", "data-role": `dim-${dim}`, "aria-label": `block along dim ${dim}` });
      rangesAlong(layout, dim).forEach(([start, stop], i) => {
        const current = hidden.get(dim);
        select.append(el("option", { value: String(i), selected: current?.[0] === start && current?.[1] === stop }, `${start}:${stop}`));
      });
      select.addEventListener("change", () => {
        hidden.set(dim, rangesAlong(layout, dim)[Number(select.value)]);
        renderPicture();
      });
      return el("label", {}, `dim ${dim} `, select);
    });
    controls.replaceChildren(
      dimSelect("rows", rowDim, (d) => {
        if (d === colDim) colDim = rowDim;
        rowDim = d;
        resetHidden();
        renderControls();
        renderPicture();
      }),
      dimSelect("cols", colDim, (d) => {
        if (d === rowDim) rowDim = colDim;
        colDim = d;
        resetHidden();
        renderControls();
        renderPicture();
      }),
      ...hiddenPickers,
    );
  }

  function renderPicture(): void {
    const rows = rowDim >= 0 ? layout.shape[rowDim] : 1;
    const cols = colDim >= 0 ? layout.shape[colDim] : 1;
    const [width, height] = geometry(rows, cols, size, rowDim, colDim);
    const sx = width / Math.max(cols, 1);
    const sy = height / Math.max(rows, 1);
    const image = svg("svg", {
      class: "sharding-grid",
      width,
      height,
      viewBox: `0 0 ${width} ${height}`,
      "data-testid": size === "full" ? "sharding-grid" : "sharding-mini-grid",
    });
    for (const block of blocksInView(layout, rowDim, colDim, hidden)) {
      const x = block.col[0] * sx;
      const y = block.row[0] * sy;
      const w = Math.max((block.col[1] - block.col[0]) * sx, 1);
      const h = Math.max((block.row[1] - block.row[0]) * sy, 1);
      const node = drawBlock(block, x, y, w, h, size);
      const hover = (): void => interactions.hover({ devices: block.shards.map((s) => s.device), lines: describeBlock(layout, block.shards) }, node);
      node.addEventListener("mouseenter", hover);
      node.addEventListener("focus", hover);
      node.addEventListener("mouseleave", () => interactions.hover(null, null));
      node.addEventListener("blur", () => interactions.hover(null, null));
      image.append(node);
    }
    const axes =
      size === "full"
        ? el(
            "div",
            { class: "sharding-axes" },
            rowDim >= 0 ? `rows: dim ${rowDim} (${rows})` : null,
            rowDim >= 0 && colDim >= 0 ? " · " : null,
            colDim >= 0 ? `cols: dim ${colDim} (${cols})` : ndim === 0 ? "a scalar" : null,
          )
        : null;
    const empty = layout.shards.filter(isEmptyShard).map((s) => s.device);
    picture.replaceChildren(image);
    if (axes) picture.append(axes);
    if (size === "full" && empty.length) {
      picture.append(el("div", { class: "sharding-note" }, `Devices ${empty.join(", ")} hold no elements: the shape does not divide, XLA pads the last blocks.`));
    }
  }

  resetHidden();
  renderControls();
  renderPicture();
  return root;
}
