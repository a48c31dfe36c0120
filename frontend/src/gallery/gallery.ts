/**
 * The Gallery tab: short example programs that load into the editor.
 *
 * Every `frontend/src/examples/gallery/*.py` is an example; adding one is
 * dropping a file there. Its leading comment lines are its card: the first
 * is the title, the following ones the description; the code after them is
 * what loads. Files are listed in name order, so prefix them with a number
 * (`07_control_flow.py`). The comment header stays in the loaded code, so
 * the program explains itself in the editor too.
 */

import { el } from "../core/dom";
import "./gallery.css";
import type { PanelFactory } from "../panel/types";

export interface GalleryExample {
  /** The file name without directory and extension: a stable id. */
  id: string;
  title: string;
  description: string;
  code: string;
}

const SOURCES = import.meta.glob("../examples/gallery/*.py", { query: "?raw", import: "default", eager: true }) as Record<
  string,
  string
>;

/** Title and description from the leading `#` lines. */
export function parseExample(path: string, source: string): GalleryExample {
  const id = path.replace(/^.*\//, "").replace(/\.py$/, "");
  const header: string[] = [];
  for (const line of source.split("\n")) {
    if (!line.startsWith("#")) break;
    header.push(line.replace(/^#\s?/, "").trim());
  }
  const fallback = id.replace(/^\d+_/, "").replace(/_/g, " ");
  return {
    id,
    title: header[0] || fallback,
    description: header.slice(1).join(" "),
    code: source.trimEnd() + "\n",
  };
}

export const GALLERY: GalleryExample[] = Object.entries(SOURCES)
  .sort(([a], [b]) => a.localeCompare(b))
  .map(([path, source]) => parseExample(path, source));

export const galleryPanel: PanelFactory = (ctx) => {
  const status = el("div", { class: "gallery-status", role: "status" });
  const cards = GALLERY.map((example) =>
    el(
      "article",
      { class: "gallery-card", "data-example": example.id },
      el("h3", { class: "gallery-title" }, example.title),
      el("p", { class: "gallery-description" }, example.description),
      el(
        "button",
        {
          class: "btn gallery-open",
          type: "button",
          title: "Replace the code in the editor with this example (undo with Ctrl+Z)",
          "data-testid": `gallery-open-${example.id}`,
          onclick: () => {
            ctx.editor.setCode(example.code);
            ctx.editor.goToLine(1);
            status.textContent = `Loaded “${example.title}”. Run it to see its output and what JAX compiled.`;
          },
        },
        "Open in editor",
      ),
    ),
  );
  const element = el(
    "div",
    { class: "gallery", "data-testid": "gallery" },
    el("p", { class: "gallery-intro" }, "Small programs that show how JAX works. Open one, run it, then look at the Inspect tab."),
    status,
    el("div", { class: "gallery-grid" }, ...cards),
  );
  return {
    id: "gallery",
    title: "Gallery",
    element,
    handles: [],
    onRunStart() {
      status.textContent = "";
    },
    onEvent() {},
  };
};
