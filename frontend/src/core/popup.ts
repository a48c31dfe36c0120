/**
 * Popups that hang off a header button: the Export menu, the Room and
 * Libraries popovers, the Share dialog. One is open at a time; Escape, a click
 * outside, or opening another closes it, and focus that was inside goes back
 * to its button.
 *
 * Two kinds, after the WAI-ARIA patterns they follow:
 * - "menu" (menu button): the popup is `role=menu` of `role=menuitem`
 *   buttons. Opening from the keyboard (Enter, Space, ArrowDown) focuses the
 *   first item, ArrowUp the last; ArrowUp/ArrowDown, Home and End move among
 *   the items; Tab closes it and moves on.
 * - "dialog" (a popover of other controls: a text field, a table): the popup
 *   is `role=dialog`; ArrowUp/ArrowDown move among its controls (but for
 *   those that use them: a select, a scrolling list), which Tab also reaches.
 */

import { uniqueId } from "./dom";

export type PopupKind = "menu" | "dialog";

export interface PopupOptions {
  button: HTMLButtonElement;
  popup: HTMLElement;
  kind: PopupKind;
  /** The popup's accessible name (menus are named by their button). */
  label?: string;
  /** Clicks inside this element do not close the popup (default: the button and the popup). */
  within?: HTMLElement;
  /** Called before the popup shows (to fill it in). */
  onOpen?: () => void;
  /** Called after it closed. */
  onClose?: () => void;
  /** False: the button does something else when clicked (Share makes a link) and opens the popup itself. */
  toggleOnClick?: boolean;
}

/** Where focus goes when a popup opens. */
export type OpenFocus = "first" | "last" | "none";

const FOCUSABLE = "button:not([disabled]), input:not([disabled]), select:not([disabled]), textarea:not([disabled]), a[href], [tabindex]:not([tabindex='-1'])";

let openPopup: Popup | null = null;

export class Popup {
  private readonly options: PopupOptions;

  constructor(options: PopupOptions) {
    this.options = options;
    const { button, popup, kind } = options;
    button.setAttribute("aria-haspopup", kind);
    button.setAttribute("aria-expanded", "false");
    popup.setAttribute("role", kind);
    if (options.label) popup.setAttribute("aria-label", options.label);
    if (!popup.id) popup.id = uniqueId(kind === "menu" ? "menu" : "popup");
    button.setAttribute("aria-controls", popup.id);
    if (kind === "menu") {
      if (!button.id) button.id = uniqueId("menu-button");
      popup.setAttribute("aria-labelledby", button.id);
    }
    popup.hidden = true;

    button.addEventListener("click", (e) => {
      if (options.toggleOnClick === false) return;
      if (this.isOpen) {
        this.close(false);
        return;
      }
      // A click from the keyboard (Enter, Space) has no pointer position: focus the first item, as menus do.
      const fromKeyboard = e.detail === 0;
      this.open(kind === "menu" || fromKeyboard ? "first" : "none");
    });
    button.addEventListener("keydown", (e) => {
      if (kind !== "menu" || (e.key !== "ArrowDown" && e.key !== "ArrowUp")) return;
      e.preventDefault();
      this.open(e.key === "ArrowDown" ? "first" : "last");
    });
    popup.addEventListener("keydown", (e) => this.onPopupKey(e));
    popup.addEventListener("focusout", (e) => {
      // Tab out of a menu closes it (focus moved on, so it does not come back to the button).
      if (kind !== "menu" || !this.isOpen) return;
      const next = e.relatedTarget as Node | null;
      if (next && !popup.contains(next) && next !== button) this.close(false);
    });
  }

  get isOpen(): boolean {
    return !this.options.popup.hidden;
  }

  get popup(): HTMLElement {
    return this.options.popup;
  }

  /** A click on `target` belongs to this popup (it does not close it). */
  holds(target: Node): boolean {
    const { within, popup, button } = this.options;
    return within ? within.contains(target) : popup.contains(target) || button.contains(target);
  }

  open(focus: OpenFocus = "none"): void {
    if (openPopup && openPopup !== this) openPopup.close(false);
    this.options.onOpen?.();
    this.options.popup.hidden = false;
    this.options.button.setAttribute("aria-expanded", "true");
    openPopup = this;
    const items = this.items();
    if (focus === "first") (items[0] ?? this.focusTarget())?.focus();
    else if (focus === "last") (items[items.length - 1] ?? this.focusTarget())?.focus();
  }

  /** `returnFocus`: put focus back on the button (Escape, choosing an item); always so when focus was inside. */
  close(returnFocus = true): void {
    if (!this.isOpen) return;
    const { popup, button } = this.options;
    const hadFocus = popup.contains(document.activeElement);
    popup.hidden = true;
    button.setAttribute("aria-expanded", "false");
    if (openPopup === this) openPopup = null;
    if (returnFocus || hadFocus || document.activeElement === document.body) button.focus();
    this.options.onClose?.();
  }

  /** The controls arrow keys move among: menu items, or a dialog's focusable controls. */
  private items(): HTMLElement[] {
    const { popup, kind } = this.options;
    const selector = kind === "menu" ? "[role=menuitem]:not([disabled])" : FOCUSABLE;
    return [...popup.querySelectorAll<HTMLElement>(selector)].filter((node) => !node.closest("[hidden]"));
  }

  /** A dialog with no controls (a table to read) takes focus itself, so arrows scroll it and Escape closes it. */
  private focusTarget(): HTMLElement {
    const { popup } = this.options;
    if (!popup.hasAttribute("tabindex")) popup.tabIndex = -1;
    return popup;
  }

  private onPopupKey(e: KeyboardEvent): void {
    // Controls that use the arrow keys themselves keep them: a select's options, a scrolling list.
    if (this.options.kind === "dialog" && (e.target as Element).matches?.("select, textarea, [role=region]")) return;
    const items = this.items();
    const current = items.indexOf(document.activeElement as HTMLElement);
    let next = -1;
    if (e.key === "ArrowDown") next = current < 0 ? 0 : (current + 1) % items.length;
    else if (e.key === "ArrowUp") next = current < 0 ? items.length - 1 : (current - 1 + items.length) % items.length;
    else if (this.options.kind === "menu" && e.key === "Home") next = 0;
    else if (this.options.kind === "menu" && e.key === "End") next = items.length - 1;
    else return;
    if (!items.length) return; // nothing to move to: the keys scroll what is focused
    e.preventDefault();
    items[next].focus();
  }
}

// Page-wide: Escape and a click outside close the open popup.
document.addEventListener("keydown", (e) => {
  if (e.key !== "Escape" || !openPopup) return;
  e.preventDefault();
  openPopup.close(true);
}, true);

document.addEventListener("mousedown", (e) => {
  if (openPopup && !openPopup.holds(e.target as Node)) openPopup.close(false);
});

/** The popup that is open, if any (tests and keyboard handlers that yield to it). */
export function currentPopup(): Popup | null {
  return openPopup;
}
