/**
 * How the Output tab shows a `display` event, by MIME type.
 *
 * A renderer returns the element that stands for the value; the Output tab
 * adds the frame around it (the "result" label, the event's `notice`). To
 * support a new MIME type, write the renderer in its own module and add one
 * line below, e.g. `"image/png": pngImage,`. HTML from a run must only ever
 * be shown inside a sandboxed iframe (never parsed into this page).
 */

import { htmlFrame } from "./html_frame";
import { pngImage, svgImage } from "./image";
import { el } from "../core/dom";
import type { DisplayEvent } from "../wire/protocol";

export type DisplayRenderer = (ev: DisplayEvent) => HTMLElement;

const plainText: DisplayRenderer = (ev) => el("pre", { class: "output-display-text" }, ev.data);

export const DISPLAY_RENDERERS: Record<string, DisplayRenderer> = {
  "text/plain": plainText,
  "text/html": htmlFrame,
  "image/png": pngImage,
  "image/svg+xml": svgImage,
};
