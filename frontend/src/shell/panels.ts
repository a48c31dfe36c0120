/**
 * The panel registry: every tab of the results area is a `Panel`.
 *
 * The app (app.ts) mounts one tab per factory in `PANELS` (in order; Output first).
 * For the run on screen, each server event whose `type` is in a panel's
 * `handles` goes to its `onEvent`; `onRunStart` comes before a run's first
 * event and `onRunDone` after its `done` (every panel gets both, whatever it
 * handles). A panel owns its `element` and redraws inside it only.
 *
 * To add a panel:
 *   1. write `frontend/src/<name>/<name>.ts` exporting a `PanelFactory`;
 *   2. if it consumes a new event, declare the event's interface there and
 *      merge it into `EventMap` (see wire/protocol.ts);
 *   3. add one line to `PANELS` below.
 *
 * Tiny example, a tab counting stdout chunks:
 *
 *     import type { PanelFactory } from "../panel/types";
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
 * `el()` from core/dom for building DOM without innerHTML. Style with classes
 * prefixed by the panel id, in <name>/<name>.css beside the panel and imported by it,
 * using the CSS variables of core/base.css so both themes work.
 */

import { comparePanel } from "../compare/compare";
import { flagsPanel } from "../flags/flags";
import { galleryPanel } from "../gallery/gallery";
import { inspectPanel } from "../inspect/inspect";
import { outputPanel } from "../output/output";
import { performancePanel } from "../performance/performance";
import { shardingPanel } from "../sharding/sharding";
import type { PanelFactory } from "../panel/types";

export const PANELS: PanelFactory[] = [
  outputPanel,
  inspectPanel,
  shardingPanel,
  performancePanel,
  comparePanel,
  flagsPanel,
  galleryPanel,
];
