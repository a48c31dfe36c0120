/**
 * The room's controls in the header: the code, counts, the projector view
 * with the QR code, deck controls (presenter); Fork / Follow again (attendee).
 */

import { el } from "../core/dom";
import { DeckEditor } from "./room_deck";
import { qrSvg } from "./room_qr";

export type DeckAction = "next" | "prev" | "set";

export interface RoomBarOptions {
  code: string;
  presenter: boolean;
  embed: boolean;
  fork(): void;
  followAgain(): void;
  deck(action: DeckAction, snippets?: string[], position?: number): void;
  /** The editor's code now (a slide made of it in the deck editor). */
  currentCode(): string;
}

export class RoomBar {
  readonly element: HTMLElement;
  private readonly counts = el("span", { class: "room-counts", "data-testid": "room-counts" });
  private readonly roleLabel = el("span", { class: "room-role" });
  private readonly away = el("span", { class: "room-away", hidden: true }, "presenter away");
  private readonly forkButton: HTMLButtonElement;
  private readonly followButton: HTMLButtonElement;
  private readonly deckControls = el("span", { class: "room-deck", hidden: true });
  private readonly deckPosition = el("span", { class: "room-deck-position", "data-testid": "room-deck-position" });
  private readonly prevButton: HTMLButtonElement;
  private readonly nextButton: HTMLButtonElement;
  private deck: string[] = [];
  private position = 0;
  private readonly closed = el("span", { class: "room-closed", hidden: true, role: "alert" });

  constructor(private readonly options: RoomBarOptions) {
    this.forkButton = el(
      "button",
      { class: "btn btn-ghost", type: "button", "data-testid": "room-fork", title: "Edit and run your own copy",
        onclick: () => options.fork() },
      "Fork",
    );
    this.followButton = el(
      "button",
      { class: "btn btn-ghost", type: "button", "data-testid": "room-follow", hidden: true,
        title: "Back to the presenter's code and output", onclick: () => options.followAgain() },
      "Follow again",
    );
    const code = el("span", { class: "room-code", "data-testid": "room-code", title: "The room's code" }, options.code);
    this.element = el("div", { class: "room-bar", "data-testid": "room-bar" }, this.roleLabel, code);
    this.prevButton = el("button", { class: "btn btn-ghost", type: "button", "data-testid": "room-prev",
                                     title: "Previous slide", "aria-label": "Previous slide",
                                     onclick: () => options.deck("prev") }, "◀");
    this.nextButton = el("button", { class: "btn btn-ghost", type: "button", "data-testid": "room-next",
                                     title: "Next slide", "aria-label": "Next slide",
                                     onclick: () => options.deck("next") }, "▶");
    if (options.presenter) {
      this.roleLabel.textContent = "Presenting";
      code.title = "People join with this code";
      this.deckControls.append(this.prevButton, this.deckPosition, this.nextButton);
      this.element.append(
        this.counts,
        el("button", { class: "btn btn-ghost", type: "button", "data-testid": "room-show",
                       title: "Show the code, the link and a QR code for the projector", onclick: () => this.showProjector() },
           "Invite"),
        this.deckControls,
        el("button", { class: "btn btn-ghost", type: "button", "data-testid": "room-deck-set",
                       title: "Build the deck: shared snippets to step through", onclick: () => this.editDeck() },
           "Deck…"),
      );
    } else {
      this.roleLabel.textContent = "Following";
      this.element.append(this.away, this.deckPosition);
      if (!options.embed) this.element.append(this.forkButton, this.followButton);
    }
    this.element.append(this.closed);
  }

  attendeeUrl(): string {
    return `${window.location.origin}/r/${this.options.code}`;
  }

  setCounts(people: number, ran: number, errors: number): void {
    this.counts.textContent = `${people} here · ${ran} ran · ${errors} ${errors === 1 ? "error" : "errors"}`;
    this.counts.dataset.people = String(people);
    this.counts.title = "People following; of them, how many ran since your last run or slide change, and how many got an error";
  }

  setDeck(deck: string[], position: number): void {
    this.deck = deck;
    this.position = position;
    const text = deck.length ? `${position + 1} / ${deck.length}` : "";
    this.deckPosition.textContent = text;
    this.deckControls.hidden = deck.length === 0;
    this.prevButton.disabled = position <= 0;
    this.nextButton.disabled = position >= deck.length - 1;
  }

  setPresenterOnline(online: boolean): void {
    this.away.hidden = online;
  }

  setFollowing(following: boolean): void {
    this.forkButton.hidden = !following;
    this.followButton.hidden = following;
    this.roleLabel.textContent = following ? "Following" : "Your copy of";
  }

  setClosed(message: string): void {
    this.closed.hidden = false;
    this.closed.textContent = message;
  }

  private editDeck(): void {
    new DeckEditor({
      deck: this.deck,
      position: this.position,
      currentCode: () => this.options.currentCode(),
      save: (snippets, position) => this.options.deck("set", snippets, position),
    });
  }

  private showProjector(): void {
    const url = this.attendeeUrl();
    const close = () => overlay.remove();
    const overlay = el(
      "div",
      { class: "room-projector", role: "dialog", "aria-label": "Join this room", "data-testid": "room-projector",
        onclick: close },
      el("div", { class: "room-projector-code" }, this.options.code),
      el("div", { class: "room-projector-url" }, url),
      el("button", { class: "btn", type: "button", "data-testid": "room-copy-link",
                     onclick: (ev: Event) => {
                       ev.stopPropagation(); // copying must not close the view
                       void navigator.clipboard?.writeText(url);
                       (ev.currentTarget as HTMLButtonElement).textContent = "Link copied";
                     } }, "Copy link"),
    );
    overlay.insertBefore(qrSvg(url, `QR code for ${url}`), overlay.firstChild);
    overlay.append(el("div", { class: "room-projector-hint" }, "or type the code on the playground's home page · click to close"));
    const onKey = (ev: KeyboardEvent) => {
      if (ev.key === "Escape") {
        close();
        document.removeEventListener("keydown", onKey);
      }
    };
    document.addEventListener("keydown", onKey);
    document.body.append(overlay);
  }
}
