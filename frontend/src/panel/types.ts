/**
 * What a panel is and what it is given: the types every panel and the app share.
 * The registry (shell/panels.ts) sits on top of the panels; the panels depend on this
 * module only, so there is no import circle.
 */

import type { Boot } from "../core/boot";
import type { EditorAccess } from "../editor/editor";
import type { ClientPasses, ClientRun, DoneEvent, RuntimeInfo, ServerEvent, ServerEventType } from "../wire/protocol";

type WithoutId<T> = { [K in keyof T as K extends "id" ? never : K]: T[K] };

/** A run of a panel's own: a run message whose `id` the page fills in (Compare's runs on other JAX versions). */
export type RunRequest = WithoutId<ClientRun>;
/** XLA's passes of one compilation (Inspect), its `id` filled in by the page. */
export type PassesRequest = WithoutId<ClientPasses>;
export type PanelRequest = RunRequest | PassesRequest;

/** What the page's Run would send now. */
export interface RunChoices {
  /** The chosen backend; left out for the server's default. */
  backend?: string;
  /** The chosen backend's JAX versions, newest first. */
  runtimes: RuntimeInfo[];
  /** The JAX version chosen for the run (undefined before the list arrives). */
  runtime?: RuntimeInfo;
  /** The fields every panel adds to a run (`Panel.runFields`). */
  fields: Record<string, unknown>;
}

export interface PanelContext {
  editor: EditorAccess;
  /** Shows a small count or word on this panel's tab; null hides it. */
  setBadge(value: string | number | null, tone?: "neutral" | "error"): void;
  /** Brings this panel's tab to the front. */
  activate(): void;
  /** Brings another panel's tab to the front, by its `id`. */
  showPanel(id: string): void;
  isActive(): boolean;
  boot: Boot;
  /**
   * Sends a request of its own (a `passes` message, or a `run` that is not the run on screen) and hands
   * every event of it to `onEvent`, through its `done`. Returns a function that cancels it. The page
   * fills in the id; a dropped connection ends it with a `cancelled` `done`.
   */
  request(message: PanelRequest, onEvent: (ev: ServerEvent) => void): () => void;
  runChoices(): RunChoices;
}

export interface Panel {
  /** Stable, lowercase; used in element ids and `data-panel` attributes. */
  id: string;
  title: string;
  element: HTMLElement;
  /** Server event types routed to `onEvent`. */
  handles: readonly (ServerEventType | string)[];
  onRunStart(runId: string): void;
  onEvent(ev: ServerEvent): void;
  onRunDone?(ev: DoneEvent): void;
  /** The page shows no run now (after `onRunStart`): show what an empty tab shows. */
  onRunCleared?(): void;
  /** Called when the tab becomes visible (lay out canvases, scroll, ...). */
  onShow?(): void;
  /** Extra fields for the `run` message (e.g. an option this panel needs). */
  runFields?(): Record<string, unknown>;
  /** What a shared link keeps of how this panel shows the run (not sent with runs): merged into its settings. */
  linkFields?(): Record<string, unknown>;
}

export type PanelFactory = (ctx: PanelContext) => Panel;
