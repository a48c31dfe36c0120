/**
 * The run on screen, and the requests panels send of their own.
 *
 * One run is on screen at a time: this page's own (Run), a recorded one (a
 * shared snippet's, replayed), or another's shown live (a room presenter's).
 * Run while a run is in flight cancels that run and starts the new one;
 * events of any other run id are dropped, so a late event of an abandoned
 * run never lands in the new run's panels. A request's events (a
 * compilation's XLA passes, Compare's runs) go to the panel that sent it.
 * A dropped socket ends the run in flight and every request as cancelled,
 * except what still waits in the outbox: the next socket sends it.
 */

import { flagsSummary } from "../flags/flags_editor";
import type { PlaygroundEditor } from "../editor/editor";
import type { Panel, PanelRequest } from "../panel/types";
import type { BackendPicker } from "../runtimes/backends";
import type { RuntimePicker } from "../runtimes/runtimes";
import type { ShareController } from "../sharing/share";
import type { Connection } from "../wire/connection";
import type { ClientPasses, ClientRun, DoneEvent, ServerEvent, StartedEvent } from "../wire/protocol";
import type { ConnectionStatus } from "./connection_status";
import type { RunAlert } from "./run_alert";
import type { StatusLine } from "./status";
import type { Tabs } from "./tabs";

/** Tabs that show no run: running from one of them brings the Output tab forward. */
const PICKER_TABS = new Set(["gallery"]);

interface ActiveRun {
  id: string;
  sentAt: number;
  /** False for a run this page only shows (a room presenter's): it cannot be cancelled from here. */
  own?: boolean;
}

/** The parts of the page a run goes through; the app builds them. */
export interface RunParts {
  panels: readonly Panel[];
  editor: PlaygroundEditor;
  connection: Connection;
  connectionStatus: ConnectionStatus;
  share: ShareController;
  tabs: Tabs;
  backends: BackendPicker;
  runtimes: RuntimePicker;
  status: StatusLine;
  runAlert: RunAlert;
  /** The footer's line naming the backend, devices and JAX version of the run on screen. */
  runInfo: HTMLElement;
  /** Listeners for every server event (rooms use these), called before the run on screen sees it. */
  eventListeners: ReadonlyArray<(ev: ServerEvent) => void>;
  /** A run is in flight (Stop can stop it), or none is. */
  showRunning(running: boolean): void;
}

export class RunOnScreen {
  private active: ActiveRun | null = null;
  private runCounter = 0;
  /** Requests panels sent (a compilation's XLA passes, Compare's runs): their events go to them, not to the run on screen. */
  private readonly requests = new Map<string, (ev: ServerEvent) => void>();
  /** The panels hold a run (live, recorded or another's) rather than nothing. */
  private runOnScreen = false;

  constructor(private readonly parts: RunParts) {}

  /** `extra`: fields for this run only, e.g. `{ fresh: true }` to bypass the result cache. */
  run(extra: Partial<ClientRun> = {}): void {
    const { panels, tabs, connection, status } = this.parts;
    if (this.active) this.cancel(this.active.id);
    const id = `run-${Date.now().toString(36)}-${++this.runCounter}`;
    this.active = { id, sentAt: performance.now(), own: true };
    this.runOnScreen = true;
    if (PICKER_TABS.has(tabs.activeId ?? "")) tabs.show("output");
    this.parts.runAlert.clear();
    for (const panel of panels) panel.onRunStart(id);
    const message: ClientRun = { type: "run", id, code: this.parts.editor.getCode() };
    for (const panel of panels) Object.assign(message, panel.runFields?.());
    const backend = this.parts.backends.value;
    if (backend) message.backend = backend;
    const runtime = this.parts.runtimes.value;
    if (runtime) message.runtime = runtime;
    Object.assign(message, extra);
    this.parts.share.onRunStart(message);
    this.parts.runInfo.textContent = "";
    this.parts.showRunning(true);
    connection.send(message);
    if (connection.sendsNow) {
      status.set({ kind: "sending" });
    } else {
      status.set({ kind: "waiting" });
      const message = this.parts.connectionStatus.restarting
        ? "The server is restarting; your run will start once the page has reconnected."
        : "The server cannot be reached; your run will start when it is back.";
      this.route({ type: "notice", id: null, level: "warning", message });
    }
  }

  /** Shows a recorded run (a shared snippet's) through the same path as a live run's events. */
  replay(events: readonly ServerEvent[]): void {
    if (this.active) this.cancel(this.active.id);
    const id = `recorded-${++this.runCounter}`;
    this.active = { id, sentAt: performance.now() };
    this.runOnScreen = true;
    this.parts.runAlert.clear();
    for (const panel of this.parts.panels) panel.onRunStart(id);
    for (const ev of events) this.onEvent({ ...ev, id } as ServerEvent);
  }

  /** Shows another's run live (a room presenter's) through the same path as this page's own runs. */
  showRun(id: string, events: readonly ServerEvent[] = []): void {
    if (this.active) this.cancel(this.active.id);
    this.active = { id, sentAt: performance.now(), own: false };
    this.runOnScreen = true;
    this.parts.runAlert.clear();
    for (const panel of this.parts.panels) panel.onRunStart(id);
    this.parts.showRunning(true);
    for (const ev of events) this.onEvent(ev);
  }

  /** Shows no run: empty panels and a ready status (a room's slide without a recorded run). A run of this
   * page's own in flight is cancelled: what it would print belongs to what was on screen before. */
  clearRun(): void {
    if (!this.runOnScreen) return; // nothing to clear: page-wide notices stay where they are
    this.runOnScreen = false;
    const previous = this.active;
    this.active = null;
    if (previous && previous.own !== false) this.cancel(previous.id);
    const id = `cleared-${++this.runCounter}`;
    for (const panel of this.parts.panels) panel.onRunStart(id);
    for (const panel of this.parts.panels) panel.onRunCleared?.();
    this.parts.share.clear();
    this.parts.runAlert.clear();
    this.parts.runInfo.textContent = "";
    this.parts.showRunning(false);
    this.parts.status.set({ kind: "idle" });
  }

  /** True while a run is in flight, this page's own or one it only shows. */
  get running(): boolean {
    return this.active !== null;
  }

  /** True while a run this page started (not one it only shows) is in flight. */
  get runningOwnRun(): boolean {
    return this.active !== null && this.active.own !== false;
  }

  stop(): void {
    if (this.active) this.cancel(this.active.id);
  }

  /** Sends a panel's own request; its events go to `onEvent` through its `done`. Returns what cancels it. */
  request(message: PanelRequest, onEvent: (ev: ServerEvent) => void): () => void {
    const id = `${message.type}-${Date.now().toString(36)}-${++this.runCounter}`;
    this.requests.set(id, onEvent);
    this.parts.connection.send({ ...message, id } as ClientRun | ClientPasses);
    return () => {
      if (this.requests.delete(id)) this.parts.connection.send({ type: "cancel", id });
    };
  }

  private cancel(id: string): void {
    if (this.active?.id === id && this.active.own === false) {
      this.active = null;
      this.parts.showRunning(false);
      return;
    }
    // A run still waiting in the outbox was never seen by the server: end it here.
    let unsent = false;
    this.parts.connection.unsend((m) => {
      const match = m.type === "run" && m.id === id;
      unsent ||= match;
      return match;
    });
    if (unsent) {
      this.finish({ type: "done", id, status: "cancelled", elapsed_ms: 0 });
      return;
    }
    this.parts.connection.send({ type: "cancel", id });
  }

  /** Every event from the server. */
  onEvent(ev: ServerEvent): void {
    for (const listener of this.parts.eventListeners) listener(ev);
    if (ev.type === "server_draining") {
      this.parts.connection.holdUntilReconnected();
      this.parts.connectionStatus.draining(ev.message);
      return;
    }
    if (!("id" in ev)) return; // room events: their listeners handle them
    const requester = ev.id === null ? undefined : this.requests.get(ev.id);
    if (requester) {
      if (ev.type === "done") this.requests.delete(ev.id as string);
      requester(ev);
      return;
    }
    if (ev.type === "notice" && ev.id === null) {
      this.route(ev);
      return;
    }
    if (!this.active || ev.id !== this.active.id) return;
    const { status } = this.parts;
    this.parts.share.onEvent(ev);
    this.parts.runAlert.onEvent(ev);
    switch (ev.type) {
      case "queued":
        status.set({ kind: "queued", position: ev.position, waitS: ev.estimated_wait_s, at: performance.now() });
        break;
      case "started":
        status.set({ kind: "running", since: performance.now() });
        this.parts.runInfo.textContent = this.parts.runInfo.title = describeStarted(ev);  // the title: whole, where cut
        break;
      case "compiling":
      case "compiled":
        if (status.state.kind === "running") {
          const compiling = ev.type === "compiling" ? { fn: ev.fn, line: ev.line } : undefined;
          status.set({ kind: "running", since: status.state.since, compiling });
        }
        break;
      case "done":
        this.finish(ev);
        return;
    }
    this.route(ev);
  }

  /** Hands an event to every panel that handles its type. */
  route(ev: ServerEvent): void {
    for (const panel of this.parts.panels) {
      if (panel.handles.includes(ev.type)) panel.onEvent(ev);
    }
  }

  private finish(ev: DoneEvent): void {
    if (!this.active || this.active.id !== ev.id) return;
    this.active = null;
    this.parts.showRunning(false);
    this.parts.status.set({ kind: "done", status: ev.status, elapsedMs: ev.elapsed_ms, message: ev.message });
    this.parts.runAlert.onDone(ev);
    for (const panel of this.parts.panels) panel.onRunDone?.(ev);
    void this.parts.backends.refresh();
  }

  /** The socket dropped: what the server will never answer ends here. */
  onLost(): void {
    const { connection, status } = this.parts;
    // What still waits in the outbox (held during a server's drain) was never seen by the server: the next
    // socket sends it, so it is not lost with this one.
    for (const [id, requester] of this.requests) {
      if (connection.holds(id)) continue;
      this.requests.delete(id);
      requester({ type: "done", id, status: "cancelled", elapsed_ms: 0,
                  message: "The connection to the server dropped; ask again once reconnected." });
    }
    if (!this.active) return;
    if (connection.holds(this.active.id)) {
      status.set({ kind: "waiting" });
      return;
    }
    const { id, sentAt } = this.active;
    const elapsed = performance.now() - sentAt;
    this.finish({
      type: "done",
      id,
      status: "cancelled",
      elapsed_ms: elapsed,
      message: "The connection to the server dropped, so this run was lost. Run it again once reconnected.",
    });
    status.set({ kind: "lost" });
  }

  /** The socket opened: a run that waited for it is sent now. */
  onOpen(): void {
    if (this.active && this.parts.status.state.kind === "waiting") this.parts.status.set({ kind: "sending" });
  }
}

/** "cpu · 8× cpu · jax 0.10.2" from what the worker reported. */
function describeStarted(ev: StartedEvent): string {
  const d = ev.devices ?? {};
  const count = d.count ?? d.device_count;
  const kind = d.kind ?? d.device_kind;
  const parts = [ev.backend];
  if (typeof count === "number") parts.push(typeof kind === "string" ? `${count}× ${kind}` : `${count} devices`);
  if (ev.jax_version) parts.push(`jax ${ev.jax_version}`);
  if (ev.flags) parts.push(`flags: ${flagsSummary(ev.flags)}`);  // on every tab, while its results are shown
  return parts.join(" · ");
}
