/**
 * The results area: a tab per panel, with an optional badge on each tab.
 * A slot is reserved before its panel's factory runs, so the panel's context
 * (setBadge, activate) exists while the panel is being built.
 *
 * The tab bar holds the tab list and, beside it (never inside the tablist,
 * which may own only tabs), the results' tools. When the tabs are wider than
 * the bar (a phone, a narrow embed) the list scrolls sideways: its hidden
 * end fades, and a chevron button on that side scrolls it; the tab brought
 * forward, by click or arrow key, is scrolled into view.
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
    // The panel's heading, for screen readers' outline: the page's h1, each panel's h2, sections' h3.
    this.pane.append(el("h2", { class: "visually-hidden" }, panel.title), panel.element);
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
  /** The results' own controls, at the end of the tab bar (the enlarge button). */
  readonly tools = el("div", { class: "tab-tools" });
  private readonly scrollBack = scrollButton("back");
  private readonly scrollOn = scrollButton("on");
  private readonly scroller = el("div", { class: "tab-scroller" }, this.scrollBack, this.list, this.scrollOn);
  readonly bar = el("div", { class: "tab-bar" }, this.scroller, this.tools);
  readonly panes = el("div", { class: "tab-panes" });
  readonly element = el("section", { class: "results", "aria-label": "Results" }, this.bar, this.panes);
  readonly slots: TabSlot[] = [];
  active: TabSlot | null = null;
  /** Called with the panel id whenever another tab comes to the front. */
  onChange: ((id: string | null) => void) | null = null;

  constructor() {
    this.list.addEventListener("keydown", (e) => this.onKey(e));
    this.list.addEventListener("scroll", () => this.markOverflow(), { passive: true });
    this.scrollBack.addEventListener("click", () => this.scrollBy(-1));
    this.scrollOn.addEventListener("click", () => this.scrollBy(1));
    // The chevrons lie over the list's ends, so showing them never changes its width (no resize loop).
    new ResizeObserver(() => this.markOverflow()).observe(this.list);
  }

  reserve(): TabSlot {
    const slot = new TabSlot(this);
    this.slots.push(slot);
    this.list.append(slot.button);
    this.panes.append(slot.pane);
    if (!this.active) this.activate(slot);
    return slot;
  }

  /** Leaves the tab of panel `id` out of the tab list (it stays reachable from code). */
  hide(id: string): void {
    const slot = this.slots.find((s) => s.panel?.id === id);
    if (slot) slot.button.hidden = true;
    this.markOverflow();
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
    if (slot.button.isConnected) slot.button.scrollIntoView({ block: "nearest", inline: "nearest" });
  }

  /** ←/→ step through the shown tabs (wrapping), Home and End go to the first and last. */
  private onKey(e: KeyboardEvent): void {
    const shown = this.slots.filter((s) => !s.button.hidden);
    if (!this.active || !shown.length) return;
    const i = shown.indexOf(this.active);
    let next: TabSlot;
    if (e.key === "ArrowRight") next = shown[(i + 1) % shown.length];
    else if (e.key === "ArrowLeft") next = shown[(i - 1 + shown.length) % shown.length];
    else if (e.key === "Home") next = shown[0];
    else if (e.key === "End") next = shown[shown.length - 1];
    else return;
    this.activate(next);
    next.button.focus();
    e.preventDefault();
  }

  /** Says which ends of the tab list are scrolled out of view: the fade and chevron on that side show. */
  private markOverflow(): void {
    const { scrollLeft, scrollWidth, clientWidth } = this.list;
    const back = scrollLeft > 1;
    const on = scrollLeft + clientWidth < scrollWidth - 1;
    this.scroller.dataset.overflow = [back ? "back" : "", on ? "on" : ""].join(" ").trim();
    this.scrollBack.hidden = !back;
    this.scrollOn.hidden = !on;
  }

  private scrollBy(direction: 1 | -1): void {
    this.list.scrollBy({ left: direction * this.list.clientWidth * 0.7, behavior: "smooth" });
  }
}

/** A chevron over one end of the tab list. Pointer only: keyboard users move through the tabs with the arrow keys,
 * which scroll the tab they reach into view, so the chevron is kept out of the tab order and of the reading. */
function scrollButton(side: "back" | "on"): HTMLButtonElement {
  return el("button", {
    class: `tab-scroll tab-scroll-${side}`, type: "button", tabindex: "-1", "aria-hidden": "true", hidden: true,
    title: side === "on" ? "More tabs" : "Earlier tabs", "data-testid": `tabs-scroll-${side}`,
  }, side === "on" ? "›" : "‹");
}
