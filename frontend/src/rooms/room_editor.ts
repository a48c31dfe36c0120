/**
 * The editor's side of a room: a read-only switch, and the presenter's
 * cursor and selection drawn in a follower's editor.
 *
 * Both are added to the existing editor with `appendConfig`, so the editor
 * module needs no room-specific code. Incoming code is applied as the one
 * changed span (common prefix and suffix kept), so a follower's scroll
 * position and folds survive the presenter's typing.
 */

import { Annotation, Compartment, EditorState, type Extension, StateEffect, StateField } from "@codemirror/state";
import { Decoration, type DecorationSet, EditorView, WidgetType } from "@codemirror/view";

export type Selection = [number, number];

const setPresenterSelection = StateEffect.define<Selection | null>();
/** Marks transactions that came from the room, not from this person's typing. */
const remoteChange = Annotation.define<boolean>();

class PresenterCaret extends WidgetType {
  toDOM(): HTMLElement {
    const caret = document.createElement("span");
    caret.className = "cm-presenter-caret";
    caret.setAttribute("aria-hidden", "true");
    caret.dataset.testid = "presenter-caret";
    return caret;
  }
  eq(): boolean {
    return true;
  }
}

function decorations(selection: Selection | null, length: number): DecorationSet {
  if (!selection) return Decoration.none;
  const anchor = Math.min(selection[0], length);
  const head = Math.min(selection[1], length);
  const ranges = [];
  if (anchor !== head) {
    ranges.push(Decoration.mark({ class: "cm-presenter-selection" }).range(Math.min(anchor, head), Math.max(anchor, head)));
  }
  ranges.push(Decoration.widget({ widget: new PresenterCaret(), side: 1 }).range(head));
  return Decoration.set(ranges, true);
}

const presenterSelection = StateField.define<DecorationSet>({
  create: () => Decoration.none,
  update(deco, tr) {
    let next = deco.map(tr.changes);
    for (const effect of tr.effects) {
      if (effect.is(setPresenterSelection)) next = decorations(effect.value, tr.state.doc.length);
    }
    return next;
  },
  provide: (field) => EditorView.decorations.from(field),
});

/** The single replaced span that turns `before` into `after`. */
export function changedSpan(before: string, after: string): { from: number; to: number; insert: string } | null {
  if (before === after) return null;
  let start = 0;
  const limit = Math.min(before.length, after.length);
  while (start < limit && before.charCodeAt(start) === after.charCodeAt(start)) start++;
  let endBefore = before.length;
  let endAfter = after.length;
  while (endBefore > start && endAfter > start && before.charCodeAt(endBefore - 1) === after.charCodeAt(endAfter - 1)) {
    endBefore--;
    endAfter--;
  }
  return { from: start, to: endBefore, insert: after.slice(start, endAfter) };
}

export class RoomEditor {
  private readonly lock = new Compartment();

  constructor(
    readonly view: EditorView,
    onLocalChange: (code: string | undefined, selection: Selection) => void,
  ) {
    const listener: Extension = EditorView.updateListener.of((update) => {
      if (!update.docChanged && !update.selectionSet) return;
      if (update.transactions.every((tr) => tr.annotation(remoteChange))) return;
      const main = update.state.selection.main;
      onLocalChange(update.docChanged ? update.state.doc.toString() : undefined, [main.anchor, main.head]);
    });
    view.dispatch({ effects: StateEffect.appendConfig.of([presenterSelection, this.lock.of([]), listener]) });
  }

  setReadOnly(readOnly: boolean): void {
    this.view.dispatch({
      effects: this.lock.reconfigure(readOnly ? [EditorState.readOnly.of(true), EditorView.editable.of(false)] : []),
    });
  }

  /** The presenter's code (undefined: unchanged) and selection (null: none shown). */
  showPresenter(code: string | undefined, selection: Selection | null): void {
    const span = code === undefined ? null : changedSpan(this.view.state.doc.toString(), code);
    const length = (code ?? this.view.state.doc.toString()).length;
    const effects: StateEffect<unknown>[] = [setPresenterSelection.of(selection)];
    if (selection) effects.push(EditorView.scrollIntoView(Math.min(selection[1], length), { y: "nearest" }));
    this.view.dispatch({ changes: span ?? undefined, effects, annotations: remoteChange.of(true) });
  }

  /** Replaces the code without reporting it as a local edit (a slide change arriving). */
  setCode(code: string): void {
    const span = changedSpan(this.view.state.doc.toString(), code);
    if (span) this.view.dispatch({ changes: span, annotations: remoteChange.of(true) });
  }

  hidePresenter(): void {
    this.view.dispatch({ effects: setPresenterSelection.of(null) });
  }
}
