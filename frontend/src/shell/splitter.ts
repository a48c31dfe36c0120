/**
 * The draggable divider between the editor and the results. It sets the
 * CSS variable --split (the editor's share, in %) on the workspace; the
 * stylesheet decides whether that is a width (wide window) or a height
 * (narrow window, panes stacked). The share is remembered per browser.
 */

import { el } from "../core/dom";

const MIN_SHARE = 15;
const MAX_SHARE = 85;
const KEY_STEP = 5;

export class Splitter {
  readonly element = el("div", {
    class: "splitter",
    role: "separator",
    tabindex: "0",
    "aria-label": "Resize the editor and results",
    "aria-valuemin": MIN_SHARE,
    "aria-valuemax": MAX_SHARE,
  });
  private container: HTMLElement | null = null;
  private share: number;

  constructor(private readonly storageKey: string) {
    const saved = Number(localStorage.getItem(storageKey));
    this.share = saved >= MIN_SHARE && saved <= MAX_SHARE ? saved : 52;
  }

  attach(container: HTMLElement): void {
    this.container = container;
    this.apply();
    this.element.addEventListener("pointerdown", (e) => this.onPointerDown(e));
    this.element.addEventListener("keydown", (e) => {
      const delta = { ArrowLeft: -KEY_STEP, ArrowUp: -KEY_STEP, ArrowRight: KEY_STEP, ArrowDown: KEY_STEP }[e.key];
      if (delta === undefined) return;
      this.set(this.share + delta);
      e.preventDefault();
    });
    this.element.addEventListener("dblclick", () => this.set(52));
  }

  private stacked(): boolean {
    return this.container ? getComputedStyle(this.container).gridTemplateRows.split(" ").length > 1 : false;
  }

  private onPointerDown(e: PointerEvent): void {
    if (!this.container || e.button !== 0) return;
    const box = this.container.getBoundingClientRect();
    const vertical = this.stacked();
    this.element.setPointerCapture(e.pointerId);
    document.body.classList.add("is-resizing");
    const move = (ev: PointerEvent) => {
      const share = vertical ? ((ev.clientY - box.top) / box.height) * 100 : ((ev.clientX - box.left) / box.width) * 100;
      this.set(share, false);
    };
    const up = () => {
      this.element.removeEventListener("pointermove", move);
      this.element.removeEventListener("pointerup", up);
      this.element.removeEventListener("pointercancel", up);
      document.body.classList.remove("is-resizing");
      localStorage.setItem(this.storageKey, String(Math.round(this.share)));
    };
    this.element.addEventListener("pointermove", move);
    this.element.addEventListener("pointerup", up);
    this.element.addEventListener("pointercancel", up);
    e.preventDefault();
  }

  private set(share: number, save = true): void {
    this.share = Math.min(MAX_SHARE, Math.max(MIN_SHARE, share));
    this.apply();
    if (save) localStorage.setItem(this.storageKey, String(Math.round(this.share)));
  }

  private apply(): void {
    this.container?.style.setProperty("--split", `${this.share}%`);
    this.element.setAttribute("aria-valuenow", String(Math.round(this.share)));
  }
}
