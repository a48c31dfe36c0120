// The header's popups: the menu button pattern (roles, aria-expanded, arrow keys, Escape back to the button),
// popovers of other controls, and one popup open at a time.
import { afterEach, describe, expect, it } from "vitest";
import { el } from "../src/core/dom";
import { Popup } from "../src/core/popup";

function key(target: Element, name: string): KeyboardEvent {
  const event = new KeyboardEvent("keydown", { key: name, bubbles: true, cancelable: true });
  target.dispatchEvent(event);
  return event;
}

function exportMenu() {
  const button = el("button", { type: "button" }, "Export");
  const menu = el("div", {},
    el("button", { type: "button", role: "menuitem", "data-item": "py" }, ".py"),
    el("button", { type: "button", role: "menuitem", "data-item": "ipynb" }, ".ipynb"));
  document.body.append(button, menu);
  return { button, menu, popup: new Popup({ button, popup: menu, kind: "menu" }) };
}

function focused(): string | undefined {
  return (document.activeElement as HTMLElement | null)?.dataset.item ?? document.activeElement?.textContent ?? undefined;
}

afterEach(() => {
  document.body.replaceChildren();
  key(document.body, "Escape"); // whatever a test left open
});

describe("a menu button", () => {
  it("names its popup as a menu and says whether it is open", () => {
    const { button, menu } = exportMenu();
    expect(button.getAttribute("aria-haspopup")).toBe("menu");
    expect(button.getAttribute("aria-expanded")).toBe("false");
    expect(button.getAttribute("aria-controls")).toBe(menu.id);
    expect(menu.getAttribute("role")).toBe("menu");
    expect(menu.getAttribute("aria-labelledby")).toBe(button.id);
    expect(menu.hidden).toBe(true);
  });

  it("opens on ArrowDown at the first item, moves with the arrows (wrapping), Home and End", () => {
    const { button, menu } = exportMenu();
    button.focus();
    expect(key(button, "ArrowDown").defaultPrevented).toBe(true);
    expect(menu.hidden).toBe(false);
    expect(button.getAttribute("aria-expanded")).toBe("true");
    expect(focused()).toBe("py");
    key(document.activeElement!, "ArrowDown");
    expect(focused()).toBe("ipynb");
    key(document.activeElement!, "ArrowDown");
    expect(focused()).toBe("py");
    key(document.activeElement!, "ArrowUp");
    expect(focused()).toBe("ipynb");
    key(document.activeElement!, "Home");
    expect(focused()).toBe("py");
    key(document.activeElement!, "End");
    expect(focused()).toBe("ipynb");
  });

  it("opens on ArrowUp at the last item", () => {
    const { button } = exportMenu();
    button.focus();
    key(button, "ArrowUp");
    expect(focused()).toBe("ipynb");
  });

  it("closes on Escape and puts focus back on its button", () => {
    const { button, menu } = exportMenu();
    button.click();
    expect(menu.hidden).toBe(false);
    key(document.activeElement!, "Escape");
    expect(menu.hidden).toBe(true);
    expect(button.getAttribute("aria-expanded")).toBe("false");
    expect(document.activeElement).toBe(button);
  });
});

describe("popups together", () => {
  it("open one at a time", () => {
    const first = exportMenu();
    const button = el("button", { type: "button" }, "Room");
    const panel = el("div", {}, el("input", { type: "text" }), el("button", { type: "button" }, "Join"));
    document.body.append(button, panel);
    const room = new Popup({ button, popup: panel, kind: "dialog", label: "Rooms" });
    first.button.click();
    room.open();
    expect(first.menu.hidden).toBe(true);
    expect(first.button.getAttribute("aria-expanded")).toBe("false");
    expect(panel.hidden).toBe(false);
    expect(panel.getAttribute("role")).toBe("dialog");
    expect(panel.getAttribute("aria-label")).toBe("Rooms");
    expect(button.getAttribute("aria-haspopup")).toBe("dialog");
  });

  it("a dialog's arrows move among its controls but leave a select's to it", () => {
    const button = el("button", { type: "button" }, "Share");
    const select = el("select", {}, el("option", {}, "a"), el("option", {}, "b"));
    const panel = el("div", {}, el("button", { type: "button" }, "Copy"), select, el("button", { type: "button" }, "Done"));
    document.body.append(button, panel);
    const popup = new Popup({ button, popup: panel, kind: "dialog" });
    popup.open("first");
    expect(focused()).toBe("Copy");
    key(document.activeElement!, "ArrowDown");
    expect(document.activeElement).toBe(select);
    expect(key(select, "ArrowDown").defaultPrevented).toBe(false);
    expect(document.activeElement).toBe(select);
  });

  it("a click outside closes the open popup; a click inside does not", () => {
    const { button, menu } = exportMenu();
    button.click();
    menu.firstElementChild!.dispatchEvent(new MouseEvent("mousedown", { bubbles: true }));
    expect(menu.hidden).toBe(false);
    document.body.dispatchEvent(new MouseEvent("mousedown", { bubbles: true }));
    expect(menu.hidden).toBe(true);
  });
});
