/**
 * The server's own state, above the results: "restarting" from the moment it says it is shutting
 * down (`server_draining`) until the page has reconnected. A restart drains first: runs already going
 * may finish, new ones are refused; so the page holds new runs and says where they are.
 */

import { el } from "../core/dom";
import "./server_notice.css";

export type ServerPhase = "draining" | "reconnecting";

export class ServerNotice {
  readonly element = el("div", { class: "server-notice", role: "status", "aria-live": "polite", hidden: true,
                                 "data-testid": "server-notice" });
  phase: ServerPhase | null = null;

  /** The server said it is shutting down (its message), or its socket closed after that. */
  show(phase: ServerPhase, message: string): void {
    this.phase = phase;
    this.element.dataset.phase = phase;
    this.element.replaceChildren(
      el("span", { class: "server-notice-spinner", "aria-hidden": "true" }),
      el("span", { class: "server-notice-text" }, message),
    );
    this.element.hidden = false;
  }

  clear(): void {
    this.phase = null;
    this.element.hidden = true;
    this.element.replaceChildren();
  }
}
