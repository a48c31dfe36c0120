/** Small DOM helpers: build elements without innerHTML (user output is never parsed as HTML). */

type Child = Node | string | null | undefined | false;
type AttrValue = string | number | boolean | null | undefined | EventListener;

/**
 * `el("button", { class: "run", onclick: run, "aria-label": "Run" }, "Run")`.
 * Keys starting with "on" add listeners; `true` sets an empty attribute;
 * null, undefined and false leave the attribute out.
 */
export function el<K extends keyof HTMLElementTagNameMap>(
  tag: K,
  attrs: Record<string, AttrValue> = {},
  ...children: Child[]
): HTMLElementTagNameMap[K] {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (value === null || value === undefined || value === false) continue;
    if (key.startsWith("on") && typeof value === "function") {
      node.addEventListener(key.slice(2), value);
    } else if (key === "class") {
      node.className = String(value);
    } else {
      node.setAttribute(key, value === true ? "" : String(value));
    }
  }
  for (const child of children) {
    if (child === null || child === undefined || child === false) continue;
    node.append(child);
  }
  return node;
}

/** "120 ms", "1.23 s", "12.3 s", "2 min 05 s". */
export function formatDuration(ms: number): string {
  if (ms < 1000) return `${Math.round(ms)} ms`;
  const s = ms / 1000;
  if (s < 10) return `${s.toFixed(2)} s`;
  if (s < 60) return `${s.toFixed(1)} s`;
  const whole = Math.floor(s);
  return `${Math.floor(whole / 60)} min ${String(whole % 60).padStart(2, "0")} s`;
}

/** True on macOS/iOS, where the run shortcut is Cmd rather than Ctrl. */
export const isApple = /Mac|iPhone|iPad/.test(navigator.platform || navigator.userAgent);
export const runShortcutLabel = isApple ? "⌘ Enter" : "Ctrl Enter";
export const stopShortcutLabel = isApple ? "⌘ ." : "Ctrl .";

/** Ctrl+. (Cmd+. on a Mac): the conventional "stop" key, free in the editor and the browser. */
export function isStopShortcut(e: KeyboardEvent): boolean {
  const mod = isApple ? e.metaKey && !e.ctrlKey : e.ctrlKey && !e.metaKey;
  return mod && !e.altKey && !e.shiftKey && e.key === ".";
}

/** Ctrl+Enter (Cmd+Enter on a Mac): run, wherever focus is on the page. */
export function isRunShortcut(e: KeyboardEvent): boolean {
  const mod = isApple ? e.metaKey && !e.ctrlKey : e.ctrlKey && !e.metaKey;
  return mod && !e.altKey && !e.shiftKey && e.key === "Enter";
}

let idCounter = 0;

/** An id no other element of the page has (for aria-controls, aria-describedby). */
export function uniqueId(prefix: string): string {
  let id: string;
  do id = `${prefix}-${++idCounter}`;
  while (document.getElementById(id));
  return id;
}
