/**
 * Drawing primitives of the Sharding panel: SVG building, the device
 * palette, and the fill patterns that keep devices apart beyond 8.
 *
 * Colours: the Okabe-Ito palette (distinguishable with the common forms of
 * colour blindness), ordered so that neighbours in a 2x4 mesh differ in hue
 * and lightness. Devices 8-63 reuse the 8 hues with one of 7 line/dot
 * patterns per group of 8, and every block also carries its device number,
 * so no reading depends on hue alone.
 */

const SVG_NS = "http://www.w3.org/2000/svg";

type SvgAttr = string | number | null | undefined | false;

/** `svg("rect", { x: 0, y: 0, width: 10 })`; null/undefined/false attributes are left out. */
export function svg<K extends keyof SVGElementTagNameMap>(
  tag: K,
  attrs: Record<string, SvgAttr> = {},
  ...children: (Node | string | null | undefined | false)[]
): SVGElementTagNameMap[K] {
  const node = document.createElementNS(SVG_NS, tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (value === null || value === undefined || value === false) continue;
    node.setAttribute(key, String(value));
  }
  for (const child of children) {
    if (child === null || child === undefined || child === false) continue;
    node.append(child);
  }
  return node;
}

/** blue, orange, bluish green, reddish purple, yellow, sky blue, vermillion, grey. */
export const DEVICE_HUES = ["#0072B2", "#E69F00", "#009E73", "#CC79A7", "#F0E442", "#56B4E9", "#D55E00", "#8C8C8C"];
export const PATTERN_NAMES = ["solid", "diagonal", "dots", "horizontal", "back-diagonal", "vertical", "cross", "checks"];

export interface DeviceStyle {
  fill: string;
  /** Text drawn on the fill: black or white, whichever reads better. */
  ink: string;
  /** url(#...) of the pattern overlay, or null for solid devices 0-7. */
  pattern: string | null;
  /** "blue", "orange / dots": for the legend's title and screen readers. */
  description: string;
}

const HUE_NAMES = ["blue", "orange", "green", "purple", "yellow", "sky blue", "vermillion", "grey"];

export function deviceStyle(device: number): DeviceStyle {
  const hue = ((device % 8) + 8) % 8;
  const group = Math.floor(Math.abs(device) / 8) % PATTERN_NAMES.length;
  const fill = DEVICE_HUES[hue];
  const ink = inkFor(fill);
  const tone = ink === "#000000" ? "d" : "l";
  return {
    fill,
    ink,
    pattern: group === 0 ? null : `url(#sharding-pattern-${group}-${tone})`,
    description: group === 0 ? HUE_NAMES[hue] : `${HUE_NAMES[hue]} with ${PATTERN_NAMES[group]}`,
  };
}

function inkFor(hex: string): string {
  const [r, g, b] = [1, 3, 5].map((i) => parseInt(hex.slice(i, i + 2), 16) / 255);
  const lin = (c: number) => (c <= 0.03928 ? c / 12.92 : ((c + 0.055) / 1.055) ** 2.4);
  const luminance = 0.2126 * lin(r) + 0.7152 * lin(g) + 0.0722 * lin(b);
  // The contrast with black beats the contrast with white above ~0.179.
  return luminance > 0.179 ? "#000000" : "#ffffff";
}

/** The <svg> holding the pattern definitions; mounted once in the panel (not display:none, or Chrome drops them). */
export function patternDefs(): SVGSVGElement {
  const defs = svg("defs");
  for (const tone of ["d", "l"]) {
    const stroke = tone === "d" ? "rgba(0,0,0,0.45)" : "rgba(255,255,255,0.6)";
    const lines = (d: string) => svg("path", { d, stroke, "stroke-width": 1.6, fill: "none" });
    const shapes: (SVGElement | SVGElement[])[] = [
      [],
      lines("M-2,2 l4,-4 M0,8 l8,-8 M6,10 l4,-4"),
      svg("circle", { cx: 4, cy: 4, r: 1.5, fill: stroke }),
      lines("M0,4 h8"),
      lines("M-2,6 l4,4 M0,0 l8,8 M6,-2 l4,4"),
      lines("M4,0 v8"),
      lines("M0,4 h8 M4,0 v8"),
      [svg("rect", { x: 0, y: 0, width: 4, height: 4, fill: stroke }), svg("rect", { x: 4, y: 4, width: 4, height: 4, fill: stroke })],
    ];
    shapes.forEach((shape, group) => {
      if (group === 0) return;
      const pattern = svg("pattern", {
        id: `sharding-pattern-${group}-${tone}`,
        width: 8,
        height: 8,
        patternUnits: "userSpaceOnUse",
      });
      for (const node of Array.isArray(shape) ? shape : [shape]) pattern.append(node);
      defs.append(pattern);
    });
  }
  return svg("svg", { class: "sharding-defs", width: 0, height: 0, "aria-hidden": "true", focusable: "false" }, defs);
}

/** A filled rectangle in a device's colour, with its pattern overlay when it has one. */
export function deviceRect(device: number, x: number, y: number, width: number, height: number): SVGElement[] {
  const style = deviceStyle(device);
  const rects: SVGElement[] = [svg("rect", { x, y, width, height, fill: style.fill })];
  if (style.pattern) rects.push(svg("rect", { x, y, width, height, fill: style.pattern }));
  return rects;
}

let hatchCount = 0;

/** A <pattern> of diagonal bands, one per device in ``devices``: how a replicated block is filled. */
export function replicaHatch(devices: number[], band: number): SVGPatternElement {
  hatchCount += 1;
  const width = band * devices.length;
  const pattern = svg("pattern", {
    id: `sharding-hatch-${hatchCount}`,
    width,
    height: width,
    patternUnits: "userSpaceOnUse",
    patternTransform: "rotate(45)",
  });
  devices.forEach((device, i) => {
    pattern.append(svg("rect", { x: i * band, y: 0, width: band, height: width, fill: deviceStyle(device).fill }));
  });
  return pattern;
}

/** A small square swatch for legends and tooltips. */
export function swatch(device: number, size = 14): SVGSVGElement {
  return svg(
    "svg",
    { class: "sharding-swatch", width: size, height: size, viewBox: `0 0 ${size} ${size}`, "aria-hidden": "true" },
    ...deviceRect(device, 0, 0, size, size),
  );
}

/** The legend's sample of a replicated block. */
export function replicaSwatch(size = 14): SVGSVGElement {
  const hatch = replicaHatch([0, 1, 2], 3);
  return svg(
    "svg",
    { class: "sharding-swatch", width: size, height: size, viewBox: `0 0 ${size} ${size}`, "aria-hidden": "true" },
    svg("defs", {}, hatch),
    svg("rect", { x: 0, y: 0, width: size, height: size, fill: `url(#${hatch.id})` }),
  );
}

/** "1.5 KiB", "12 B", "3.0 MiB". */
export function formatBytes(bytes: number | null | undefined): string {
  if (bytes === null || bytes === undefined) return "?";
  if (bytes < 1024) return `${bytes} B`;
  const units = ["KiB", "MiB", "GiB", "TiB"];
  let value = bytes / 1024;
  let unit = 0;
  while (value >= 1024 && unit < units.length - 1) {
    value /= 1024;
    unit += 1;
  }
  return `${value < 10 ? value.toFixed(1) : Math.round(value)} ${units[unit]}`;
}

/** "[0:4, 2:4]": an index in NumPy's slice notation. */
export function formatIndex(index: [number, number][]): string {
  if (index.length === 0) return "[] (a scalar)";
  return `[${index.map(([start, stop]) => `${start}:${stop}`).join(", ")}]`;
}

/** "(4, 2)": the shape of a block. */
export function blockShape(index: [number, number][]): string {
  const dims = index.map(([start, stop]) => stop - start);
  return dims.length === 1 ? `(${dims[0]},)` : `(${dims.join(", ")})`;
}
