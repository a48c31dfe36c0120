/**
 * The module before and after one XLA pass, side by side: the HLO view's highlighting, unchanged
 * stretches folded away, and each side's lines linked to the user's code like the HLO view
 * (the pointer over a line marks its source line in the editor, a double-click goes there).
 */

import { MergeView } from "@codemirror/merge";
import { EditorView } from "@codemirror/view";
import { IR_LANGUAGES } from "../ir/hlo";
import { type ArtifactViewHooks, irExtensions, type LineRange, showLinkedSource, sourceLineAt } from "../ir/inspect_view";

export interface DiffSide {
  text: string;
  ranges: readonly LineRange[];
}

export class LinkedPassDiff {
  readonly element: HTMLElement;
  private merge: MergeView | null = null;
  private hovered: number | null = null;

  constructor(private readonly hooks: ArtifactViewHooks) {
    this.element = document.createElement("div");
    this.element.className = "inspect-diff passes-diff";
    this.element.dataset.testid = "passes-diff";
  }

  show(before: DiffSide, after: DiffSide, wrap: boolean): void {
    this.clear();
    const side = (label: string) => [...irExtensions(`HLO ${label} the pass (read-only)`), IR_LANGUAGES.hlo,
                                       wrap ? EditorView.lineWrapping : []];
    this.merge = new MergeView({
      a: { doc: before.text, extensions: side("before") },
      b: { doc: after.text, extensions: side("after") },
      parent: this.element,
      gutter: true,
      highlightChanges: true,
      collapseUnchanged: { margin: 3, minSize: 8 },
      diffConfig: { scanLimit: 2000, timeout: 800 },
    });
    this.link(this.merge.a, before.ranges);
    this.link(this.merge.b, after.ranges);
  }

  clear(): void {
    this.merge?.destroy();
    this.merge = null;
    this.setHovered(null);
  }

  private link(view: EditorView, ranges: readonly LineRange[]): void {
    const sourceAt = (e: MouseEvent): number | null => {
      const pos = view.posAtCoords({ x: e.clientX, y: e.clientY });
      return pos === null ? null : sourceLineAt(ranges, view.state.doc.lineAt(pos).number);
    };
    view.dom.addEventListener("mousemove", (e) => this.setHovered(ranges.length ? sourceAt(e) : null));
    view.dom.addEventListener("mouseleave", () => this.setHovered(null));
    view.dom.addEventListener("dblclick", (e) => {
      const line = sourceAt(e);
      if (line !== null) this.hooks.onOpenSource(line);
    });
  }

  private setHovered(line: number | null): void {
    if (line === this.hovered) return;
    this.hovered = line;
    showLinkedSource(this.element, line);
    this.hooks.onHoverSource(line);
  }
}
