/**
 * "What's installed": a button by the backend picker opening a popover that
 * lists the libraries a program can import on the chosen backend, with their
 * versions, as the backend's workers reported them (GET /api/backends).
 */

import { el } from "../core/dom";
import type { BackendInfo } from "../wire/protocol";

export class LibrariesPopover {
  readonly button = el(
    "button",
    {
      type: "button",
      class: "btn btn-ghost backend-libraries",
      title: "Libraries installed on this backend",
      "aria-haspopup": "dialog",
      "aria-expanded": "false",
      "data-testid": "backend-libraries",
    },
    el("span", { class: "libraries-label-long" }, "Libraries"),
    el("span", { class: "libraries-label-short" }, "Libs"),
  );
  readonly popover = el("div", {
    class: "libraries-popover",
    role: "dialog",
    "aria-label": "Installed libraries",
    hidden: true,
    "data-testid": "libraries-popover",
  });
  readonly element = el("span", { class: "libraries-anchor" }, this.button, this.popover);
  private backend: BackendInfo | undefined;

  constructor() {
    this.button.addEventListener("click", () => (this.popover.hidden ? this.open() : this.close()));
    document.addEventListener("keydown", (e) => {
      if (e.key === "Escape" && !this.popover.hidden) this.close();
    });
    document.addEventListener("mousedown", (e) => {
      if (!this.popover.hidden && !this.element.contains(e.target as Node)) this.close();
    });
  }

  /** The backend whose libraries to show; an open popover follows the picker. */
  show(backend: BackendInfo | undefined): void {
    this.backend = backend;
    this.button.disabled = !backend;
    if (!this.popover.hidden) this.render();
  }

  private open(): void {
    this.render();
    this.popover.hidden = false;
    this.button.setAttribute("aria-expanded", "true");
  }

  private close(): void {
    this.popover.hidden = true;
    this.button.setAttribute("aria-expanded", "false");
  }

  private render(): void {
    const backend = this.backend;
    if (!backend) {
      this.popover.replaceChildren(el("p", { class: "libraries-note" }, "No backend is connected yet."));
      return;
    }
    const libraries = Object.entries(backend.libraries ?? {});
    const heading = el("div", { class: "libraries-heading" }, `Installed on ${backend.name}`);
    if (!libraries.length) {
      this.popover.replaceChildren(
        heading,
        el("p", { class: "libraries-note" }, "No worker of this backend has reported its libraries yet."),
      );
      return;
    }
    const rows = libraries.map(([name, version]) =>
      el("tr", { "data-library": name }, el("td", { class: "library-name" }, name), el("td", { class: "library-version" }, version)),
    );
    this.popover.replaceChildren(
      heading,
      // The list scrolls on its own: the sentence under it stays in view, whatever the list's length.
      el("div", { class: "libraries-list" }, el("table", { class: "libraries-table" }, el("tbody", {}, ...rows))),
      el(
        "p",
        { class: "libraries-note" },
        "Import any of these in your program. Nothing else can be installed while a program runs.",
      ),
    );
  }
}
