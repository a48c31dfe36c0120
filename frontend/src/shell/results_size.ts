/**
 * Enlarging the results: a button at the end of the results' tabs gives them
 * the whole workspace (the editor steps aside) and gives the editor back.
 * On a phone the stacked results are otherwise a strip of a few hundred
 * pixels under the editor.
 */

import { el } from "../core/dom";

const ENLARGED = "results-enlarged";

export function resultsSizeButton(): HTMLButtonElement {
  const button = el("button", {
    class: "tab-tool", type: "button", "aria-pressed": "false", "data-testid": "results-enlarge",
    title: "Give the results the whole workspace", "aria-label": "Enlarge the results",
  }, "⤢");
  button.addEventListener("click", () => {
    const enlarged = document.body.classList.toggle(ENLARGED);
    button.setAttribute("aria-pressed", String(enlarged));
    button.textContent = enlarged ? "⤡" : "⤢";
    button.title = enlarged ? "Show the editor again" : "Give the results the whole workspace";
    button.setAttribute("aria-label", enlarged ? "Show the editor again" : "Enlarge the results");
  });
  return button;
}
