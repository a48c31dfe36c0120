/**
 * The device mesh drawn beside an array: one cell per device, in mesh order,
 * coloured like the device's blocks. A 1-D mesh is a row, a 2-D mesh a grid
 * (first axis down, second across); more axes become a row of 2-D grids, one
 * per position along the leading axes. Cells shrink for big meshes (64
 * devices stay readable) and hovering one highlights that device's blocks.
 */

import { el } from "../core/dom";
import { deviceStyle, svg } from "./sharding_draw";
import { describeDevice, type Interactions } from "./sharding_grid";
import type { ArrayLayout, MeshInfo } from "./sharding_types";

const MAX_CELL = 28;
const MIN_CELL = 13;
const LABEL_MIN_CELL = 15;
/** Width the mesh may take beside a full array view. */
const MESH_BUDGET_PX = 260;

function axisTitle(mesh: MeshInfo, axis: number): string {
  const kind = mesh.axis_types[axis];
  return `${mesh.axis_names[axis]} (${mesh.axis_sizes[axis]}${kind ? `, ${kind}` : ""})`;
}

function cellSize(rows: number, cols: number, panels: number): number {
  const across = Math.max(cols * panels + (panels - 1), 1);
  return Math.max(MIN_CELL, Math.min(MAX_CELL, Math.floor(MESH_BUDGET_PX / across), Math.floor(200 / Math.max(rows, 1))));
}

function deviceGrid(
  layout: ArrayLayout,
  ids: number[],
  rows: number,
  cols: number,
  cell: number,
  interactions: Interactions,
  describe: (device: number) => (string | Node)[],
): SVGSVGElement {
  const gap = 2;
  const width = cols * cell + (cols - 1) * gap;
  const height = rows * cell + (rows - 1) * gap;
  const held = new Set(layout.shards.map((s) => s.device));
  const image = svg("svg", { class: "sharding-mesh-grid", width, height, viewBox: `0 0 ${width} ${height}` });
  ids.forEach((device, i) => {
    const x = (i % cols) * (cell + gap);
    const y = Math.floor(i / cols) * (cell + gap);
    const style = deviceStyle(device);
    const group = svg("g", {
      class: `sharding-mesh-cell${held.has(device) ? "" : " is-idle"}`,
      "data-devices": String(device),
      tabindex: 0,
      role: "img",
      "aria-label": `device ${device}`,
    });
    group.append(svg("rect", { x, y, width: cell, height: cell, rx: 3, fill: style.fill }));
    if (style.pattern) group.append(svg("rect", { x, y, width: cell, height: cell, rx: 3, fill: style.pattern }));
    if (cell >= LABEL_MIN_CELL) {
      group.append(
        svg("text", { class: "sharding-block-label", x: x + cell / 2, y: y + cell / 2, fill: style.ink, "font-size": cell >= 22 ? 11 : 9 }, String(device)),
      );
    }
    group.append(svg("rect", { class: "sharding-block-edge", x, y, width: cell, height: cell, rx: 3 }));
    const hover = (): void => interactions.hover({ devices: [device], lines: describe(device) }, group);
    group.addEventListener("mouseenter", hover);
    group.addEventListener("focus", hover);
    group.addEventListener("mouseleave", () => interactions.hover(null, null));
    group.addEventListener("blur", () => interactions.hover(null, null));
    image.append(group);
  });
  return image;
}

/**
 * The mesh of ``layout`` (or, without one, its devices in a row). ``describe``
 * gives a device's tooltip; by default, what it holds of ``layout``.
 */
export function meshView(
  layout: ArrayLayout,
  interactions: Interactions,
  describe: (device: number) => (string | Node)[] = (device) => describeDevice(layout, device),
): HTMLElement {
  const mesh = layout.mesh;
  if (!mesh || mesh.axis_names.length === 0) {
    const ids = mesh?.device_ids.length ? mesh.device_ids : layout.devices;
    const cell = cellSize(1, ids.length, 1);
    const title = ids.length === 1 ? "one device, no mesh" : `${ids.length} devices, no mesh`;
    return el(
      "figure",
      { class: "sharding-mesh", "data-testid": "sharding-mesh" },
      el("figcaption", { class: "sharding-mesh-caption" }, title),
      deviceGrid(layout, ids, 1, ids.length, cell, interactions, describe),
    );
  }
  const sizes = mesh.axis_sizes;
  const n = sizes.length;
  const cols = sizes[n - 1];
  const rows = n >= 2 ? sizes[n - 2] : 1;
  const panels = sizes.slice(0, Math.max(n - 2, 0)).reduce((a, b) => a * b, 1);
  const cell = cellSize(rows, cols, panels);
  const perPanel = rows * cols;
  const grids: HTMLElement[] = [];
  for (let p = 0; p < panels; p++) {
    const ids = mesh.device_ids.slice(p * perPanel, (p + 1) * perPanel);
    // Where this panel sits along the leading axes, e.g. "a=1".
    let rest = p;
    const where: string[] = [];
    for (let axis = n - 3; axis >= 0; axis--) {
      where.unshift(`${mesh.axis_names[axis]}=${rest % sizes[axis]}`);
      rest = Math.floor(rest / sizes[axis]);
    }
    grids.push(
      el(
        "div",
        { class: "sharding-mesh-panel" },
        where.length ? el("div", { class: "sharding-mesh-where" }, where.join(", ")) : null,
        deviceGrid(layout, ids, rows, cols, cell, interactions, describe),
      ),
    );
  }
  const leading = n > 2 ? sizes.slice(0, n - 2).map((_, axis) => axisTitle(mesh, axis)).join(" × ") : null;
  return el(
    "figure",
    { class: "sharding-mesh", "data-testid": "sharding-mesh" },
    el(
      "figcaption",
      { class: "sharding-mesh-caption" },
      `mesh ${mesh.axis_names.map((name, i) => `${name}=${sizes[i]}`).join(" × ")}`,
    ),
    el("div", { class: "sharding-mesh-top" }, `→ ${axisTitle(mesh, n - 1)}`),
    el(
      "div",
      { class: "sharding-mesh-body" },
      n >= 2 ? el("div", { class: "sharding-mesh-side" }, `↓ ${axisTitle(mesh, n - 2)}`) : null,
      el("div", { class: "sharding-mesh-panels" }, ...grids),
    ),
    leading ? el("div", { class: "sharding-mesh-leading" }, `panels: ${leading}`) : null,
  );
}
