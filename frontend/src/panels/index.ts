/**
 * The panel registry: every tab of the results area is a `Panel`.
 *
 * main.ts mounts one tab per factory in `PANELS` (in order; Output first).
 * For the run on screen, each server event whose `type` is in a panel's
 * `handles` goes to its `onEvent`; `onRunStart` comes before a run's first
 * event and `onRunDone` after its `done` (every panel gets both, whatever it
 * handles). A panel owns its `element` and redraws inside it only.
 *
 * To add a panel:
 *   1. write `frontend/src/panels/<name>.ts` exporting a `PanelFactory`;
 *   2. if it consumes a new event, declare the event's interface there and
 *      merge it into `EventMap` (see protocol.ts);
 *   3. add one line to `PANELS` below.
 *
 * Tiny example, a tab counting stdout chunks:
 *
 *     import type { PanelFactory } from "./index";
 *
 *     export const chunkCounter: PanelFactory = (ctx) => {
 *       const element = document.createElement("div");
 *       let chunks = 0;
 *       return {
 *         id: "chunks",
 *         title: "Chunks",
 *         element,
 *         handles: ["stdout"],
 *         onRunStart() { chunks = 0; element.textContent = ""; ctx.setBadge(null); },
 *         onEvent(ev) { if (ev.type === "stdout") ctx.setBadge(++chunks); },
 *         onRunDone(ev) { element.textContent = `${chunks} chunks, ${ev.status}`; },
 *       };
 *     };
 *
 * Use `ctx.editor` to point at source lines (`goToLine`, `setLineMarks`), and
 * `el()` from ../dom for building DOM without innerHTML. Style with classes
 * prefixed by the panel id, in src/styles/<name>.css imported by the panel,
 * using the CSS variables of src/styles/base.css so both themes work.
 */

import type { Boot } from "../boot";
import type { DoneEvent, ServerEvent, ServerEventType } from "../protocol";
import { galleryPanel } from "./gallery";
import { inspectPanel } from "./inspect";
import { outputPanel } from "./output";
import { shardingPanel } from "./sharding";

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
  isActive(): boolean;
  boot: Boot;
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
  /** Called when the tab becomes visible (lay out canvases, scroll, ...). */
  onShow?(): void;
  /** Extra fields for the `run` message (e.g. an option this panel needs). */
  runFields?(): Record<string, unknown>;
}

export type PanelFactory = (ctx: PanelContext) => Panel;

export const PANELS: PanelFactory[] = [
  outputPanel,
  inspectPanel,
  shardingPanel,
  galleryPanel,
];
