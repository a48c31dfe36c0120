/**
 * Images a run showed (matplotlib figures, `_repr_png_`, `_repr_svg_`):
 * drawn at the size the event gives in CSS pixels (figures are drawn at twice
 * that for sharp high-density screens), never wider than the Output.
 * SVG goes through <img>, where its scripts cannot run.
 */

import { el } from "../core/dom";
import type { DisplayEvent } from "../wire/protocol";
import "./display.css";

let figuresMade = 0;

function image(ev: DisplayEvent, src: string, extension: string): HTMLElement {
  const img = el("img", {
    class: "display-image",
    src,
    alt: ev.role === "figure" ? "matplotlib figure" : "image",
    width: ev.width ?? null,
    height: ev.height ?? null,
    decoding: "async",
    "data-testid": "display-image",
  });
  figuresMade += 1;
  // The label is CSS content, so the Output's text (copy, innerText) stays the program's.
  const save = el("a", {
    class: "display-save",
    href: src,
    download: `figure-${figuresMade}.${extension}`,
    title: "Save this image",
    "aria-label": "Save this image",
  });
  return el("div", { class: "display-image-box" }, img, save);
}

export function pngImage(ev: DisplayEvent): HTMLElement {
  return image(ev, `data:image/png;base64,${ev.data}`, "png");
}

export function svgImage(ev: DisplayEvent): HTMLElement {
  return image(ev, `data:image/svg+xml;charset=utf-8,${encodeURIComponent(ev.data)}`, "svg");
}
