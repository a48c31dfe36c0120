/**
 * Tab in the editor, after CodeMirror's accessibility guidance: the editor
 * never traps the keyboard, and says how to leave it.
 *
 * - Focus that arrives from the keyboard (Tab from the header) lets Tab and
 *   Shift+Tab move on, so a keyboard user passes through without changing
 *   the code. Once they type, Tab indents.
 * - A click in the editor means editing: Tab indents at once.
 * - Escape, then Tab, leaves the editor whenever Tab indents (CodeMirror's own
 *   escape hatch, kept until the next edit rather than for two seconds).
 *
 * A line at the bottom of the editor says which of these holds while the
 * editor has keyboard focus (or after Tab or Escape), and the same advice is
 * the editor's accessible description for screen readers.
 */

import { indentLess, indentMore } from "@codemirror/commands";
import { type Extension, Prec, StateEffect, StateField } from "@codemirror/state";
import { EditorView, keymap, type Panel, showPanel } from "@codemirror/view";
import { el, runShortcutLabel, uniqueId } from "../core/dom";

interface TabState {
  /** Tab and Shift+Tab move focus instead of indenting. */
  tabLeaves: boolean;
  /** The line that says what Tab does is shown. */
  hint: boolean;
}

const setTabState = StateEffect.define<Partial<TabState>>();

const tabStateField = StateField.define<TabState>({
  create: () => ({ tabLeaves: false, hint: false }),
  update(value, tr) {
    let next = value;
    for (const effect of tr.effects) if (effect.is(setTabState)) next = { ...next, ...effect.value };
    // Typing (or deleting, or pasting) is editing: from then on Tab indents.
    if (next.tabLeaves && tr.docChanged && (tr.isUserEvent("input") || tr.isUserEvent("delete"))) {
      next = { ...next, tabLeaves: false };
    }
    return next;
  },
  provide: (field) => showPanel.from(field, (state) => (state.hint ? keysPanel : null)),
});

type TabMode = "leaves" | "indents" | "read-only";

/** What Tab does now, and how to leave: the visible line. */
function hintChildren(mode: TabMode): (Node | string)[] {
  const key = (name: string) => el("kbd", {}, name);
  const run = [key(runShortcutLabel), " runs"];
  if (mode === "read-only") return ["Read-only · ", key("Tab"), " moves to the next control · ", ...run];
  if (mode === "leaves") return [key("Tab"), " moves on; once you type, ", key("Tab"), " indents · ", ...run];
  return [key("Tab"), " indents · ", key("Esc"), " then ", key("Tab"), " leaves the editor · ", ...run];
}

function tabMode(view: EditorView): TabMode {
  if (view.state.readOnly) return "read-only";
  return view.state.field(tabStateField).tabLeaves ? "leaves" : "indents";
}

function keysPanel(view: EditorView): Panel {
  const dom = el("div", { class: "cm-keys-hint", "data-testid": "editor-keys-hint", "aria-hidden": "true" });
  let shown: TabMode | null = null;
  const render = () => {
    const mode = tabMode(view);
    if (mode === shown) return;
    shown = mode;
    dom.dataset.tab = mode;
    dom.replaceChildren(...hintChildren(mode));
  };
  render();
  return { dom, top: false, update: render };
}

/** The editor's accessible description: how to run, how Tab behaves, how to leave. */
export const EDITOR_KEYS_DESCRIPTION =
  `${runShortcutLabel.replace(" ", "+")} runs the code. Tab indents once you have typed; ` +
  "to leave the editor, press Escape, then Tab.";

/** When a pointer last went down anywhere on the page. */
let lastPointerDown = 0;
document.addEventListener("pointerdown", () => { lastPointerDown = Date.now(); }, true);

function tabKey(indent: (view: EditorView) => boolean) {
  return (view: EditorView): boolean => {
    // Returning false lets the browser move focus: read-only code (an embed, a room's follower) has nothing to indent.
    if (tabMode(view) !== "indents") return false;
    view.dispatch({ effects: setTabState.of({ hint: true }) });
    indent(view);
    return true;
  };
}

/** `descriptionParent`: where the (hidden) description element goes; the content points at it. */
export function keyboardExit(descriptionParent: HTMLElement): Extension {
  const descriptionId = uniqueId("editor-keys");
  descriptionParent.append(el("p", { id: descriptionId, hidden: true }, EDITOR_KEYS_DESCRIPTION));
  return [
    tabStateField,
    EditorView.contentAttributes.of({ "aria-describedby": descriptionId }),
    Prec.highest(keymap.of([
      { key: "Tab", run: tabKey(indentMore), shift: tabKey(indentLess) },
      {
        key: "Escape",
        // Not handled: closing a completion or signature help still happens.
        run: (view) => (view.dispatch({ effects: setTabState.of({ tabLeaves: true, hint: true }) }), false),
      },
    ])),
    EditorView.domEventHandlers({
      mousedown(_event, view) {
        if (view.state.field(tabStateField).tabLeaves) view.dispatch({ effects: setTabState.of({ tabLeaves: false }) });
        return false;
      },
      focus(_event, view) {
        // A click (in the editor, or on a link or button that puts the cursor in it) means editing.
        const byPointer = Date.now() - lastPointerDown < 1000;
        view.dispatch({ effects: setTabState.of(byPointer ? { tabLeaves: false, hint: false } : { tabLeaves: true, hint: true }) });
        return false;
      },
      blur(_event, view) {
        if (view.state.field(tabStateField).hint) view.dispatch({ effects: setTabState.of({ hint: false }) });
        return false;
      },
    }),
  ];
}
