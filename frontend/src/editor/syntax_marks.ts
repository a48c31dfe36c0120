/**
 * Syntax errors marked before running: the editor's Python parser (the same
 * one that colours the code) recovers from errors by inserting error nodes;
 * their lines get a warning mark, a moment after typing stops so a line being
 * written is not flagged at every keystroke.
 */

import { ensureSyntaxTree } from "@codemirror/language";
import type { EditorState } from "@codemirror/state";
import { type EditorView, ViewPlugin, type ViewUpdate } from "@codemirror/view";
import type { EditorAccess } from "./editor";

const QUIET_MS = 600;
const PARSE_BUDGET_MS = 50;
const OWNER = "syntax";

/** 1-based lines holding a parse error (at most one mark per line). */
export function syntaxErrorLines(state: EditorState): number[] {
  const tree = ensureSyntaxTree(state, state.doc.length, PARSE_BUDGET_MS);
  if (!tree) return [];
  const lines = new Set<number>();
  tree.iterate({
    enter(node) {
      if (!node.type.isError) return;
      // An error node at the very end of a line belongs to that line, not the next.
      const at = Math.max(0, Math.min(node.from, state.doc.length));
      lines.add(state.doc.lineAt(at).number);
    },
  });
  return [...lines].sort((a, b) => a - b);
}

/** Keeps the "syntax" marks up to date; `editor` is read lazily (the view exists before its wrapper). */
export function syntaxMarks(editor: () => EditorAccess | null) {
  return ViewPlugin.fromClass(
    class {
      private timer: number | null = null;

      constructor(private readonly view: EditorView) {
        this.schedule();
      }

      update(update: ViewUpdate): void {
        if (update.docChanged) this.schedule();
      }

      destroy(): void {
        if (this.timer !== null) window.clearTimeout(this.timer);
      }

      private schedule(): void {
        if (this.timer !== null) window.clearTimeout(this.timer);
        this.timer = window.setTimeout(() => this.check(), QUIET_MS);
      }

      private check(): void {
        this.timer = null;
        const marks = syntaxErrorLines(this.view.state).map((line) => ({
          line,
          kind: "warning" as const,
          title: "Python cannot parse this line (a syntax error): fix it before running",
        }));
        editor()?.setLineMarks(OWNER, marks);
      }
    },
  );
}
