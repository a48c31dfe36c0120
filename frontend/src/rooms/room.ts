/**
 * A workshop room on the page `/r/{code}` (and the embed `/e/r/{code}`).
 *
 * Presenter (the link holds `#presenter=SECRET`): edits as usual; every
 * change and cursor move is sent as `room_edit` (at most one message per
 * SEND_EVERY_MS); runs go out as usual and the server relays them.
 *
 * Attendee: follows. The editor is read-only and shows the presenter's code,
 * cursor and selection; the presenter's run plays into the panels as it
 * arrives. "Fork" makes the editor this person's own (runs are theirs, the
 * room keeps being tracked in the background); "Follow again" returns to the
 * presenter's code and last run.
 *
 * On every (re)connect the page joins again and the server answers with the
 * whole `room_state`, so a dropped connection comes back to the same place.
 */

import type { App } from "../shell/app";
import type { Boot } from "../core/boot";
import type { RoomEditEvent, RoomStateEvent, ServerEvent } from "../wire/protocol";
import { RoomBar } from "./room_bar";
import { RoomEditor, type Selection } from "./room_editor";
import "./room.css";

const SEND_EVERY_MS = 40;
const SECRET_KEY = (code: string) => `jaxplay.room.${code}.secret`;

export interface BootRoom {
  code: string;
}

/** The presenter secret from the link's fragment (kept for reloads), else from an earlier visit. */
function presenterSecret(code: string): string | null {
  const match = /(?:^#|&)presenter=([^&]+)/.exec(window.location.hash);
  if (match) {
    const secret = decodeURIComponent(match[1]);
    localStorage.setItem(SECRET_KEY(code), secret);
    return secret;
  }
  return localStorage.getItem(SECRET_KEY(code));
}

export class RoomPage {
  code: string;
  private secret: string | null;
  private readonly embed: boolean;
  private readonly editor: RoomEditor;
  private bar: RoomBar;
  private following: boolean;
  private joinedOnce = false;
  private joinPending = false;
  // The presenter's latest state, kept while forked so "Follow again" is instant.
  private presenterCode = "";
  private presenterSelection: Selection | null = null;
  private presenterRun: ServerEvent[] = [];
  private presenterRunId: string | null = null;
  // Presenter: what is waiting to be sent.
  private pendingCode: string | undefined;
  private pendingSelection: Selection | null = null;
  private sendTimer: number | null = null;

  constructor(
    private readonly app: App,
    room: BootRoom,
    embed: boolean,
  ) {
    this.code = room.code;
    this.secret = embed ? null : presenterSecret(room.code);
    this.following = this.secret === null;
    this.editor = new RoomEditor(app.editor.view, (code, selection) => this.onLocalChange(code, selection));
    this.editor.setReadOnly(this.following);
    this.embed = embed;
    this.bar = this.makeBar();
    const topbar = document.querySelector("header.topbar");
    topbar?.querySelector(".topbar-spacer")?.before(this.bar.element);
    document.body.classList.add(this.secret ? "room-presenter" : "room-attendee");
    document.body.classList.toggle("room-following", this.following);

    app.eventListeners.push((ev) => this.onEvent(ev));
    app.connectionListeners.push((state) => {
      if (state === "open") this.join();
    });
    if (app.connection.state === "open") this.join();
  }

  private makeBar(): RoomBar {
    return new RoomBar({
      code: this.code,
      presenter: this.secret !== null,
      embed: this.embed,
      fork: () => this.fork(),
      followAgain: () => this.followAgain(),
      deck: (action, snippets, position) => this.app.connection.send({
        type: "room_deck", action, ...(snippets ? { snippets } : {}), ...(position !== undefined ? { position } : {}),
      }),
      currentCode: () => this.app.editor.getCode(),
    });
  }

  private join(): void {
    this.joinPending = true;
    this.app.connection.send({ type: "room_join", room: this.code, ...(this.secret ? { secret: this.secret } : {}) });
  }

  private onEvent(ev: ServerEvent): void {
    if (ev.type === "notice" && ev.id === null && this.joinPending && this.secret !== null) {
      this.dropSecret(); // the server refused the secret (the notice, shown in Output, says so): follow instead
      return;
    }
    if (ev.type === "room_state" && ev.moved_from === this.code && ev.room !== this.code) this.moveTo(ev.room);
    if (!("room" in ev) || ev.room !== this.code) return;
    switch (ev.type) {
      case "room_state":
        this.onState(ev);
        break;
      case "room_edit":
        this.onEdit(ev);
        break;
      case "room_run":
        this.onPresenterRunEvent(ev.event);
        break;
      case "room_counts":
        this.bar.setCounts(ev.people, ev.ran, ev.errors);
        break;
      case "room_presence":
        this.bar.setPresenterOnline(ev.presenter_online);
        break;
      case "room_closed":
        this.bar.setClosed(ev.message);
        break;
    }
  }

  /** The room left its six-character code for `code`: the address, the kept secret and the bar name the new one. */
  private moveTo(code: string): void {
    if (this.secret !== null) {
      localStorage.removeItem(SECRET_KEY(this.code));
      localStorage.setItem(SECRET_KEY(code), this.secret);
    }
    document.title = document.title.replace(this.code, code);
    this.code = code;
    const path = (this.embed ? "/e/r/" : "/r/") + code;
    window.history.replaceState(window.history.state, "", path + window.location.search + window.location.hash);
    const bar = this.makeBar();
    bar.setFollowing(this.following);
    this.bar.element.replaceWith(bar.element);
    this.bar = bar;
  }

  private dropSecret(): void {
    localStorage.removeItem(SECRET_KEY(this.code));
    this.secret = null;
    document.body.classList.replace("room-presenter", "room-attendee");
    const bar = this.makeBar();
    this.bar.element.replaceWith(bar.element);
    this.bar = bar;
    this.followAgain();
    this.join();
  }

  private onState(ev: RoomStateEvent): void {
    this.joinPending = false;
    const firstJoin = !this.joinedOnce;
    this.joinedOnce = true;
    this.bar.setCounts(ev.people, ev.ran, ev.errors);
    this.bar.setDeck(ev.deck, ev.position);
    this.bar.setPresenterOnline(ev.presenter_online);
    this.presenterCode = ev.code;
    this.presenterSelection = ev.selection;
    this.presenterRun = ev.run ?? [];
    this.presenterRunId = this.presenterRun.length ? runIdOf(this.presenterRun[0]) : null;
    if (ev.role === "presenter") {
      if (firstJoin || ev.reason === "deck" || this.app.editor.getCode() === ev.code) this.editor.setCode(ev.code);
      else this.sendSoon(this.app.editor.getCode()); // typed while disconnected: the room takes this copy
      // A reloaded page gets the room's run back, as an attendee's does; after a slide change
      // everyone shows the slide's recorded run, or nothing.
      if (firstJoin || ev.reason === "deck") this.showRoomRun();
      return;
    }
    if (this.following) this.showPresenter();
  }

  private onEdit(ev: RoomEditEvent): void {
    if (ev.code !== undefined) this.presenterCode = ev.code;
    this.presenterSelection = ev.selection;
    if (this.secret) {
      // Another tab of the same presenter typed: take its code, keep typing here.
      if (ev.code !== undefined) this.editor.setCode(ev.code);
      return;
    }
    if (this.following) this.editor.showPresenter(ev.code, ev.selection);
  }

  private onPresenterRunEvent(event: ServerEvent): void {
    const id = runIdOf(event);
    // A presenter's page shows a room run it did not start (its reloaded self's, another tab's)
    // unless it is running one of its own.
    const shown = this.following || (this.secret !== null && !this.app.runningOwnRun);
    if (id !== this.presenterRunId) {
      this.presenterRunId = id;
      this.presenterRun = [];
      if (shown && id) this.app.showRun(id);
    }
    this.presenterRun.push(event);
    if (shown) this.app.showEvent(event);
  }

  private showPresenter(): void {
    this.editor.showPresenter(this.presenterCode, this.presenterSelection);
    this.showRoomRun();
  }

  /** The room's run in the panels, or none: what every member of the room shows. */
  private showRoomRun(): void {
    if (this.presenterRunId) this.app.showRun(this.presenterRunId, this.presenterRun);
    else this.app.clearRun();
  }

  fork(): void {
    this.following = false;
    this.editor.hidePresenter();
    this.editor.setReadOnly(false);
    document.body.classList.remove("room-following");
    this.bar.setFollowing(false);
    this.app.editor.focus();
  }

  followAgain(): void {
    this.following = true;
    this.editor.setReadOnly(true);
    document.body.classList.add("room-following");
    this.bar.setFollowing(true);
    this.showPresenter();
  }

  // --- presenter -------------------------------------------------------------

  private onLocalChange(code: string | undefined, selection: Selection): void {
    if (!this.secret) return;
    this.pendingSelection = selection;
    this.sendSoon(code);
  }

  private sendSoon(code: string | undefined): void {
    if (code !== undefined) this.pendingCode = code;
    if (this.sendTimer !== null) return;
    this.sendTimer = window.setTimeout(() => {
      this.sendTimer = null;
      const message: { type: "room_edit"; code?: string; selection?: Selection } = { type: "room_edit" };
      if (this.pendingCode !== undefined) message.code = this.pendingCode;
      if (this.pendingSelection) message.selection = this.pendingSelection;
      this.pendingCode = undefined;
      if (message.code !== undefined || message.selection) this.app.connection.send(message);
    }, SEND_EVERY_MS);
  }
}

function runIdOf(event: ServerEvent): string | null {
  return "id" in event && typeof event.id === "string" ? event.id : null;
}

/** Starts the room page when the server rendered one (`boot.room`); returns null otherwise. */
export function mountRoomPage(app: App, boot: Boot): RoomPage | null {
  const room = boot.room as BootRoom | undefined;
  if (!room || typeof room.code !== "string") return null;
  return new RoomPage(app, room, boot.mode === "embed");
}
