/**
 * The page: header (name, backend, Run/Stop), editor | results, status bar,
 * and the run on screen.
 *
 * One run is on screen at a time. Run while a run is in flight cancels that
 * run and starts the new one; events of any other run id are dropped, so a
 * late event of an abandoned run never lands in the new run's panels.
 */

import { flagsSummary } from "../flags/flags_editor";
import { lazyApiHelp } from "../editor/api_help_loader";
import { ApiIndex } from "../editor/api_index";
import { BackendPicker } from "../runtimes/backends";
import type { Boot } from "../core/boot";
import { Connection, type ConnectionState, socketUrl } from "../wire/connection";
import { el, isRunShortcut, isStopShortcut, runShortcutLabel, stopShortcutLabel } from "../core/dom";
import { Drafts } from "../editor/drafts";
import { createEditor, type PlaygroundEditor } from "../editor/editor";
import { EMBED_HIDDEN_TABS, embedViewFrom } from "../sharing/embed_view";
import defaultExample from "../examples/default.py?raw";
import { PANELS } from "./panels";
import type { Panel, PanelContext, PanelRequest } from "../panel/types";
import type { ClientPasses, ClientRun, DoneEvent, ServerEvent, StartedEvent } from "../wire/protocol";
import { resultsSizeButton } from "./results_size";
import { RunAlert } from "./run_alert";
import { ServerNotice } from "./server_notice";
import { ApiNames, offerRuntimesInHints, RuntimePicker } from "../runtimes/runtimes";
import { LinkRuntimeNote, linkedRuntime } from "../runtimes/runtimes_link";
import { mountShare, type ShareController } from "../sharing/share";
import { Splitter } from "./splitter";
import { StatusLine } from "./status";
import { syntaxMarks } from "../editor/syntax_marks";
import { Tabs } from "./tabs";
import { keepTopbarFitted } from "./topbar_fit";

/** How long the page waits for the server before saying it cannot be reached. */
const UNREACHABLE_AFTER_MS = 1500;
const UNREACHABLE_MESSAGE =
  "The server cannot be reached. The page keeps trying to reconnect; a run you start now waits and starts when it is back.";
const RESTARTING_MESSAGE = "The server is restarting: reconnecting… A run you start now waits and starts once it is back.";
/** A restart that has not come back in this long is an outage, and the page says so. */
const RESTART_PATIENCE_MS = 30_000;
/** Set once, when the socket first opens: from then on Run starts a run at once. */
const READY_MARK = "jaxplay:ready-to-run";
/** Tabs that show no run: running from one of them brings the Output tab forward. */
const PICKER_TABS = new Set(["gallery"]);

interface ActiveRun {
  id: string;
  sentAt: number;
  /** False for a run this page only shows (a room presenter's): it cannot be cancelled from here. */
  own?: boolean;
}

export class App {
  readonly editor: PlaygroundEditor;
  readonly panels: Panel[] = [];
  readonly connection: Connection;
  /** Listeners for every server event (rooms use these), called before the run on screen sees it. */
  readonly eventListeners: Array<(ev: ServerEvent) => void> = [];
  readonly connectionListeners: Array<(state: ConnectionState) => void> = [];
  private readonly status = new StatusLine();
  private readonly backends: BackendPicker;
  /** The JAX version of the chosen backend that runs get (runtimes.ts). */
  readonly runtimes = new RuntimePicker();
  private readonly linkNote: LinkRuntimeNote;
  private readonly tabs = new Tabs();
  private readonly runButton: HTMLButtonElement;
  private readonly stopButton: HTMLButtonElement;
  private readonly connectionBadge = el("span", { class: "conn", "data-state": "connecting" }, "connecting…");
  private readonly runInfo = el("span", { class: "run-info" });
  private readonly runAlert: RunAlert;
  /** "The server is restarting", from its `server_draining` until the page has reconnected. */
  private readonly serverNotice = new ServerNotice();
  private active: ActiveRun | null = null;
  private runCounter = 0;
  /** Requests panels sent (a compilation's XLA passes, Compare's runs): their events go to them, not to the run on screen. */
  private readonly requests = new Map<string, (ev: ServerEvent) => void>();
  private readonly share: ShareController;
  private readonly drafts = new Drafts();
  readonly apiIndex = new ApiIndex();
  /** The page the editor's text belongs to: a snippet's id (with its shared code) or the blank editor. */
  private snippetId: string | null;
  private sharedCode: string | null;
  private unreachableShown = false;
  /** The panels hold a run (live, recorded or another's) rather than nothing. */
  private runOnScreen = false;

  constructor(
    root: HTMLElement,
    boot: Boot,
  ) {
    const embed = boot.mode === "embed";
    document.title = boot.page_title;
    document.body.classList.add(`mode-${boot.mode}`);

    this.backends = new BackendPicker(boot.snippet?.backend ?? null);
    this.linkNote = new LinkRuntimeNote(linkedRuntime(boot), this.runtimes, () => this.run());
    // Completion and help follow the JAX the code will run on: the chosen backend's chosen runtime.
    this.runtimes.onSelect = (runtime) => {
      const version = runtime?.jax_version ?? this.backends.selected?.jax_version;
      if (version) this.apiIndex.use(version);
    };
    // A server that cannot run code says why (e.g. its GPU worker cannot start): never a silent "queued".
    this.backends.onProblems = (problems) => {
      for (const message of problems) this.route({ type: "notice", id: null, level: "error", message });
    };
    this.backends.onSelect = (backend) => {
      this.runtimes.showBackend(backend);
      this.linkNote.showBackend(backend);
      if (!backend?.runtimes?.length && backend?.jax_version) this.apiIndex.use(backend.jax_version);
    };
    offerRuntimesInHints(this.runtimes, new ApiNames(), (runtime) => {
      this.runtimes.choose(runtime);
      this.run();
    });
    this.runButton = el(
      "button",
      { class: "btn btn-run", type: "button", title: `Run (${runShortcutLabel})`, "data-testid": "run" },
      el("span", { class: "btn-icon", "aria-hidden": "true" }, "▶"),
      "Run",
      el("kbd", { class: "btn-kbd" }, runShortcutLabel),
    );
    this.stopButton = el(
      "button",
      { class: "btn btn-stop", type: "button", title: `Stop the run (${stopShortcutLabel})`, disabled: true, "data-testid": "stop" },
      el("span", { class: "btn-icon", "aria-hidden": "true" }, "■"),
      "Stop",
    );
    document.addEventListener("keydown", (e) => {
      if (!isStopShortcut(e) || !this.active) return;
      e.preventDefault();
      this.stop();
    }, true);
    this.runButton.addEventListener("click", () => this.run());
    this.stopButton.addEventListener("click", () => this.stop());

    const editorPane = el("section", { class: "editor-pane", "aria-label": "Code" });
    const header = el(
      "header",
      { class: "topbar" },
      // The page's one top-level heading, for screen readers' heading navigation; the brand shows the name.
      el("h1", { class: "visually-hidden" }, boot.page_title),
      el(
        "a",
        { class: "brand", href: embed && boot.snippet?.id ? `/s/${boot.snippet.id}` : "/", target: embed ? "_blank" : null, rel: embed ? "noopener" : null },
        el("span", { class: "brand-mark", "aria-hidden": "true" }, "λ"),
        el("span", { class: "brand-name" }, embed ? "JAX Playground ↗" : "JAX Playground"),
      ),
      embed ? null : this.exampleButton(),
      el("div", { class: "topbar-spacer" }),
      // On phones the header is two rows: this ends the first (name, Stop, Run).
      el("div", { class: "topbar-break", "aria-hidden": "true" }),
      this.backends.element,
      this.stopButton,
      this.runButton,
    );
    this.runAlert = new RunAlert({
      activeTab: () => this.tabs.activeId,
      showOutput: () => this.tabs.show("output"),
      goToLine: (line) => this.editor.goToLine(line),
    });
    this.tabs.element.insertBefore(this.runAlert.element, this.tabs.panes);
    this.tabs.element.insertBefore(this.serverNotice.element, this.runAlert.element);
    this.tabs.tools.append(resultsSizeButton());
    this.tabs.onChange = () => this.runAlert.render();
    // Backend x JAX version: the version picker sits in the backend's group (one row on phones too).
    this.backends.element.insertBefore(this.runtimes.element, this.backends.element.children[1] ?? null);
    const splitter = new Splitter(embed ? "jaxplay.split.embed" : "jaxplay.split");
    const main = el("main", { class: "workspace" }, editorPane, splitter.element, this.tabs.element);
    splitter.attach(main);
    const footer = el("footer", { class: "statusbar" }, this.status.element, this.runInfo, this.connectionBadge);
    root.replaceChildren(header, main, footer);
    keepTopbarFitted(header);

    this.snippetId = typeof boot.snippet?.id === "string" ? boot.snippet.id : null;
    this.sharedCode = boot.snippet?.code ?? null;
    // A room's editor holds the presenter's code: it must neither load nor overwrite this browser's draft.
    const keepsDraft = !embed && !boot.room;
    const draft = keepsDraft ? this.drafts.load(this.snippetId, this.sharedCode) : null;
    this.editor = createEditor({
      parent: editorPane,
      doc: draft ?? boot.snippet?.code ?? defaultExample.trimEnd(),
      onRun: () => this.run(),
      onChange: (code) => {
        if (keepsDraft) this.drafts.save(this.snippetId, code, this.sharedCode);
        this.share?.onCodeChange(code);
      },
      extensions: [lazyApiHelp(this.apiIndex), syntaxMarks(() => this.editor ?? null)],
    });

    for (const factory of PANELS) {
      const slot = this.tabs.reserve();
      const ctx: PanelContext = {
        editor: this.editor,
        setBadge: (value, tone) => slot.setBadge(value, tone),
        activate: () => slot.activate(),
        showPanel: (id) => this.tabs.show(id),
        isActive: () => slot.isActive(),
        boot,
        request: (message, onEvent) => this.request(message, onEvent),
        runChoices: () => ({ backend: this.backends.value, runtimes: this.runtimes.runtimes,
                             runtime: this.runtimes.selected, fields: this.runFields() }),
      };
      const panel = factory(ctx);
      slot.mount(panel);
      this.panels.push(panel);
    }
    if (embed) {
      for (const id of EMBED_HIDDEN_TABS) this.tabs.hide(id);
      const view = embedViewFrom(window.location.search);
      if (view) this.tabs.show(view);
    }

    this.tabs.element.prepend(this.linkNote.element);
    this.connection = new Connection(socketUrl(), {
      onEvent: (ev) => this.onEvent(ev),
      onStateChange: (state) => this.onConnectionState(state),
      onLost: () => this.onLost(),
    });
    this.share = mountShare({
      boot,
      editor: this.editor,
      topbar: header,
      editorPane,
      results: this.tabs.element,
      backend: () => this.backends.value,
      runFields: () => this.runFields(),
      linkFields: () => Object.assign({}, ...this.panels.map((panel) => panel.linkFields?.() ?? {})),
      run: (extra) => this.run(extra),
      replay: (events) => this.replay(events),
      linked: (id, code) => this.onLinked(id, code),
    });
    window.setTimeout(() => {
      if (this.connection.state !== "open") this.showUnreachable();
    }, UNREACHABLE_AFTER_MS);
    // The editor does not take focus on load: Tab would then indent the code instead of moving through the
    // page (keyboard_exit.ts), and an embed taking focus would scroll the page that frames it.
    // Ctrl+Enter runs wherever focus is; the editor's own binding handles it there (and marks it handled).
    document.addEventListener("keydown", (e) => {
      if (!isRunShortcut(e) || e.defaultPrevented) return;
      e.preventDefault();
      this.run();
    });
  }

  /** `extra`: fields for this run only, e.g. `{ fresh: true }` to bypass the result cache. */
  run(extra: Partial<ClientRun> = {}): void {
    if (this.active) this.cancel(this.active.id);
    const id = `run-${Date.now().toString(36)}-${++this.runCounter}`;
    this.active = { id, sentAt: performance.now(), own: true };
    this.runOnScreen = true;
    if (PICKER_TABS.has(this.tabs.activeId ?? "")) this.tabs.show("output");
    this.runAlert.clear();
    for (const panel of this.panels) panel.onRunStart(id);
    const message: ClientRun = { type: "run", id, code: this.editor.getCode() };
    for (const panel of this.panels) Object.assign(message, panel.runFields?.());
    const backend = this.backends.value;
    if (backend) message.backend = backend;
    const runtime = this.runtimes.value;
    if (runtime) message.runtime = runtime;
    Object.assign(message, extra);
    this.share.onRunStart(message);
    this.runInfo.textContent = "";
    this.setRunning(true);
    this.connection.send(message);
    if (this.connection.sendsNow) {
      this.status.set({ kind: "sending" });
    } else {
      this.status.set({ kind: "waiting" });
      const message = this.serverNotice.phase
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
    this.runAlert.clear();
    for (const panel of this.panels) panel.onRunStart(id);
    for (const ev of events) this.onEvent({ ...ev, id } as ServerEvent);
  }

  /** Shows another's run live (a room presenter's) through the same path as this page's own runs. */
  showRun(id: string, events: readonly ServerEvent[] = []): void {
    if (this.active) this.cancel(this.active.id);
    this.active = { id, sentAt: performance.now(), own: false };
    this.runOnScreen = true;
    this.runAlert.clear();
    for (const panel of this.panels) panel.onRunStart(id);
    this.setRunning(true);
    for (const ev of events) this.onEvent(ev);
  }

  /** An event of a run shown with `showRun`. */
  showEvent(ev: ServerEvent): void {
    this.onEvent(ev);
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
    for (const panel of this.panels) panel.onRunStart(id);
    for (const panel of this.panels) panel.onRunCleared?.();
    this.share.clear();
    this.runAlert.clear();
    this.runInfo.textContent = "";
    this.setRunning(false);
    this.status.set({ kind: "idle" });
  }

  /** True while a run this page started (not one it only shows) is in flight. */
  get runningOwnRun(): boolean {
    return this.active !== null && this.active.own !== false;
  }

  stop(): void {
    if (this.active) this.cancel(this.active.id);
  }

  /** Every panel's extra fields for a run (`Panel.runFields`). */
  private runFields(): Record<string, unknown> {
    return Object.assign({}, ...this.panels.map((panel) => panel.runFields?.() ?? {}));
  }

  private request(message: PanelRequest, onEvent: (ev: ServerEvent) => void): () => void {
    const id = `${message.type}-${Date.now().toString(36)}-${++this.runCounter}`;
    this.requests.set(id, onEvent);
    this.connection.send({ ...message, id } as ClientRun | ClientPasses);
    return () => {
      if (this.requests.delete(id)) this.connection.send({ type: "cancel", id });
    };
  }

  private cancel(id: string): void {
    if (this.active?.id === id && this.active.own === false) {
      this.active = null;
      this.setRunning(false);
      return;
    }
    // A run still waiting in the outbox was never seen by the server: end it here.
    let unsent = false;
    this.connection.unsend((m) => {
      const match = m.type === "run" && m.id === id;
      unsent ||= match;
      return match;
    });
    if (unsent) {
      this.finish({ type: "done", id, status: "cancelled", elapsed_ms: 0 });
      return;
    }
    this.connection.send({ type: "cancel", id });
  }

  private onEvent(ev: ServerEvent): void {
    for (const listener of this.eventListeners) listener(ev);
    if (ev.type === "server_draining") {
      this.onServerDraining(ev.message);
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
    this.share.onEvent(ev);
    this.runAlert.onEvent(ev);
    switch (ev.type) {
      case "queued":
        this.status.set({ kind: "queued", position: ev.position, waitS: ev.estimated_wait_s, at: performance.now() });
        break;
      case "started":
        this.status.set({ kind: "running", since: performance.now() });
        this.runInfo.textContent = this.runInfo.title = describeStarted(ev);  // the title: whole, where cut
        break;
      case "compiling":
      case "compiled":
        if (this.status.state.kind === "running") {
          const compiling = ev.type === "compiling" ? { fn: ev.fn, line: ev.line } : undefined;
          this.status.set({ kind: "running", since: this.status.state.since, compiling });
        }
        break;
      case "done":
        this.finish(ev);
        return;
    }
    this.route(ev);
  }

  private route(ev: ServerEvent): void {
    for (const panel of this.panels) {
      if (panel.handles.includes(ev.type)) panel.onEvent(ev);
    }
  }

  private finish(ev: DoneEvent): void {
    if (!this.active || this.active.id !== ev.id) return;
    this.active = null;
    this.setRunning(false);
    this.status.set({ kind: "done", status: ev.status, elapsedMs: ev.elapsed_ms, message: ev.message });
    this.runAlert.onDone(ev);
    for (const panel of this.panels) panel.onRunDone?.(ev);
    void this.backends.refresh();
  }

  private onLost(): void {
    // What still waits in the outbox (held during a server's drain) was never seen by the server: the next
    // socket sends it, so it is not lost with this one.
    for (const [id, requester] of this.requests) {
      if (this.connection.holds(id)) continue;
      this.requests.delete(id);
      requester({ type: "done", id, status: "cancelled", elapsed_ms: 0,
                  message: "The connection to the server dropped; ask again once reconnected." });
    }
    if (!this.active) return;
    if (this.connection.holds(this.active.id)) {
      this.status.set({ kind: "waiting" });
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
    this.status.set({ kind: "lost" });
  }

  /** The server is shutting down: it finishes what runs, refuses new runs, then closes this socket. */
  private onServerDraining(message: string): void {
    this.connection.holdUntilReconnected();
    this.serverNotice.show("draining", message);
    this.connectionBadge.dataset.state = "restarting";
    this.connectionBadge.textContent = "server restarting…";
  }

  private onConnectionState(state: ConnectionState): void {
    for (const listener of this.connectionListeners) listener(state);
    this.connectionBadge.dataset.state = state;
    this.connectionBadge.textContent =
      state === "open" ? "connected" : state === "connecting" ? "connecting…" : "reconnecting…";
    if (state === "open") {
      this.serverNotice.clear();
    } else if (this.serverNotice.phase === "draining") {
      // The restart's socket closed: say so where the drain's notice was, not "cannot be reached".
      this.serverNotice.show("reconnecting", RESTARTING_MESSAGE);
      this.connectionBadge.textContent = "server restarting…";
      window.setTimeout(() => {
        if (this.connection.state === "open" || this.serverNotice.phase !== "reconnecting") return;
        this.serverNotice.clear();
        this.unreachableShown = false;
        this.showUnreachable();
      }, RESTART_PATIENCE_MS);
    } else if (this.serverNotice.phase === "reconnecting") {
      this.connectionBadge.textContent = "server restarting…";
    }
    document.body.classList.toggle("is-offline", state !== "open");
    this.runButton.title = state === "open"
      ? `Run (${runShortcutLabel})`
      : `The server cannot be reached: a run waits and starts when it is back (${runShortcutLabel})`;
    if (state === "reconnecting") {
      this.showUnreachable();
    } else if (state === "open") {
      // The page can run code from here on: bench/page_load.py measures the page's load up to this mark.
      if (!performance.getEntriesByName(READY_MARK).length) performance.mark(READY_MARK);
      this.backends.setReachable(true);
      if (this.unreachableShown) {
        this.unreachableShown = false;
        this.route({ type: "notice", id: null, level: "info", message: "Connected to the server again." });
      }
      if (this.active && this.status.state.kind === "waiting") this.status.set({ kind: "sending" });
    }
  }

  /** Says so once per outage, in the output area where a person looks for a run's result. */
  private showUnreachable(): void {
    this.backends.setReachable(false);
    if (this.unreachableShown || this.connection.state === "open") return;
    this.unreachableShown = true;
    const message = this.serverNotice.phase ? RESTARTING_MESSAGE : UNREACHABLE_MESSAGE;
    this.route({ type: "notice", id: null, level: "warning", message });
  }

  /** The editor's text now belongs to snippet `id` (just shared): its drafts are kept under that link. */
  private onLinked(id: string, code: string): void {
    if (this.snippetId !== null) this.drafts.forget(this.snippetId);
    else this.drafts.flush();
    this.snippetId = id;
    this.sharedCode = code;
  }

  private setRunning(running: boolean): void {
    this.stopButton.disabled = !running;
    document.body.classList.toggle("is-running", running);
  }

  private exampleButton(): HTMLElement {
    return el(
      "button",
      {
        class: "btn btn-ghost",
        type: "button",
        title: "Replace the code with the example (undo with Ctrl+Z)",
        onclick: () => {
          this.editor.setCode(defaultExample.trimEnd());
          this.editor.focus();
        },
      },
      "Example",
    );
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
