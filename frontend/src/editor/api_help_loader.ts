/**
 * Completion, signature help and hover docs (./api_help), loaded when the editor is first used:
 * the page's first load carries neither their code nor the API index they read.
 *
 * The first key, click or pointer over the editor imports the module (a chunk of its own) and puts
 * its extensions in place. A key or a click is a use: the index is fetched then too; a pointer
 * passing over only readies the code (hover docs fetch the index when a name is hovered).
 */

import { Compartment, type Extension } from "@codemirror/state";
import { ViewPlugin } from "@codemirror/view";
import type { ApiIndex } from "./api_index";

const TRIGGERS = ["keydown", "pointerdown", "pointermove"] as const;

export function lazyApiHelp(index: ApiIndex): Extension {
  const slot = new Compartment();
  const loader = ViewPlugin.define((view) => {
    let started = false;
    const start = (event: Event) => {
      if (event.type !== "pointermove") void index.ensure();
      if (started) return;
      started = true;
      void import("./api_help").then(({ apiHelp }) => {
        view.dispatch({ effects: slot.reconfigure(apiHelp(index)) });
        // Said on the editor, so a tool (or a test) can tell help is in place, not just its index.
        view.dom.dataset.apiHelp = "mounted";
      });
    };
    const stop = () => TRIGGERS.forEach((type) => view.dom.removeEventListener(type, start));
    for (const type of TRIGGERS) view.dom.addEventListener(type, start);
    return { destroy: stop };
  });
  return [slot.of([]), loader];
}
