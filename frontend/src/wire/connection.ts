/**
 * The page's one WebSocket to `/ws`, reconnected when it drops.
 *
 * Messages sent while the socket is not open wait in `outbox` and go out on
 * the next open (a Run pressed while the page is still connecting is not
 * lost). When an open socket closes, `onLost` tells the app, which marks the
 * run it was waiting for as lost: the server forgets runs of a closed socket.
 * `holdUntilReconnected` makes the open socket a closing one: a server that
 * is shutting down refuses new runs, so they wait for the next socket.
 */

import { type ClientMessage, parseServerEvent, type ServerEvent } from "./protocol";

export type ConnectionState = "connecting" | "open" | "reconnecting";

export interface ConnectionHandlers {
  onEvent(ev: ServerEvent): void;
  onStateChange(state: ConnectionState): void;
  /** An open socket closed: messages already sent will get no answer. */
  onLost(): void;
}

const RETRY_MIN_MS = 250;
const RETRY_MAX_MS = 5000;

export function socketUrl(loc: Location = window.location): string {
  const scheme = loc.protocol === "https:" ? "wss:" : "ws:";
  return `${scheme}//${loc.host}/ws`;
}

export class Connection {
  private socket: WebSocket | null = null;
  private outbox: string[] = [];
  private retryMs = RETRY_MIN_MS;
  private retryTimer: number | null = null;
  /** The open socket's server is going away: what is sent waits for the next socket. */
  private holding = false;
  state: ConnectionState = "connecting";

  constructor(
    private readonly url: string,
    private readonly handlers: ConnectionHandlers,
  ) {
    this.open();
    // A laptop waking up or a network coming back: try at once, not after the backoff.
    window.addEventListener("online", () => this.retryNow());
    document.addEventListener("visibilitychange", () => {
      if (document.visibilityState === "visible") this.retryNow();
    });
  }

  send(message: ClientMessage): void {
    const text = JSON.stringify(message);
    // While held, only what starts new work waits: a cancel (Stop) must reach the runs still going.
    const held = this.holding && (message.type === "run" || message.type === "passes");
    if (this.socket?.readyState === WebSocket.OPEN && !held) this.socket.send(text);
    else this.outbox.push(text);
  }

  /** True when a message sent now reaches the server at once (not held for a later socket). */
  get sendsNow(): boolean {
    return this.socket?.readyState === WebSocket.OPEN && !this.holding;
  }

  /** The server said it is shutting down: hold new messages for the socket that replaces this one. */
  holdUntilReconnected(): void {
    this.holding = true;
  }

  /** True when a message with this `id` waits in the outbox: the server has not seen it, the next socket sends it. */
  holds(id: string): boolean {
    return this.outbox.some((text) => (JSON.parse(text) as { id?: unknown }).id === id);
  }

  /** Drops queued messages that no longer matter (e.g. a run cancelled before it was sent). */
  unsend(predicate: (message: ClientMessage) => boolean): void {
    this.outbox = this.outbox.filter((text) => !predicate(JSON.parse(text) as ClientMessage));
  }

  private setState(state: ConnectionState): void {
    if (state === this.state) return;
    this.state = state;
    this.handlers.onStateChange(state);
  }

  private open(): void {
    const socket = new WebSocket(this.url);
    this.socket = socket;
    socket.addEventListener("open", () => {
      this.retryMs = RETRY_MIN_MS;
      this.holding = false;
      this.setState("open");
      const waiting = this.outbox;
      this.outbox = [];
      for (const text of waiting) socket.send(text);
    });
    socket.addEventListener("message", (msg) => {
      if (typeof msg.data !== "string") return;
      const ev = parseServerEvent(msg.data);
      if (ev) this.handlers.onEvent(ev);
      else console.warn("jaxplay: ignoring a server message that is not a JSON event", msg.data);
    });
    socket.addEventListener("close", () => {
      if (this.socket !== socket) return;
      const wasOpen = this.state === "open";
      this.socket = null;
      this.setState("reconnecting");
      if (wasOpen) this.handlers.onLost();
      this.scheduleRetry();
    });
  }

  private scheduleRetry(): void {
    if (this.retryTimer !== null) return;
    this.retryTimer = window.setTimeout(() => {
      this.retryTimer = null;
      this.open();
    }, this.retryMs);
    this.retryMs = Math.min(RETRY_MAX_MS, this.retryMs * 2);
  }

  private retryNow(): void {
    if (this.socket || this.retryTimer === null) return;
    window.clearTimeout(this.retryTimer);
    this.retryTimer = null;
    this.retryMs = RETRY_MIN_MS;
    this.open();
  }
}
