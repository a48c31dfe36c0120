/**
 * The presenter's deck editor: the room's slides as a list (each a shared
 * snippet), built from share links, ids or the code in the editor, in an
 * order the presenter arranges, each one previewable and removable. Nothing
 * reaches the room until "Save deck": the room then moves to the first
 * slide, or stays on the slide on screen when it is still in the deck.
 *
 * A dialog of the page's own (no `window.prompt`, which some embedded
 * browsers block). Slides are read from `GET /api/snippets/{id}`; the
 * current code becomes a slide through `POST /api/snippets`, as Share does.
 */

import { el } from "../core/dom";

/** What a presenter pasted that is not a slide, and why. */
export interface RejectedEntry {
  text: string;
  why: string;
}

const SNIPPET_ID = /^[a-z2-7]{1,52}$/;
const SCHEME = /^[a-z][a-z0-9+.-]*:\/\//i;
const SHARE_PATH = /^\/[se]\/([^/?#]+)\/?$/;

/**
 * Snippet ids from what a presenter pastes: ids or share links of this server (`origin`), separated by
 * spaces, commas or lines, in order. Every other entry is returned with the reason it is not a slide.
 */
export function parseDeck(text: string, origin: string): { ids: string[]; rejected: RejectedEntry[] } {
  const ids: string[] = [];
  const rejected: RejectedEntry[] = [];
  const here = new URL(origin);
  for (const token of text.split(/[\s,]+/).filter(Boolean)) {
    if (!token.includes("/")) {
      if (SNIPPET_ID.test(token)) ids.push(token);
      else rejected.push({ text: token, why: "malformed: a snippet id has only the letters a–z and the digits 2–7" });
      continue;
    }
    let url: URL;
    try {
      url = SCHEME.test(token) ? new URL(token) : token.startsWith("/") ? new URL(token, here) : new URL(`${here.protocol}//${token}`);
    } catch {
      rejected.push({ text: token, why: "malformed: not a link" });
      continue;
    }
    if (url.host !== here.host || url.protocol !== here.protocol) {
      rejected.push({ text: token, why: `not a link of this server (${url.protocol}//${url.host}): share it here first` });
      continue;
    }
    const id = SHARE_PATH.exec(url.pathname)?.[1];
    if (id === undefined) {
      rejected.push({ text: token, why: "malformed: a share link ends in /s/ and the snippet's id" });
    } else if (!SNIPPET_ID.test(id)) {
      rejected.push({ text: token, why: "malformed: a snippet id has only the letters a–z and the digits 2–7" });
    } else {
      ids.push(id);
    }
  }
  return { ids, rejected };
}

interface Slide {
  id: string;
  /** The snippet's code once loaded; null while loading; undefined when the server has no such snippet. */
  code: string | null | undefined;
  recorded: boolean;
}

export interface DeckEditorOptions {
  deck: readonly string[];
  position: number;
  /** The editor's code now, for "Add the current code". */
  currentCode(): string;
  /** Sends the deck; `position`: the slide to show (the one on screen when it stays in the deck). */
  save(snippets: string[], position: number): void;
}

const PREVIEW_LINES = 14;

/** The slide's name in the list: its first comment line, else its first line of code. */
export function slideTitle(code: string): string {
  const lines = code.split("\n").map((line) => line.trim()).filter(Boolean);
  const comment = lines.find((line) => line.startsWith("#") && line.replace(/^#+!?/, "").trim());
  const title = comment ? comment.replace(/^#+/, "").trim() : lines[0] ?? "(empty)";
  return title.length > 70 ? `${title.slice(0, 69)}…` : title;
}

export class DeckEditor {
  readonly element: HTMLElement;
  private readonly slides: Slide[];
  private readonly list = el("ol", { class: "room-deck-list", "data-testid": "room-deck-list" });
  private readonly input = el("input", {
    class: "room-deck-input", type: "text", placeholder: "Share links or snippet ids", autocomplete: "off",
    spellcheck: "false", "aria-label": "Share links or snippet ids to add", "data-testid": "room-deck-input",
  });
  private readonly message = el("p", { class: "room-deck-message", role: "alert", "data-testid": "room-deck-message" });
  /** Entries of the last Add that are not slides, each with why; they stay in the input to be fixed. */
  private readonly rejected = el("ul", { class: "room-deck-rejected", "data-testid": "room-deck-rejected", role: "alert" });
  private readonly saveButton: HTMLButtonElement;
  private readonly onScreen: string | null;
  private previewed: string | null = null;
  private readonly returnFocus: Element | null;

  constructor(private readonly options: DeckEditorOptions) {
    this.returnFocus = document.activeElement;
    this.onScreen = options.deck[options.position] ?? null;
    this.slides = options.deck.map((id) => this.load(id));
    this.saveButton = el("button", { class: "btn btn-primary", type: "button", "data-testid": "room-deck-save",
                                     onclick: () => this.save() }, "Save deck");
    this.input.addEventListener("keydown", (ev) => {
      if (ev.key === "Enter") this.addFromInput();
    });
    const panel = el(
      "div",
      { class: "room-deck-dialog", role: "dialog", "aria-modal": "true", "aria-labelledby": "room-deck-title",
        "data-testid": "room-deck-editor" },
      el("h2", { class: "room-deck-title", id: "room-deck-title" }, "Deck"),
      el("p", { class: "room-deck-lead" },
         "Slides are shared snippets, shown in this order; ◀ ▶ step through them for everyone in the room."),
      this.list,
      el("div", { class: "room-deck-add" }, this.input,
         el("button", { class: "btn", type: "button", "data-testid": "room-deck-add", onclick: () => this.addFromInput() },
            "Add"),
         el("button", { class: "btn btn-ghost", type: "button", "data-testid": "room-deck-add-current",
                        title: "Share the code in the editor and add it as a slide", onclick: () => void this.addCurrent() },
            "Add the current code")),
      this.rejected,
      this.message,
      el("div", { class: "room-deck-actions" },
         el("button", { class: "btn btn-ghost", type: "button", "data-testid": "room-deck-cancel", onclick: () => this.close() },
            "Cancel"),
         this.saveButton),
    );
    this.element = el("div", { class: "room-deck-backdrop", onmousedown: (ev: Event) => {
      if (ev.target === this.element) this.close();
    } }, panel);
    this.element.addEventListener("keydown", (ev) => {
      if (ev.key === "Escape") {
        ev.stopPropagation();
        this.close();
      }
    });
    document.body.append(this.element);
    this.render();
    this.input.focus();
  }

  private load(id: string): Slide {
    const slide: Slide = { id, code: null, recorded: false };
    void fetch(`/api/snippets/${encodeURIComponent(id)}`)
      .then(async (response) => {
        if (!response.ok) {
          slide.code = undefined;
          return;
        }
        const body = (await response.json()) as { code?: unknown; recorded_run?: unknown };
        slide.code = typeof body.code === "string" ? body.code : "";
        slide.recorded = Array.isArray(body.recorded_run) && body.recorded_run.length > 0;
      })
      .catch(() => {
        slide.code = undefined;
      })
      .finally(() => this.render());
    return slide;
  }

  private addFromInput(): void {
    const text = this.input.value.trim();
    if (!text) return;
    const { ids, rejected } = parseDeck(text, window.location.origin);
    this.rejected.replaceChildren(...rejected.map((entry) =>
      el("li", { "data-entry": entry.text }, el("code", {}, entry.text), `: ${entry.why}`)));
    // What was not added stays in the input, to be fixed and added again.
    this.input.value = rejected.map((entry) => entry.text).join(" ");
    this.message.textContent = ids.length || rejected.length
      ? ""
      : "Paste share links (…/s/k3v7q2xa) or snippet ids, separated by spaces or commas.";
    if (!ids.length) return;
    this.slides.push(...ids.map((id) => this.load(id)));
    this.render();
  }

  private async addCurrent(): Promise<void> {
    this.message.textContent = "Sharing the current code…";
    try {
      const response = await fetch("/api/snippets", {
        method: "POST",
        headers: { "Content-Type": "application/json", Accept: "application/json" },
        body: JSON.stringify({ code: this.options.currentCode() }),
      });
      const body = (await response.json().catch(() => ({}))) as { id?: string; message?: string };
      if (!response.ok || !body.id) throw new Error(body.message ?? `the server answered HTTP ${response.status}`);
      this.slides.push(this.load(body.id));
      this.message.textContent = "";
    } catch (err) {
      this.message.textContent = `Could not add the current code: ${(err as Error).message}`;
    }
    this.render();
  }

  private move(index: number, step: number): void {
    const target = index + step;
    if (target < 0 || target >= this.slides.length) return;
    [this.slides[index], this.slides[target]] = [this.slides[target], this.slides[index]];
    this.render();
    // Keep the keyboard on the moved slide's button.
    const row = this.list.children[target];
    row?.querySelector<HTMLButtonElement>(step < 0 ? "[data-action=up]" : "[data-action=down]")?.focus();
  }

  private remove(index: number): void {
    this.slides.splice(index, 1);
    this.render();
  }

  private render(): void {
    const rows = this.slides.map((slide, index) => this.row(slide, index));
    this.list.replaceChildren(
      ...(rows.length ? rows : [el("li", { class: "room-deck-empty" }, "No slides yet: add share links or the current code.")]),
    );
    const unknown = this.slides.filter((slide) => slide.code === undefined).map((slide) => slide.id);
    this.saveButton.disabled = unknown.length > 0 || this.slides.some((slide) => slide.code === null);
    if (unknown.length) {
      this.message.textContent =
        `Unknown link: no snippet ${unknown.join(", ")} on this server. Remove it, or share it here first.`;
    } else if (this.message.textContent?.startsWith("Unknown link")) {
      this.message.textContent = "";
    }
  }

  private row(slide: Slide, index: number): HTMLElement {
    const last = this.slides.length - 1;
    const title = slide.code === null ? "loading…" : slide.code === undefined ? "unknown link: no such snippet here" : slideTitle(slide.code);
    const button = (label: string, action: string, text: string, onclick: () => void, disabled = false) =>
      el("button", { class: "btn btn-ghost room-deck-row-button", type: "button", title: label, "aria-label": label,
                     "data-action": action, disabled, onclick }, text);
    const previewing = this.previewed === `${index}:${slide.id}`;
    const item = el(
      "li",
      { class: "room-deck-slide", "data-id": slide.id, "data-state": slide.code === undefined ? "missing" : "ok" },
      el("span", { class: "room-deck-number" }, String(index + 1)),
      el("span", { class: "room-deck-slide-text" },
         el("span", { class: "room-deck-slide-title" }, title),
         el("span", { class: "room-deck-slide-meta" },
            el("a", { href: `/s/${slide.id}`, target: "_blank", rel: "noopener" }, slide.id),
            slide.recorded ? " · with a recorded run" : "",
            slide.id === this.onScreen ? " · on screen" : "")),
      el("span", { class: "room-deck-row-buttons" },
         button(`Preview slide ${index + 1}`, "preview", previewing ? "Hide" : "Preview", () => {
           this.previewed = previewing ? null : `${index}:${slide.id}`;
           this.render();
         }, typeof slide.code !== "string"),
         button(`Move slide ${index + 1} up`, "up", "↑", () => this.move(index, -1), index === 0),
         button(`Move slide ${index + 1} down`, "down", "↓", () => this.move(index, 1), index === last),
         button(`Remove slide ${index + 1}`, "remove", "✕", () => this.remove(index))),
    );
    if (previewing && typeof slide.code === "string") {
      const lines = slide.code.split("\n");
      const shown = lines.slice(0, PREVIEW_LINES).join("\n") + (lines.length > PREVIEW_LINES ? "\n…" : "");
      item.append(el("pre", { class: "room-deck-preview", "data-testid": "room-deck-preview" }, shown));
    }
    return item;
  }

  private save(): void {
    const ids = this.slides.map((slide) => slide.id);
    const stays = this.onScreen ? ids.indexOf(this.onScreen) : -1;
    this.options.save(ids, Math.max(stays, 0));
    this.close();
  }

  close(): void {
    this.element.remove();
    if (this.returnFocus instanceof HTMLElement) this.returnFocus.focus();
  }
}
