/**
 * The embed view (`/e/{id}`) in slides and docs: the code is read-only until
 * the viewer presses Edit, so scrolling or clicking through a talk never
 * changes it by accident. Run works either way.
 */

import { Compartment, EditorState, Prec, StateEffect } from "@codemirror/state";
import type { EditorView } from "@codemirror/view";
import { el } from "../core/dom";

export function lockUntilEdit(view: EditorView, topbar: HTMLElement): HTMLButtonElement {
  const lock = new Compartment();
  // The facet takes its first value: highest precedence puts this one before the editor's own `false`.
  view.dispatch({ effects: StateEffect.appendConfig.of(lock.of(Prec.highest(EditorState.readOnly.of(true)))) });
  view.dom.classList.add("share-readonly");
  const button = el(
    "button",
    { class: "btn btn-ghost share-edit", type: "button", title: "Make the code editable", "data-testid": "edit" },
    "Edit",
  );
  button.addEventListener("click", () => {
    view.dispatch({ effects: lock.reconfigure([]) });
    view.dom.classList.remove("share-readonly");
    button.remove();
    view.focus();
  });
  const spacer = topbar.querySelector(".topbar-spacer");
  if (spacer) spacer.after(button);
  else topbar.append(button);
  return button;
}
