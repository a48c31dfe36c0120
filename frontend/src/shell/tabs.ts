/**
 * The results area: a tab per panel, with an optional badge on each tab.
 * A slot is reserved before its panel's factory runs, so the panel's context
 * (setBadge, activate) exists while the panel is being built.
 */

import { el } from "../core/dom";
import type { Panel } from "../panel/types";

export class TabSlot {
  readonly button = el("button", { class: "tab", type: "button", role: "tab", "aria-selected": "false", tabindex: "-1" });
  readonly badge = el("span", { class: "tab-badge", hidden: true });
  readonly pane = el("div", { class: "tab-pane", role: "tabpanel", hidden: true });
  panel: Panel | null = null;

  constructor(private readonly tabs: Tabs) {}

  setBadge(value: string | number | null, tone: "neutral" | "error" = "neutral"): void {
    const text = value === null ? "" : String(value);
    this.badge.textContent = text;
    this.badge.hidden = text === "";
    this.badge.dataset.tone = tone;
  }

  activate(): void {
    this.tabs.activate(this);
  }

  isActive(): boolean {
    return this.tabs.active === this;
  }

  mount(panel: Panel): void {
    this.panel = panel;
    const id = `panel-${panel.id}`;
    this.pane.id = id;
    this.pane.dataset.panel = panel.id;
    this.pane.append(panel.element);
    this.button.id = `tab-${panel.id}`;
    this.button.dataset.panel = panel.id;
    this.button.setAttribute("aria-controls", id);
    this.pane.setAttribute("aria-labelledby", this.button.id);
    this.button.append(el("span", { class: "tab-title" }, panel.title), this.badge);
    this.button.addEventListener("click", () => this.activate());
  }
}

export class Tabs {
  readonly list = el("div", { class: "tab-list", role: "tablist", "aria-label": "Results" });
  readonly panes = el("div", { class: "tab-panes" });
  readonly element = el("section", { class: "results", "aria-label": "Results" }, this.list, this.panes);
  readonly slots: TabSlot[] = [];
  active: TabSlot | null = null;
  /** Called with the panel id whenever another tab comes to the front. */
  onChange: ((id: string | null) => void) | null = null;

  constructor() {
    this.list.addEventListener("keydown", (e) => this.onKey(e));
  }

  reserve(): TabSlot {
    const slot = new TabSlot(this);
    this.slots.push(slot);
    const tool = this.list.querySelector(".tab-tool");
    if (tool) tool.before(slot.button);
    else this.list.append(slot.button);
    this.panes.append(slot.pane);
    if (!this.active) this.activate(slot);
    return slot;
  }

  /** Leaves the tab of panel `id` out of the tab list (it stays reachable from code). */
  hide(id: string): void {
    const slot = this.slots.find((s) => s.panel?.id === id);
    if (slot) slot.button.hidden = true;
  }

  /** Brings the tab of panel `id` to the front; unknown ids are ignored. */
  show(id: string): void {
    const slot = this.slots.find((s) => s.panel?.id === id);
    if (slot) this.activate(slot);
  }

  get activeId(): string | null {
    return this.active?.panel?.id ?? null;
  }

  activate(slot: TabSlot): void {
    const previous = this.active;
    this.active = slot;
    for (const s of this.slots) {
      const on = s === slot;
      s.button.setAttribute("aria-selected", String(on));
      s.button.tabIndex = on ? 0 : -1;
      s.pane.hidden = !on;
    }
    if (previous !== slot) {
      slot.panel?.onShow?.();
      this.onChange?.(slot.panel?.id ?? null);
    }
  }

  private onKey(e: KeyboardEvent): void {
    const step = e.key === "ArrowRight" ? 1 : e.key === "ArrowLeft" ? -1 : 0;
    if (!step || !this.active) return;
    const i = this.slots.indexOf(this.active);
    const next = this.slots[(i + step + this.slots.length) % this.slots.length];
    this.activate(next);
    next.button.focus();
    e.preventDefault();
  }
}
