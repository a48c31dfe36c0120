/**
 * HTML made by a run (treescope views, `_repr_html_`, `playground.HTML`)
 * shown in a sandboxed iframe, never parsed into this page.
 *
 * The frame is `sandbox="allow-scripts"` without `allow-same-origin`: its
 * document has an opaque origin, so its scripts cannot touch `parent`'s DOM,
 * cookies, storage or this page's websocket. A Content-Security-Policy in the
 * document also forbids network requests (no fetch, no new websocket, no
 * external images) and forms. The only thing the frame may tell the page is
 * its content height, by postMessage; the page accepts a message only from
 * that frame's own window, only as a finite number, clamped to MAX_HEIGHT_PX.
 * It cannot leave its document either: the page's CSP (`frame-src 'none'`)
 * refuses every navigation of its frames, and a frame that loads a second
 * document anyway is replaced by a notice.
 *
 * The first few frames on the page are filled as soon as they are made (their
 * document loads the moment the Output places them): waiting for the Output's
 * next frame and then for an IntersectionObserver round cost up to a tenth of a
 * second before the frame even started, while "drawing…" showed. Frames past
 * those are filled when they scroll near the view, so a run that shows many
 * values does not build every document at once.
 */

import { el } from "../core/dom";
import type { DisplayEvent } from "../wire/protocol";
import "./display.css";

/** Taller content scrolls inside the frame. */
export const MAX_HEIGHT_PX = 4000;
const PLACEHOLDER_HEIGHT_PX = 48;
/** Frames this far below (or above) the visible part of the Output are filled ahead of time. */
const PRELOAD_MARGIN_PX = 800;
/** Frames on the page up to which a new one is filled at once (a run usually shows one value or a few). */
export const EAGER_FRAMES = 4;

const FRAME_CSP = [
  "default-src 'none'",
  // treescope's views are inline scripts that build their nodes with new Function().
  "script-src 'unsafe-inline' 'unsafe-eval'",
  "style-src 'unsafe-inline'",
  "img-src data: blob:",
  "font-src data:",
  "media-src data: blob:",
  "form-action 'none'",
].join("; ");

/**
 * Treescope draws inside shadow roots, where the frame's styles do not reach; its array view's caption
 * (zoom, "Dynamic colormap (click to adjust). Hover/click ...") is one unbreakable line, cut off on a
 * phone (an inline style sets it: hence !important). This lets it wrap within the frame's width.
 */
const TREESCOPE_STYLE = ".arrayviz_container .info{white-space:pre-wrap !important;max-width:calc(100vw - 48px)}";

/** Runs first inside the frame: reports the content height whenever it changes. */
const HEIGHT_REPORTER = `(() => {
  const max = ${MAX_HEIGHT_PX};
  let last = -1;
  const styleShadowRoots = () => {
    for (const host of document.querySelectorAll("treescope-container")) {
      const root = host.shadowRoot;
      if (!root || root.querySelector("style[data-jaxplay]")) continue;
      const style = document.createElement("style");
      style.dataset.jaxplay = "";
      style.textContent = ${JSON.stringify(TREESCOPE_STYLE)};
      root.append(style);
    }
  };
  const report = () => {
    styleShadowRoots();
    const height = Math.ceil(document.body.getBoundingClientRect().height);
    if (height === last) return;
    last = height;
    document.documentElement.style.overflowY = height > max ? "auto" : "hidden";
    parent.postMessage({ jaxplayFrameHeight: height }, "*");
  };
  addEventListener("DOMContentLoaded", () => {
    new ResizeObserver(report).observe(document.body);
    report();
  });
})();`;

export function frameDocument(html: string): string {
  return (
    "<!doctype html><html><head><meta charset=\"utf-8\">" +
    `<meta http-equiv="Content-Security-Policy" content="${FRAME_CSP}">` +
    "<style>" +
    ":root{color-scheme:light}" +
    "html{overflow:hidden}" +
    "body{margin:0;padding:6px 8px;display:flow-root;overflow-x:auto;background:#fff;color:#1c2128;" +
    "font:13px/1.45 system-ui,sans-serif}" +
    "</style>" +
    `<script>${HEIGHT_REPORTER}</script>` +
    `</head><body>${html}</body></html>`
  );
}

let listening = false;

function onFrameMessage(event: MessageEvent): void {
  if (event.source === null) return;
  // Only a display frame on the page may resize itself, and only itself.
  let frame: HTMLIFrameElement | undefined;
  for (const candidate of document.querySelectorAll<HTMLIFrameElement>("iframe.display-frame")) {
    if (candidate.contentWindow === event.source) frame = candidate;
  }
  if (!frame) return;
  const data: unknown = event.data;
  if (typeof data !== "object" || data === null) return;
  const height = (data as { jaxplayFrameHeight?: unknown }).jaxplayFrameHeight;
  if (typeof height !== "number" || !Number.isFinite(height)) return;
  frame.style.height = `${Math.min(Math.max(Math.ceil(height), 1), MAX_HEIGHT_PX)}px`;
}

/** One observer per scrolling container, so frames fill a little before they scroll into view. */
const observers = new WeakMap<Element, IntersectionObserver>();
const pendingHtml = new WeakMap<HTMLIFrameElement, string>();

/** Shown instead of a frame whose document tried to go elsewhere. */
const NAVIGATION_BLOCKED =
  "<!doctype html><meta charset=utf-8><body style=\"font:13px system-ui;color:#a40e26;margin:6px 8px\">" +
  "This output tried to navigate away and was stopped.</body>";

function fill(frame: HTMLIFrameElement): void {
  const html = pendingHtml.get(frame);
  if (html === undefined) return;
  pendingHtml.delete(frame);
  // The page's CSP (frame-src 'none') already refuses any navigation of the frame; should one
  // still load something, the frame gets a notice instead, and never a second chance.
  let loads = 0;
  frame.addEventListener("load", () => {
    loads += 1;
    if (loads > 1 && frame.dataset.navigationBlocked !== "true") {
      frame.dataset.navigationBlocked = "true";
      frame.srcdoc = NAVIGATION_BLOCKED;
    }
  });
  frame.srcdoc = frameDocument(html);
}

function scrollParent(node: Element): Element | null {
  for (let parent = node.parentElement; parent; parent = parent.parentElement) {
    const overflow = getComputedStyle(parent).overflowY;
    if (overflow === "auto" || overflow === "scroll") return parent;
  }
  return null;
}

function observerFor(root: Element | null): IntersectionObserver {
  const key = root ?? document.documentElement;
  let observer = observers.get(key);
  if (!observer) {
    observer = new IntersectionObserver(
      (entries, self) => {
        for (const entry of entries) {
          if (!entry.isIntersecting) continue;
          self.unobserve(entry.target);
          fill(entry.target as HTMLIFrameElement);
        }
      },
      { root, rootMargin: `${PRELOAD_MARGIN_PX}px 0px` },
    );
    observers.set(key, observer);
  }
  return observer;
}

/** The Output appends display blocks on its next animation frame: observe once the frame is on the page. */
function fillWhenVisible(frame: HTMLIFrameElement, html: string, framesWaited = 0): void {
  pendingHtml.set(frame, html);
  if (typeof IntersectionObserver === "undefined") {
    fill(frame);
  } else if (frame.isConnected) {
    observerFor(scrollParent(frame)).observe(frame);
  } else if (framesWaited < 120) {
    requestAnimationFrame(() => fillWhenVisible(frame, html, framesWaited + 1));
  } else {
    fill(frame); // never placed where we could watch it: fill it anyway
  }
}

/** Frames filled at once that the Output has not placed yet (it places them on its next animation frame). */
const eagerUnplaced = new Set<HTMLIFrameElement>();

function fillsAtOnce(): boolean {
  for (const frame of eagerUnplaced) if (frame.isConnected) eagerUnplaced.delete(frame);
  return document.querySelectorAll("iframe.display-frame").length + eagerUnplaced.size < EAGER_FRAMES;
}

export function htmlFrame(ev: DisplayEvent): HTMLElement {
  if (!listening) {
    window.addEventListener("message", onFrameMessage);
    listening = true;
  }
  const frame = el("iframe", {
    class: "display-frame",
    sandbox: "allow-scripts",
    referrerpolicy: "no-referrer",
    title: ev.role === "result" ? "Result" : "Displayed value",
    "data-testid": "display-frame",
  });
  frame.style.height = `${PLACEHOLDER_HEIGHT_PX}px`;
  if (fillsAtOnce()) {
    frame.dataset.fill = "at-once";
    pendingHtml.set(frame, ev.data);
    fill(frame); // srcdoc before the frame is placed: it loads the moment it is
    eagerUnplaced.add(frame);
    // Placed by then (the Output's flush runs in the first), or never placed (a new run cleared it).
    requestAnimationFrame(() => requestAnimationFrame(() => eagerUnplaced.delete(frame)));
  } else {
    frame.dataset.fill = "when-visible";
    fillWhenVisible(frame, ev.data);
  }
  return frame;
}
