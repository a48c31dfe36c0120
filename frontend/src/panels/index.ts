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
 *     import type { PanelFactory } from "./types";
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

import { comparePanel } from "./compare";
import { galleryPanel } from "./gallery";
import { inspectPanel } from "./inspect";
import { outputPanel } from "./output";
import { performancePanel } from "./performance";
import { shardingPanel } from "./sharding";
import type { PanelFactory } from "./types";

export type * from "./types";

export const PANELS: PanelFactory[] = [
  outputPanel,
  inspectPanel,
  shardingPanel,
  performancePanel,
  comparePanel,
  galleryPanel,
];
