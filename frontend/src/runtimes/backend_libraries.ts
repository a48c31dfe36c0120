/**
 * "What's installed": a button by the backend picker opening a popover that
 * lists the libraries a program can import on the chosen backend, with their
 * versions, as the backend's workers reported them (GET /api/backends).
 */

import { el } from "../core/dom";
import { Popup } from "../core/popup";
import type { BackendInfo } from "../wire/protocol";

export class LibrariesPopover {
  readonly button = el(
    "button",
    {
      type: "button",
      class: "btn btn-ghost backend-libraries",
      title: "Libraries installed on this backend",
      "data-testid": "backend-libraries",
    },
    el("span", { class: "libraries-label-long" }, "Libraries"),
    el("span", { class: "libraries-label-short" }, "Libs"),
  );
  readonly popover = el("div", { class: "libraries-popover", "data-testid": "libraries-popover" });
  readonly element = el("span", { class: "libraries-anchor" }, this.button, this.popover);
  private readonly popup = new Popup({
    button: this.button, popup: this.popover, kind: "dialog", label: "Installed libraries", onOpen: () => this.render(),
  });
  private backend: BackendInfo | undefined;

  /** The backend whose libraries to show; an open popover follows the picker. */
  show(backend: BackendInfo | undefined): void {
    this.backend = backend;
    this.button.disabled = !backend;
    if (this.popup.isOpen) this.render();
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
      // Focusable, so a keyboard scrolls it with the arrow keys.
      el("div", { class: "libraries-list", tabindex: "0", role: "region", "aria-label": "Libraries and versions" }, el("table", { class: "libraries-table" }, el("tbody", {}, ...rows))),
      el(
        "p",
        { class: "libraries-note" },
        "Import any of these in your program. Nothing else can be installed while a program runs.",
      ),
    );
  }
}
