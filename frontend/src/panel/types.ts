/**
 * What a panel is and what it is given: the types every panel and the app share.
 * The registry (shell/panels.ts) sits on top of the panels; the panels depend on this
 * module only, so there is no import circle.
 */

import type { Boot } from "../core/boot";
import type { ClientPasses, DoneEvent, ServerEvent, ServerEventType } from "../wire/protocol";

/** How a line of the user's code is marked: a tinted line, plus a gutter dot unless "hover". */
export type LineMarkKind = "error" | "warning" | "info" | "hover";

export interface LineMark {
  /** 1-based line in the editor. */
  line: number;
  kind: LineMarkKind;
  /** Shown as a tooltip on the gutter marker. */
  title?: string;
}

export interface EditorAccess {
  getCode(): string;
  /** Replaces the whole text (undoable), e.g. to load an example. */
  setCode(code: string): void;
  /** Scrolls to `line` (1-based), puts the cursor there and focuses the editor. */
  goToLine(line: number, column?: number): void;
  /**
   * Replaces the marks `owner` put on the code (owners do not disturb each
   * other). With `clearOnEdit` they vanish at the next edit; otherwise they
   * follow the text as it is edited. Lines out of range are ignored.
   */
  setLineMarks(owner: string, marks: readonly LineMark[], options?: { clearOnEdit?: boolean }): void;
  clearLineMarks(owner: string): void;
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
   * Sends a request of its own (not the run on screen) and hands every event of it to `onEvent`,
   * through its `done`. Returns a function that cancels it. The page's id is filled in.
   */
  request(message: Omit<ClientPasses, "id">, onEvent: (ev: ServerEvent) => void): () => void;
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
}

export type PanelFactory = (ctx: PanelContext) => Panel;
