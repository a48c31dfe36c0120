/**
 * The CodeMirror 6 editor: Python, line numbers, the run shortcut, themes
 * that follow the system setting, and line marks that panels put on the code
 * (the error line, lines an IR equation came from, ...). `EditorAccess` is
 * what the rest of the page may do with it: panels get it, and depend on this
 * module for it.
 *
 * Line marks live in one state field keyed by owner, so one panel replacing
 * its marks never disturbs another's. Marks follow the text through edits;
 * an owner's marks set with `clearOnEdit` vanish at the first edit instead.
 */

import { autocompletion, closeBrackets, closeBracketsKeymap, completionKeymap } from "@codemirror/autocomplete";
import { defaultKeymap, history, historyKeymap } from "@codemirror/commands";
import { python } from "@codemirror/lang-python";
import {
  bracketMatching,
  foldGutter,
  foldKeymap,
  HighlightStyle,
  indentOnInput,
  indentUnit,
  syntaxHighlighting,
} from "@codemirror/language";
import { highlightSelectionMatches, searchKeymap } from "@codemirror/search";
import { Compartment, EditorSelection, EditorState, type Extension, Prec, RangeSet, StateEffect, StateField } from "@codemirror/state";
import {
  Decoration,
  type DecorationSet,
  drawSelection,
  EditorView,
  GutterMarker,
  gutter,
  highlightActiveLine,
  highlightActiveLineGutter,
  highlightSpecialChars,
  keymap,
  lineNumbers,
  rectangularSelection,
} from "@codemirror/view";
import { tags as t } from "@lezer/highlight";
import { keyboardExit } from "./keyboard_exit";

// --- what the page and its panels may do with the editor -------------------

/**
 * How a line of the user's code is marked: a tinted line, plus a gutter dot unless "hover" or "band".
 * A "band" is the colour Inspect's side-by-side panes give a source line and everything compiled from it
 * (`band` picks one of the palette's colours, `--band-0` ...).
 */
export type LineMarkKind = "error" | "warning" | "info" | "hover" | "band";

export interface LineMark {
  /** 1-based line in the editor. */
  line: number;
  kind: LineMarkKind;
  /** Shown as a tooltip on the gutter marker. */
  title?: string;
  /** For a "band": which of the palette's colours. */
  band?: number;
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

// --- line marks -------------------------------------------------------------

interface PlacedMark {
  /** Offset of the start of the marked line; mapped through edits. */
  pos: number;
  kind: LineMarkKind;
  title?: string;
  band?: number;
}

interface OwnerMarks {
  marks: PlacedMark[];
  clearOnEdit: boolean;
}

type MarksState = ReadonlyMap<string, OwnerMarks>;

const setMarksEffect = StateEffect.define<{ owner: string; marks: PlacedMark[]; clearOnEdit: boolean }>();

const marksField = StateField.define<MarksState>({
  create: () => new Map(),
  update(value, tr) {
    let next: Map<string, OwnerMarks> | null = null;
    if (tr.docChanged) {
      next = new Map();
      for (const [owner, entry] of value) {
        if (entry.clearOnEdit) continue;
        const marks = entry.marks.map((m) => ({ ...m, pos: tr.changes.mapPos(m.pos, -1) }));
        next.set(owner, { ...entry, marks });
      }
    }
    for (const effect of tr.effects) {
      if (!effect.is(setMarksEffect)) continue;
      next ??= new Map(value);
      if (effect.value.marks.length) next.set(effect.value.owner, effect.value);
      else next.delete(effect.value.owner);
    }
    return next ?? value;
  },
});

class MarkGutterMarker extends GutterMarker {
  constructor(
    readonly kind: LineMarkKind,
    readonly title: string,
  ) {
    super();
  }
  eq(other: GutterMarker): boolean {
    return other instanceof MarkGutterMarker && other.kind === this.kind && other.title === this.title;
  }
  toDOM(): Node {
    const dot = document.createElement("span");
    dot.className = `cm-mark-dot cm-mark-dot-${this.kind}`;
    if (this.title) dot.title = this.title;
    return dot;
  }
}

/** Marks sorted by position, the strongest kind first where several share a line. */
function sortedMarks(state: EditorState): PlacedMark[] {
  const rank: Record<LineMarkKind, number> = { error: 0, warning: 1, info: 2, hover: 3, band: 4 };
  const all: PlacedMark[] = [];
  for (const entry of state.field(marksField).values()) all.push(...entry.marks);
  return all
    .filter((m) => m.pos <= state.doc.length)
    .map((m) => ({ ...m, pos: state.doc.lineAt(m.pos).from }))
    .sort((a, b) => a.pos - b.pos || rank[a.kind] - rank[b.kind]);
}

const markDecorations = EditorView.decorations.compute([marksField], (state): DecorationSet => {
  const ranges = sortedMarks(state).map((m) =>
    m.kind === "band"
      ? Decoration.line({ class: `cm-band cm-band-${m.band ?? 0}`, attributes: { "data-band": String(m.band ?? 0) } }).range(m.pos)
      : Decoration.line({ class: `cm-mark-line cm-mark-line-${m.kind}`, attributes: { "data-mark": m.kind } }).range(m.pos),
  );
  return Decoration.set(ranges, true);
});

const markGutter = gutter({
  class: "cm-mark-gutter",
  markers: (view) => {
    const seen = new Set<number>();
    const ranges = [];
    for (const m of sortedMarks(view.state)) {
      if (m.kind === "hover" || m.kind === "band" || seen.has(m.pos)) continue;
      seen.add(m.pos);
      ranges.push(new MarkGutterMarker(m.kind, m.title ?? "").range(m.pos));
    }
    return RangeSet.of(ranges, true);
  },
  initialSpacer: () => new MarkGutterMarker("info", ""),
});

// --- theme ------------------------------------------------------------------

/** Colours come from CSS variables (core/base.css), so one theme serves light and dark. */
const playgroundTheme = EditorView.theme({
  "&": { height: "100%", backgroundColor: "var(--editor-bg)", color: "var(--text)", fontSize: "var(--code-size)" },
  ".cm-scroller": { fontFamily: "var(--mono)", lineHeight: "1.55" },
  ".cm-content": { caretColor: "var(--caret)", padding: "10px 0" },
  ".cm-cursor, .cm-dropCursor": { borderLeftColor: "var(--caret)", borderLeftWidth: "2px" },
  "&.cm-focused": { outline: "none" },
  "&.cm-focused > .cm-scroller > .cm-selectionLayer .cm-selectionBackground, .cm-selectionBackground, ::selection": {
    backgroundColor: "var(--selection) !important",
  },
  ".cm-gutters": { backgroundColor: "var(--editor-bg)", color: "var(--text-faint)", border: "none" },
  ".cm-lineNumbers .cm-gutterElement": { padding: "0 6px 0 14px", minWidth: "34px" },
  ".cm-activeLine": { backgroundColor: "var(--active-line)" },
  ".cm-activeLineGutter": { backgroundColor: "transparent", color: "var(--text-dim)" },
  ".cm-foldGutter .cm-gutterElement": { color: "var(--text-faint)", padding: "0 2px" },
  ".cm-matchingBracket, &.cm-focused .cm-matchingBracket": {
    backgroundColor: "var(--bracket-match)",
    outline: "1px solid var(--border-strong)",
  },
  ".cm-selectionMatch": { backgroundColor: "var(--selection-match)" },
  ".cm-searchMatch": { backgroundColor: "var(--search-match)", outline: "1px solid var(--warning)" },
  ".cm-tooltip": { backgroundColor: "var(--surface)", color: "var(--text)", border: "1px solid var(--border)" },
  ".cm-tooltip-autocomplete > ul > li[aria-selected]": { backgroundColor: "var(--accent)", color: "var(--on-accent)" },
  ".cm-panels": { backgroundColor: "var(--surface)", color: "var(--text)" },
  ".cm-panels.cm-panels-top": { borderBottom: "1px solid var(--border)" },
  ".cm-panels.cm-panels-bottom": { borderTop: "1px solid var(--border)" },
  ".cm-keys-hint": {
    padding: "3px 12px", backgroundColor: "var(--surface-2)", color: "var(--text-dim)", fontFamily: "var(--ui)", fontSize: "12px",
  },
  ".cm-keys-hint kbd": { fontSize: "11px", padding: "0 4px" },
  ".cm-mark-gutter .cm-gutterElement": { display: "flex", alignItems: "center", justifyContent: "center", width: "10px" },
  ".cm-mark-dot": { display: "block", width: "7px", height: "7px", borderRadius: "50%" },
  ".cm-mark-dot-error": { backgroundColor: "var(--error)" },
  ".cm-mark-dot-warning": { backgroundColor: "var(--warning)" },
  ".cm-mark-dot-info": { backgroundColor: "var(--accent)" },
  ".cm-mark-line-error": { backgroundColor: "var(--error-line)", boxShadow: "inset 3px 0 0 var(--error)" },
  ".cm-mark-line-warning": { backgroundColor: "var(--warning-line)", boxShadow: "inset 3px 0 0 var(--warning)" },
  ".cm-mark-line-info": { backgroundColor: "var(--info-line)", boxShadow: "inset 3px 0 0 var(--accent)" },
  ".cm-mark-line-hover": { backgroundColor: "var(--hover-line)" },
});

const highlightStyle = HighlightStyle.define([
  { tag: [t.keyword, t.controlKeyword, t.definitionKeyword, t.moduleKeyword, t.operatorKeyword], color: "var(--tok-keyword)" },
  { tag: [t.string, t.special(t.string)], color: "var(--tok-string)" },
  { tag: [t.number, t.bool, t.null], color: "var(--tok-number)" },
  { tag: [t.comment, t.lineComment], color: "var(--tok-comment)", fontStyle: "italic" },
  { tag: [t.function(t.variableName), t.function(t.propertyName)], color: "var(--tok-function)" },
  { tag: t.definition(t.function(t.variableName)), color: "var(--tok-function)", fontWeight: "600" },
  { tag: [t.className, t.definition(t.className)], color: "var(--tok-class)" },
  { tag: [t.meta, t.annotation], color: "var(--tok-decorator)" },
  { tag: [t.self, t.special(t.variableName)], color: "var(--tok-self)", fontStyle: "italic" },
  { tag: t.propertyName, color: "var(--tok-property)" },
  { tag: [t.operator, t.punctuation, t.bracket], color: "var(--tok-punct)" },
  { tag: t.invalid, color: "var(--error)" },
]);

// --- the editor -------------------------------------------------------------

export interface EditorOptions {
  parent: HTMLElement;
  doc: string;
  /** Called for Mod-Enter (Ctrl+Enter, Cmd+Enter on a Mac). */
  onRun: () => void;
  onChange?: (code: string) => void;
  readOnly?: boolean;
  /** More behaviour (completion from the API index, syntax marks, ...). */
  extensions?: Extension[];
}

export interface PlaygroundEditor extends EditorAccess {
  view: EditorView;
  setCode(code: string): void;
  focus(): void;
}

export function createEditor(options: EditorOptions): PlaygroundEditor {
  const darkMode = window.matchMedia("(prefers-color-scheme: dark)");
  const darkCompartment = new Compartment();
  const extensions: Extension[] = [
    lineNumbers(),
    markGutter,
    foldGutter(),
    highlightActiveLineGutter(),
    highlightSpecialChars(),
    history(),
    drawSelection(),
    EditorState.allowMultipleSelections.of(true),
    indentOnInput(),
    indentUnit.of("    "),
    EditorState.tabSize.of(4),
    bracketMatching(),
    closeBrackets(),
    autocompletion({ activateOnTyping: true }),
    rectangularSelection(),
    highlightActiveLine(),
    highlightSelectionMatches(),
    python(),
    syntaxHighlighting(highlightStyle),
    playgroundTheme,
    darkCompartment.of(EditorView.darkTheme.of(darkMode.matches)),
    marksField,
    markDecorations,
    Prec.highest(
      keymap.of([
        { key: "Mod-Enter", run: () => (options.onRun(), true), preventDefault: true },
      ]),
    ),
    keymap.of([
      ...closeBracketsKeymap,
      ...defaultKeymap,
      ...searchKeymap,
      ...historyKeymap,
      ...foldKeymap,
      ...completionKeymap,
    ]),
    // Tab indents only once the person edits, and Escape then Tab always leaves (keyboard_exit.ts).
    keyboardExit(options.parent),
    EditorView.contentAttributes.of({ "aria-label": "Python code", "data-testid": "editor" }),
    EditorState.readOnly.of(options.readOnly ?? false),
    ...(options.extensions ?? []),
  ];
  if (options.onChange) {
    const onChange = options.onChange;
    extensions.push(EditorView.updateListener.of((u) => u.docChanged && onChange(u.state.doc.toString())));
  }
  const view = new EditorView({ parent: options.parent, state: EditorState.create({ doc: options.doc, extensions }) });
  darkMode.addEventListener("change", (e) =>
    view.dispatch({ effects: darkCompartment.reconfigure(EditorView.darkTheme.of(e.matches)) }),
  );

  function lineStart(line: number): number | null {
    if (!Number.isInteger(line) || line < 1 || line > view.state.doc.lines) return null;
    return view.state.doc.line(line).from;
  }

  return {
    view,
    getCode: () => view.state.doc.toString(),
    setCode(code: string) {
      view.dispatch({ changes: { from: 0, to: view.state.doc.length, insert: code } });
    },
    focus: () => view.focus(),
    goToLine(line: number, column = 1) {
      const from = lineStart(line);
      if (from === null) return;
      const target = view.state.doc.line(line);
      const pos = Math.min(target.to, from + Math.max(0, column - 1));
      view.dispatch({
        selection: EditorSelection.cursor(pos),
        effects: EditorView.scrollIntoView(pos, { y: "center" }),
      });
      view.focus();
    },
    setLineMarks(owner: string, marks: readonly LineMark[], opts?: { clearOnEdit?: boolean }) {
      const placed: PlacedMark[] = [];
      for (const m of marks) {
        const pos = lineStart(m.line);
        if (pos !== null) placed.push({ pos, kind: m.kind, title: m.title, band: m.band });
      }
      view.dispatch({ effects: setMarksEffect.of({ owner, marks: placed, clearOnEdit: opts?.clearOnEdit ?? false }) });
    },
    clearLineMarks(owner: string) {
      view.dispatch({ effects: setMarksEffect.of({ owner, marks: [], clearOnEdit: false }) });
    },
  };
}
