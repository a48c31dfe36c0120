/**
 * A compilation's signature and output types as Inspect shows them. A model
 * passed whole (a Flax NNX module, an optimizer) makes a signature of dozens
 * of arguments: it is cut to a few lines with a button that shows all of it,
 * and the output types keep their width instead of being squeezed to a
 * column of single characters beside it.
 */

import { el } from "../core/dom";

/** Beyond this many characters a signature starts cut to a few lines. */
export const LONG_SIGNATURE_CHARS = 160;

export function signatureCode(signature: string): HTMLElement {
  const long = signature.length > LONG_SIGNATURE_CHARS;
  return el("code", { class: "inspect-signature", "data-long": long, title: long ? null : `(${signature})` }, `(${signature})`);
}

export function outputsCode(outputs: string | null): HTMLElement | null {
  return outputs ? el("code", { class: "inspect-outputs", title: `→ ${outputs}` }, `→ ${outputs}`) : null;
}

/** "Show the whole signature" for a long one inside `holder` (null for a short one). */
export function signatureToggle(signature: string, holder: HTMLElement): HTMLElement | null {
  if (signature.length <= LONG_SIGNATURE_CHARS) return null;
  const button = el("button", { class: "inspect-signature-toggle", type: "button", "aria-expanded": "false",
                                "data-testid": "inspect-signature-toggle" }, "show the whole signature");
  button.addEventListener("click", (ev) => {
    ev.stopPropagation();
    const expanded = holder.toggleAttribute("data-expanded");
    button.setAttribute("aria-expanded", String(expanded));
    button.textContent = expanded ? "show less" : "show the whole signature";
  });
  return button;
}
