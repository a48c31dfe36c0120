/**
 * Under an out-of-memory error that a jitted call raised: which function ran out, its peak, and a button
 * that opens Inspect's Memory view of that compilation (the `jaxplay:show-compiled` event Inspect listens
 * to). When XLA ran out while compiling, there is no compilation to show: the line says so.
 */

import { el } from "../core/dom";
import { formatBytes } from "../ir/inspect_format";
import { HINT_ACTIONS } from "../panel/hint_actions";
import type { ErrorEvent } from "../wire/protocol";

/** Asks Inspect to show compilation `key`, on its Memory view. */
export function showMemoryOf(key: string): void {
  window.dispatchEvent(new CustomEvent("jaxplay:show-compiled", { detail: { key, view: "memory" } }));
}

export function outOfMemoryHint(ev: ErrorEvent): HTMLElement | null {
  const link = ev.out_of_memory;
  if (!link) return null;
  const where = link.line !== null ? ` (line ${link.line})` : "";
  if (link.phase === "compile" || link.key === null) {
    return el("div", { class: "output-error-memory", "data-testid": "hint-memory" },
      `XLA ran out of memory ${link.phase === "compile" ? "compiling" : "running"} ${link.fn}${where}.`);
  }
  const key = link.key;
  const peak = link.peak_bytes !== null ? `: its peak is ${formatBytes(link.peak_bytes)}` : "";
  const at = link.instruction ? `, at ${link.instruction}` : "";
  return el(
    "div",
    { class: "output-error-memory", "data-testid": "hint-memory" },
    el("span", {}, `${link.fn}${where} ran out of memory${peak}${at}.`),
    el("button", { class: "btn", type: "button", "data-testid": "hint-memory-open", onclick: () => showMemoryOf(key) },
      "Where the memory goes"),
  );
}

HINT_ACTIONS.push(outOfMemoryHint);
