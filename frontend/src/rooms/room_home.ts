/**
 * The home page's way into rooms: "Start a room" (the current code becomes
 * the room's, and the page moves to the presenter link) and join by code.
 */

import { el } from "../core/dom";
import { Popup } from "../core/popup";
import type { PlaygroundEditor } from "../editor/editor";

interface CreatedRoom {
  room: string;
  presenter_url: string;
}

const CODE_CHARS = /^[2-9A-HJKMNP-Z]{10}$|^[2-9A-HJKMNP-Z]{6}$/;

/** "jax-7q4km 2xp9r", "7Q4KM2XP9R" -> "jax-7Q4KM-2XP9R" (six-character codes of older rooms stay as typed); null if no code. */
function roomCode(text: string): string | null {
  let chars = text.toUpperCase().replace(/[\s-]/g, "");
  if ((chars.length === 13 || chars.length === 9) && chars.startsWith("JAX")) chars = chars.slice(3);
  if (!CODE_CHARS.test(chars)) return null;
  return chars.length === 10 ? `jax-${chars.slice(0, 5)}-${chars.slice(5)}` : `jax-${chars}`;
}

export function mountRoomEntry(topbar: HTMLElement, editor: PlaygroundEditor): HTMLElement {
  const message = el("p", { class: "room-menu-message", role: "alert", "data-testid": "room-menu-message" });
  const input = el("input", {
    class: "room-code-input", type: "text", placeholder: "jax-7Q4KM-2XP9R", autocomplete: "off", spellcheck: "false",
    "aria-label": "Room code", "data-testid": "room-code-input",
  });
  const join = () => {
    const code = roomCode(input.value);
    if (code === null) {
      message.textContent = "A room code looks like jax-7Q4KM-2XP9R (ten letters or digits after jax-).";
      return;
    }
    window.location.assign(`/r/${code}`);
  };
  input.addEventListener("keydown", (ev) => {
    if (ev.key === "Enter") join();
  });
  const start = el(
    "button",
    { class: "btn", type: "button", "data-testid": "room-start", title: "Present this code live to a room" },
    "Start a room",
  );
  start.addEventListener("click", async () => {
    start.disabled = true;
    message.textContent = "";
    try {
      const response = await fetch("/api/rooms", {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ program: editor.getCode() }),
      });
      const body = (await response.json()) as CreatedRoom & { message?: string };
      if (!response.ok) throw new Error(body.message ?? `the server answered ${response.status}`);
      window.location.assign(body.presenter_url);
    } catch (err) {
      message.textContent = `Could not start a room: ${(err as Error).message}`;
      start.disabled = false;
    }
  });
  const panel = el(
    "div",
    { class: "room-menu-panel", "data-testid": "room-menu-panel" },
    el("p", { class: "room-menu-lead" }, "Teach live: everyone who joins sees your code, cursor and output as you go."),
    start,
    el("div", { class: "room-menu-join" }, input,
       el("button", { class: "btn btn-ghost", type: "button", "data-testid": "room-join", onclick: join }, "Join")),
    message,
  );
  const toggle = el(
    "button",
    { class: "btn btn-ghost", type: "button", "data-testid": "room-menu",
      title: "Start a workshop room, or join one by its code" },
    "Room",
  );
  new Popup({ button: toggle, popup: panel, kind: "dialog", label: "Rooms" });
  const menu = el("div", { class: "room-menu" }, toggle, panel);
  topbar.querySelector(".topbar-spacer")?.before(menu);
  return menu;
}
