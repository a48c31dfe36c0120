/**
 * Read-only CodeMirror views for IR text: one artifact at a time with search,
 * wrap and source-line hover, or a side-by-side diff of two compilations.
 *
 * CodeMirror renders only the lines in view and the stream languages only
 * tokenize what is shown, so multi-megabyte HLO stays responsive.
 */

import { codeFolding, foldEffect, HighlightStyle, syntaxHighlighting } from "@codemirror/language";
import { MergeView } from "@codemirror/merge";
import { highlightSelectionMatches, openSearchPanel, search, searchKeymap } from "@codemirror/search";
import { Compartment, EditorState, type Extension } from "@codemirror/state";
import { drawSelection, EditorView, highlightActiveLine, keymap, lineNumbers } from "@codemirror/view";
import { tags as t } from "@lezer/highlight";
import { foldHloMetadata, hloMetadataLines, IR_LANGUAGES, type IrDialect } from "./hlo";

/** [first text line, last text line, user source line], 1-based and inclusive. */
export type LineRange = [number, number, number];

const irHighlight = HighlightStyle.define([
  { tag: t.keyword, color: "var(--tok-keyword)" },
  { tag: t.function(t.variableName), color: "var(--tok-function)", fontWeight: "600" },
  { tag: t.definition(t.variableName), color: "var(--tok-self)" },
  { tag: t.variableName, color: "var(--text)" },
  { tag: t.special(t.variableName), color: "var(--tok-property)" },
  { tag: t.typeName, color: "var(--tok-class)" },
  { tag: t.propertyName, color: "var(--tok-property)" },
  { tag: t.number, color: "var(--tok-number)" },
  { tag: [t.string, t.atom], color: "var(--tok-string)" },
  { tag: [t.comment, t.meta], color: "var(--tok-comment)" },
  { tag: t.labelName, color: "var(--tok-decorator)" },
  { tag: [t.operator, t.punctuation], color: "var(--tok-punct)" },
]);

const irTheme = EditorView.theme({
  "&": { height: "100%", fontSize: "var(--code-size)", backgroundColor: "var(--editor-bg)" },
  ".cm-scroller": { fontFamily: "var(--mono)", lineHeight: "1.5" },
  ".cm-gutters": { backgroundColor: "var(--surface-2)", color: "var(--text-faint)", border: "none" },
  ".cm-activeLine": { backgroundColor: "var(--hover-line)" },
  ".cm-ir-linked": { cursor: "pointer" },
  // A diff's folded lines: the merge view's own marks (U+299A) are missing from common fonts and draw as boxes.
  ".cm-collapsedLines:before": { content: '"\\2195"' },
  ".cm-collapsedLines:after": { content: '"\\2195"' },
});

/** What a screen reader calls an IR view of each dialect. */
export const IR_NAMES: Record<IrDialect, string> = { jaxpr: "jaxpr", stablehlo: "StableHLO", hlo: "Optimized HLO" };

/** Everything an IR view has except its language and wrapping; `label` names it (it is read-only text). */
export function irExtensions(label = "Compiled program (read-only)"): Extension[] {
  return [
    lineNumbers(),
    drawSelection(),
    EditorState.readOnly.of(true),
    EditorView.editable.of(false),
    // Focusable, so Ctrl+F and selection work; named, since a text field without a name is a puzzle.
    EditorView.contentAttributes.of({ tabindex: "0", "aria-label": label, "aria-readonly": "true" }),
    syntaxHighlighting(irHighlight),
    highlightSelectionMatches(),
    search({ top: true }),
    keymap.of(searchKeymap),
    irTheme,
  ];
}

/** Binary search of sorted ranges: the source line of a text line, or null. */
export function sourceLineAt(ranges: readonly LineRange[], textLine: number): number | null {
  let lo = 0;
  let hi = ranges.length - 1;
  while (lo <= hi) {
    const mid = (lo + hi) >> 1;
    const [first, last, source] = ranges[mid];
    if (textLine < first) hi = mid - 1;
    else if (textLine > last) lo = mid + 1;
    else return source;
  }
  return null;
}

export interface ArtifactViewHooks {
  /** The pointer is over a text line that came from this user source line (null: none). */
  onHoverSource(line: number | null): void;
  /** Double-click on such a line: go there. */
  onOpenSource(line: number): void;
}

export class ArtifactView {
  readonly element: HTMLElement;
  private view: EditorView;
  private readonly wrapping = new Compartment();
  private ranges: readonly LineRange[] = [];
  private hovered: number | null = null;
  private wrap = false;

  constructor(private readonly hooks: ArtifactViewHooks) {
    this.element = document.createElement("div");
    this.element.className = "inspect-code";
    this.element.dataset.testid = "inspect-code";
    this.view = new EditorView({ parent: this.element, state: this.state("", "jaxpr") });
    this.element.addEventListener("mousemove", (e) => this.onPointer(e));
    this.element.addEventListener("mouseleave", () => this.setHovered(null));
    this.element.addEventListener("dblclick", (e) => {
      const line = this.sourceAt(e);
      if (line !== null) this.hooks.onOpenSource(line);
    });
  }

  private state(text: string, dialect: IrDialect): EditorState {
    return EditorState.create({
      doc: text,
      extensions: [
        ...irExtensions(`${IR_NAMES[dialect]} (read-only)`),
        IR_LANGUAGES[dialect],
        this.wrapping.of(this.wrap ? EditorView.lineWrapping : []),
        highlightActiveLine(),
        codeFolding({ placeholderDOM: (_view, onclick) => foldedMetadata(onclick) }),
      ],
    });
  }

  show(text: string, dialect: IrDialect, ranges: readonly LineRange[]): void {
    this.ranges = ranges;
    this.view.setState(this.state(text, dialect));
    this.element.dataset.dialect = dialect;
    const metadata = dialect === "hlo" ? hloMetadataLines(text) : null;
    if (metadata) {
      const doc = this.view.state.doc;
      this.view.dispatch({ effects: foldEffect.of({ from: doc.line(metadata[0]).from, to: doc.line(metadata[1]).to }) });
    }
    this.setHovered(null);
  }

  get text(): string {
    return this.view.state.doc.toString();
  }

  setWrap(wrap: boolean): void {
    this.wrap = wrap;
    this.view.dispatch({ effects: this.wrapping.reconfigure(wrap ? EditorView.lineWrapping : []) });
  }

  openSearch(): void {
    this.view.focus();
    openSearchPanel(this.view);
  }

  /** Lay out again after the panel was hidden (CodeMirror measures lazily). */
  refresh(): void {
    this.view.requestMeasure();
  }

  /** Put the cursor on a line (1-based) and scroll it to the middle. */
  revealLine(line: number): void {
    const doc = this.view.state.doc;
    if (line < 1 || line > doc.lines) return;
    const at = doc.line(line).from;
    this.view.dispatch({ selection: { anchor: at }, effects: EditorView.scrollIntoView(at, { y: "center" }) });
  }

  private sourceAt(e: MouseEvent): number | null {
    const pos = this.view.posAtCoords({ x: e.clientX, y: e.clientY });
    if (pos === null) return null;
    return sourceLineAt(this.ranges, this.view.state.doc.lineAt(pos).number);
  }

  private onPointer(e: MouseEvent): void {
    if (!this.ranges.length) return;
    this.setHovered(this.sourceAt(e));
  }

  private setHovered(line: number | null): void {
    if (line === this.hovered) return;
    this.hovered = line;
    showLinkedSource(this.element, line);
    this.hooks.onHoverSource(line);
  }
}

/** An IR view under the pointer: says which line of the user's code the text came from (null: none). */
export function showLinkedSource(element: HTMLElement, line: number | null): void {
  element.classList.toggle("cm-ir-linked", line !== null);
  element.title = line === null ? "" : `From line ${line} of your code (double-click to go there)`;
}

function linesText(count: number): string {
  return count === 0 ? "none" : count === 1 ? "1 line" : `${count} lines`;
}

/** What stands for HLO's folded debug-info tables; a click unfolds them. */
function foldedMetadata(onclick: (event: Event) => void): HTMLElement {
  const button = document.createElement("button");
  button.type = "button";
  button.className = "inspect-folded";
  button.dataset.testid = "hlo-metadata-fold";
  button.textContent = "▸ file and stack-frame metadata (click to show)";
  button.addEventListener("click", onclick);
  return button;
}

/**
 * Two compilations side by side, unchanged stretches folded away, and HLO's debug-info tables
 * folded as the single view folds them (a button shows them, differences and all). Hidden while
 * it shows nothing.
 */
export class DiffView {
  readonly element: HTMLElement;
  private readonly note: HTMLElement;
  private readonly host: HTMLElement;
  private merge: MergeView | null = null;
  private shown: { before: string; after: string; dialect: IrDialect; wrap: boolean } | null = null;
  private metadataShown = false;

  constructor() {
    this.element = document.createElement("div");
    this.element.className = "inspect-diff";
    this.element.dataset.testid = "inspect-diff";
    this.element.hidden = true;
    this.note = document.createElement("div");
    this.note.className = "inspect-diff-metadata";
    this.host = document.createElement("div");
    this.host.className = "inspect-diff-host";
    this.element.append(this.note, this.host);
  }

  show(before: string, after: string, dialect: IrDialect, wrap: boolean): void {
    this.shown = { before, after, dialect, wrap };
    this.draw();
  }

  private draw(): void {
    if (!this.shown) return;
    const { dialect, wrap } = this.shown;
    let { before, after } = this.shown;
    let folded: [number, number] = [0, 0];
    if (dialect === "hlo" && !this.metadataShown) {
      const a = foldHloMetadata(before);
      const b = foldHloMetadata(after);
      [before, after, folded] = [a.text, b.text, [a.folded, b.folded]];
    }
    this.drawNote(folded);
    this.merge?.destroy();
    const side = (label: string) => [...irExtensions(`${IR_NAMES[dialect]}, ${label} (read-only)`), IR_LANGUAGES[dialect],
                                       wrap ? EditorView.lineWrapping : []];
    this.element.hidden = false;
    this.merge = new MergeView({
      a: { doc: before, extensions: side("before") },
      b: { doc: after, extensions: side("after") },
      parent: this.host,
      gutter: true,
      highlightChanges: true,
      collapseUnchanged: { margin: 3, minSize: 8 },
      // Big modules that differ a lot: give up on a minimal diff rather than freeze.
      diffConfig: { scanLimit: 2000, timeout: 800 },
    });
  }

  private drawNote([before, after]: [number, number]): void {
    const hasTables = this.shown?.dialect === "hlo" && (this.metadataShown || before + after > 0);
    this.note.hidden = !hasTables;
    if (!hasTables) {
      this.note.replaceChildren();
      return;
    }
    const toggle = document.createElement("button");
    toggle.type = "button";
    toggle.className = "inspect-folded";
    toggle.dataset.testid = "diff-metadata-toggle";
    toggle.textContent = this.metadataShown
      ? "▾ XLA's file and stack-frame tables are shown (click to fold them)"
      : `▸ XLA's file and stack-frame tables are folded (left: ${linesText(before)}, right: ${linesText(after)}; ` +
        "click to compare them too)";
    toggle.addEventListener("click", () => {
      this.metadataShown = !this.metadataShown;
      this.draw();
    });
    this.note.replaceChildren(toggle);
  }

  clear(): void {
    this.merge?.destroy();
    this.merge = null;
    this.shown = null;
    this.element.hidden = true;
  }
}
