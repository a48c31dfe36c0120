/**
 * The page: header (name, backend, Run/Stop), editor | results, status bar,
 * built from the boot data and wired together: the editor and its drafts,
 * the panels and what each is given, the socket, sharing, and the Run and
 * Stop shortcuts. The run on screen is `run_on_screen.ts`'s; what the page
 * says of its connection is `connection_status.ts`'s.
 */

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
import { ConnectionStatus } from "./connection_status";
import { PANELS } from "./panels";
import type { Panel, PanelContext } from "../panel/types";
import type { ClientRun, ServerEvent } from "../wire/protocol";
import { resultsSizeButton } from "./results_size";
import { RunAlert } from "./run_alert";
import { RunOnScreen } from "./run_on_screen";
import { ApiNames, offerRuntimesInHints, RuntimePicker } from "../runtimes/runtimes";
import { LinkRuntimeNote, linkedRuntime } from "../runtimes/runtimes_link";
import { mountShare, type ShareController } from "../sharing/share";
import { Splitter } from "./splitter";
import { StatusLine } from "./status";
import { syntaxMarks } from "../editor/syntax_marks";
import { Tabs } from "./tabs";
import { keepTopbarFitted } from "./topbar_fit";

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
  /** The footer's badge, "the server is restarting", "cannot be reached". */
  private readonly connectionStatus: ConnectionStatus;
  private readonly runInfo = el("span", { class: "run-info" });
  private readonly runAlert: RunAlert;
  private readonly runs: RunOnScreen;
  private readonly share: ShareController;
  private readonly drafts = new Drafts();
  readonly apiIndex = new ApiIndex();
  /** The page the editor's text belongs to: a snippet's id (with its shared code) or the blank editor. */
  private snippetId: string | null;
  private sharedCode: string | null;

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
      for (const message of problems) this.runs.route({ type: "notice", id: null, level: "error", message });
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
      if (!isStopShortcut(e) || !this.runs.running) return;
      e.preventDefault();
      this.stop();
    }, true);
    this.runButton.addEventListener("click", () => this.run());
    this.stopButton.addEventListener("click", () => this.stop());
    this.connectionStatus = new ConnectionStatus({
      backends: this.backends,
      runButton: this.runButton,
      isOpen: () => this.connection.state === "open",
      notify: (ev) => this.runs.route(ev),
      onOpen: () => this.runs.onOpen(),
    });

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
    this.tabs.element.insertBefore(this.connectionStatus.notice.element, this.runAlert.element);
    this.tabs.tools.append(resultsSizeButton());
    this.tabs.onChange = () => this.runAlert.render();
    // Backend x JAX version: the version picker sits in the backend's group (one row on phones too).
    this.backends.element.insertBefore(this.runtimes.element, this.backends.element.children[1] ?? null);
    const splitter = new Splitter(embed ? "jaxplay.split.embed" : "jaxplay.split");
    const main = el("main", { class: "workspace" }, editorPane, splitter.element, this.tabs.element);
    splitter.attach(main);
    const footer = el("footer", { class: "statusbar" }, this.status.element, this.runInfo, this.connectionStatus.badge);
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
        request: (message, onEvent) => this.runs.request(message, onEvent),
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
      onEvent: (ev) => this.runs.onEvent(ev),
      onStateChange: (state) => this.onConnectionState(state),
      onLost: () => this.runs.onLost(),
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
    this.runs = new RunOnScreen({
      panels: this.panels,
      editor: this.editor,
      connection: this.connection,
      connectionStatus: this.connectionStatus,
      share: this.share,
      tabs: this.tabs,
      backends: this.backends,
      runtimes: this.runtimes,
      status: this.status,
      runAlert: this.runAlert,
      runInfo: this.runInfo,
      eventListeners: this.eventListeners,
      showRunning: (running) => this.setRunning(running),
    });
    this.connectionStatus.expectOpenSoon();
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
    this.runs.run(extra);
  }

  /** Shows a recorded run (a shared snippet's) through the same path as a live run's events. */
  replay(events: readonly ServerEvent[]): void {
    this.runs.replay(events);
  }

  /** Shows another's run live (a room presenter's) through the same path as this page's own runs. */
  showRun(id: string, events: readonly ServerEvent[] = []): void {
    this.runs.showRun(id, events);
  }

  /** An event of a run shown with `showRun`. */
  showEvent(ev: ServerEvent): void {
    this.runs.onEvent(ev);
  }

  /** Shows no run: empty panels and a ready status (a room's slide without a recorded run). A run of this
   * page's own in flight is cancelled: what it would print belongs to what was on screen before. */
  clearRun(): void {
    this.runs.clearRun();
  }

  /** True while a run this page started (not one it only shows) is in flight. */
  get runningOwnRun(): boolean {
    return this.runs.runningOwnRun;
  }

  stop(): void {
    this.runs.stop();
  }

  /** Every panel's extra fields for a run (`Panel.runFields`). */
  private runFields(): Record<string, unknown> {
    return Object.assign({}, ...this.panels.map((panel) => panel.runFields?.() ?? {}));
  }

  private onConnectionState(state: ConnectionState): void {
    for (const listener of this.connectionListeners) listener(state);
    this.connectionStatus.onState(state);
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
