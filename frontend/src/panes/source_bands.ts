/**
 * The colours that tie each line of the program to what was compiled from it, as Compiler Explorer
 * colours source lines and their assembly: every source line that some IR text points back at gets one
 * of `BAND_COUNT` colours (neighbours differ: the palette cycles in line order), and that colour stays on,
 * in every pane and in the editor, for the source line and all lines compiled from it.
 *
 * In a CodeMirror view the colours are line decorations built for the lines on screen only (the view
 * plugin rebuilds them when the viewport moves), found by binary search in the text's run-length ranges,
 * so a 100,000-line HLO module costs what its visible 50 lines cost. The source line under the pointer or
 * selected is "hot" (`setHotSource`): its lines get an outline in every pane.
 */

import { type Extension, RangeSetBuilder, StateEffect, StateField } from "@codemirror/state";
import { Decoration, type DecorationSet, type EditorView, ViewPlugin, type ViewUpdate } from "@codemirror/view";
import type { LineRange } from "../ir/inspect_view";

/** How many colours the palette has (`--band-0` ... in panes.css, light and dark). */
export const BAND_COUNT = 10;

/** Source line -> its colour: the lines any of the texts point back at, in order, cycling the palette. */
export function bandsOf(rangeLists: readonly (readonly LineRange[])[]): Map<number, number> {
  const lines = new Set<number>();
  for (const ranges of rangeLists) for (const range of ranges) lines.add(range[2]);
  const sorted = [...lines].sort((a, b) => a - b);
  return new Map(sorted.map((line, i) => [line, i % BAND_COUNT]));
}

/** The ranges of the program's own text: each coloured line maps to itself. */
export function sourceRanges(bands: ReadonlyMap<number, number>): LineRange[] {
  return [...bands.keys()].sort((a, b) => a - b).map((line): LineRange => [line, line, line]);
}

/** Source line -> the first text line of each run compiled from it, in text order (where a pane scrolls). */
export function firstLinesBySource(ranges: readonly LineRange[]): Map<number, number[]> {
  const found = new Map<number, number[]>();
  for (const [first, , source] of ranges) {
    const lines = found.get(source);
    if (lines) lines.push(first);
    else found.set(source, [first]);
  }
  return found;
}

/** Index of the first range that ends at or after `line` (ranges sorted and disjoint). */
export function firstRangeFrom(ranges: readonly LineRange[], line: number): number {
  let lo = 0;
  let hi = ranges.length;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (ranges[mid][1] < line) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

/** The source line whose lines are outlined in this view (null: none). */
export const setHotSource = StateEffect.define<number | null>();

const hotSource = StateField.define<number | null>({
  create: () => null,
  update(value, tr) {
    for (const effect of tr.effects) if (effect.is(setHotSource)) value = effect.value;
    return value;
  },
});

const PLAIN = Array.from({ length: BAND_COUNT }, (_, i) =>
  Decoration.line({ class: `cm-band cm-band-${i}`, attributes: { "data-band": String(i) } }),
);
const HOT = Array.from({ length: BAND_COUNT }, (_, i) =>
  Decoration.line({ class: `cm-band cm-band-${i} cm-band-hot`, attributes: { "data-band": String(i), "data-hot": "" } }),
);

function decorationsInView(view: EditorView, ranges: readonly LineRange[], bands: ReadonlyMap<number, number>): DecorationSet {
  const builder = new RangeSetBuilder<Decoration>();
  const doc = view.state.doc;
  const hot = view.state.field(hotSource);
  let done = 0; // the last line decorated: visible ranges may share a line
  for (const { from, to } of view.visibleRanges) {
    const first = Math.max(doc.lineAt(from).number, done + 1);
    const last = doc.lineAt(to).number;
    for (let i = firstRangeFrom(ranges, first); i < ranges.length && ranges[i][0] <= last; i++) {
      const [start, end, source] = ranges[i];
      const band = bands.get(source);
      if (band === undefined) continue;
      const decoration = source === hot ? HOT[band] : PLAIN[band];
      for (let line = Math.max(start, first); line <= Math.min(end, last, doc.lines); line++) {
        const at = doc.line(line).from;
        builder.add(at, at, decoration);
      }
    }
    done = Math.max(done, last);
  }
  return builder.finish();
}

/** Colours for a text whose lines map to source lines through `ranges`. */
export function sourceBands(ranges: readonly LineRange[], bands: ReadonlyMap<number, number>): Extension {
  const plugin = ViewPlugin.fromClass(
    class {
      decorations: DecorationSet;
      constructor(view: EditorView) {
        this.decorations = decorationsInView(view, ranges, bands);
      }
      update(update: ViewUpdate) {
        const hotMoved = update.transactions.some((tr) => tr.effects.some((e) => e.is(setHotSource)));
        if (update.docChanged || update.viewportChanged || hotMoved) {
          this.decorations = decorationsInView(update.view, ranges, bands);
        }
      }
    },
    { decorations: (plugin) => plugin.decorations },
  );
  return [hotSource, plugin];
}
