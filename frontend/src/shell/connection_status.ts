/**
 * What the page says of its connection to the server: the footer's badge
 * ("connected", "reconnecting…", "server restarting…"), the line above the
 * results while the server restarts (`server_draining`, then its socket
 * closing), the Run button's title while a run would wait, and, once per
 * outage, a notice in the output that the server cannot be reached: when the
 * socket drops, when it has not opened within `UNREACHABLE_AFTER_MS` of load,
 * or when a restart has not come back within `RESTART_PATIENCE_MS`.
 */

import { el, runShortcutLabel } from "../core/dom";
import type { BackendPicker } from "../runtimes/backends";
import type { ConnectionState } from "../wire/connection";
import type { ServerEvent } from "../wire/protocol";
import { ServerNotice } from "./server_notice";

/** How long the page waits for the server before saying it cannot be reached. */
const UNREACHABLE_AFTER_MS = 1500;
const UNREACHABLE_MESSAGE =
  "The server cannot be reached. The page keeps trying to reconnect; a run you start now waits and starts when it is back.";
const RESTARTING_MESSAGE = "The server is restarting: reconnecting… A run you start now waits and starts once it is back.";
/** A restart that has not come back in this long is an outage, and the page says so. */
const RESTART_PATIENCE_MS = 30_000;
/** Set once, when the socket first opens: from then on Run starts a run at once. */
const READY_MARK = "jaxplay:ready-to-run";

export interface ConnectionStatusHooks {
  backends: BackendPicker;
  runButton: HTMLButtonElement;
  /** The socket to the server is open now. */
  isOpen(): boolean;
  /** Shows a page-wide notice where a person looks for a run's result. */
  notify(ev: ServerEvent): void;
  /** The socket opened (again). */
  onOpen(): void;
}

export class ConnectionStatus {
  readonly badge = el("span", { class: "conn", "data-state": "connecting" }, "connecting…");
  /** "The server is restarting", from its `server_draining` until the page has reconnected. */
  readonly notice = new ServerNotice();
  private unreachableShown = false;

  constructor(private readonly hooks: ConnectionStatusHooks) {}

  /** The server said it is restarting (from `server_draining` until the page has reconnected). */
  get restarting(): boolean {
    return this.notice.phase !== null;
  }

  /** Says the server cannot be reached if the socket has not opened `UNREACHABLE_AFTER_MS` from now. */
  expectOpenSoon(): void {
    window.setTimeout(() => {
      if (!this.hooks.isOpen()) this.showUnreachable();
    }, UNREACHABLE_AFTER_MS);
  }

  /** The server is shutting down (its message): it finishes what runs, refuses new runs, then closes this socket. */
  draining(message: string): void {
    this.notice.show("draining", message);
    this.badge.dataset.state = "restarting";
    this.badge.textContent = "server restarting…";
  }

  onState(state: ConnectionState): void {
    const { badge, notice } = this;
    badge.dataset.state = state;
    badge.textContent = state === "open" ? "connected" : state === "connecting" ? "connecting…" : "reconnecting…";
    if (state === "open") {
      notice.clear();
    } else if (notice.phase === "draining") {
      // The restart's socket closed: say so where the drain's notice was, not "cannot be reached".
      notice.show("reconnecting", RESTARTING_MESSAGE);
      badge.textContent = "server restarting…";
      window.setTimeout(() => {
        if (this.hooks.isOpen() || notice.phase !== "reconnecting") return;
        notice.clear();
        this.unreachableShown = false;
        this.showUnreachable();
      }, RESTART_PATIENCE_MS);
    } else if (notice.phase === "reconnecting") {
      badge.textContent = "server restarting…";
    }
    document.body.classList.toggle("is-offline", state !== "open");
    this.hooks.runButton.title = state === "open"
      ? `Run (${runShortcutLabel})`
      : `The server cannot be reached: a run waits and starts when it is back (${runShortcutLabel})`;
    if (state === "reconnecting") {
      this.showUnreachable();
    } else if (state === "open") {
      // The page can run code from here on: bench/page_load.py measures the page's load up to this mark.
      if (!performance.getEntriesByName(READY_MARK).length) performance.mark(READY_MARK);
      this.hooks.backends.setReachable(true);
      if (this.unreachableShown) {
        this.unreachableShown = false;
        this.hooks.notify({ type: "notice", id: null, level: "info", message: "Connected to the server again." });
      }
      this.hooks.onOpen();
    }
  }

  /** Says so once per outage, in the output area where a person looks for a run's result. */
  private showUnreachable(): void {
    this.hooks.backends.setReachable(false);
    if (this.unreachableShown || this.hooks.isOpen()) return;
    this.unreachableShown = true;
    const message = this.notice.phase ? RESTARTING_MESSAGE : UNREACHABLE_MESSAGE;
    this.hooks.notify({ type: "notice", id: null, level: "warning", message });
  }
}
