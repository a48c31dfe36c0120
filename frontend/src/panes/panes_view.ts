/**
 * Inspect's side-by-side view: the program and what JAX made of it (jaxpr, StableHLO, optimized HLO) in up to
 * three read-only panes at once, every source line and the lines compiled from it in one colour
 * (source_bands.ts). Pointing at a line in any pane outlines the lines of the same source line in all of
 * them (and in the editor); clicking one, or moving the cursor there with the keyboard, selects it, and the
 * other panes scroll to it. Each pane's header picks what it shows; the arrangement is the caller's to keep
 * in the address and in shared links (pane_layout.ts).
 *
 * Where the view is narrower than `NARROW_PX` (a phone) the panes stack into one: the buttons above them
 * pick which one shows (panes.css, a container query).
 */

import { python } from "@codemirror/lang-python";
import { codeFolding, foldEffect } from "@codemirror/language";
import { EditorState, type Extension } from "@codemirror/state";
import { EditorView } from "@codemirror/view";
import { el } from "../core/dom";
import { hloMetadataLines, IR_LANGUAGES } from "../ir/hlo";
import type { CompiledEvent } from "../ir/inspect_types";
import { irExtensions, type LineRange, sourceLineAt } from "../ir/inspect_view";
import { DEFAULT_PANES, MAX_PANES, PANE_KINDS, PANE_TITLES, type PaneKind } from "./pane_layout";
import { bandsOf, firstLinesBySource, setHotSource, sourceBands, sourceRanges } from "./source_bands";
import "./panes.css";

export interface PanesHooks {
  /** The source line under the pointer, or selected (null: none): mark it in the editor. */
  onHotSource(line: number | null): void;
  /** Double-click on a line compiled from `line`: go there in the editor. */
  onOpenSource(line: number): void;
  /** The person changed which panes show. */
  onArrangement(kinds: PaneKind[]): void;
}

interface Pane {
  kind: PaneKind;
  element: HTMLElement;
  body: HTMLElement;
  view: EditorView;
  ranges: readonly LineRange[];
  firstLines: Map<number, number[]>;
}

export class PanesView {
  readonly element: HTMLElement;
  private readonly grid = el("div", { class: "panes-grid", "data-testid": "panes-grid" });
  private readonly switcher = el("div", { class: "panes-switcher", role: "group", "aria-label": "Pane shown" });
  private readonly addButton: HTMLButtonElement;
  private kinds: PaneKind[] = [...DEFAULT_PANES];
  private panes: Pane[] = [];
  private active = 0;
  private compiled: CompiledEvent | null = null;
  private code = "";
  /** Source line -> its colour, for the compilation on screen. */
  bands = new Map<number, number>();
  private hot: number | null = null;
  private selected: number | null = null;

  constructor(private readonly hooks: PanesHooks) {
    this.addButton = el(
      "button",
      {
        class: "btn btn-ghost panes-add",
        type: "button",
        "data-testid": "panes-add",
        title: `Show another pane beside these (at most ${MAX_PANES})`,
        onclick: () => this.addPane(),
      },
      "+ Pane",
    );
    const hint = el(
      "span",
      { class: "panes-hint" },
      "Each line of code and what was compiled from it share a colour. Point at a line to find its match in every pane; click to follow it.",
    );
    this.element = el(
      "div",
      { class: "panes", "data-testid": "panes" },
      el("div", { class: "panes-bar" }, this.switcher, hint, this.addButton),
      this.grid,
    );
  }

  get arrangement(): PaneKind[] {
    return [...this.kinds];
  }

  setArrangement(kinds: readonly PaneKind[]): void {
    this.kinds = kinds.length ? [...kinds] : [...DEFAULT_PANES];
    this.active = Math.min(this.active, this.kinds.length - 1);
    this.rebuild();
  }

  /** Show `compiled`, whose program was `code` (the run's, not the editor's now). */
  show(compiled: CompiledEvent, code: string): void {
    this.compiled = compiled;
    this.code = code;
    this.bands = bandsOf([compiled.source_lines.jaxpr ?? [], compiled.source_lines.stablehlo ?? [], compiled.source_lines.hlo ?? []]);
    this.hot = this.selected = null;
    this.rebuild();
  }

  /** CodeMirror measures lazily: lay out again once the view is on screen. */
  refresh(): void {
    for (const pane of this.panes) pane.view.requestMeasure();
  }

  clear(): void {
    for (const pane of this.panes) pane.view.destroy();
    this.panes = [];
    this.grid.replaceChildren();
    this.compiled = null;
  }

  // --- building -----------------------------------------------------------------

  private rebuild(): void {
    for (const pane of this.panes) pane.view.destroy();
    this.panes = this.kinds.map((kind, index) => this.makePane(kind, index));
    this.grid.replaceChildren(...this.panes.map((p) => p.element));
    this.grid.dataset.count = String(this.panes.length);
    this.addButton.disabled = this.kinds.length >= MAX_PANES;
    this.drawSwitcher();
    this.markActive();
  }

  private textOf(kind: PaneKind): { text: string; ranges: readonly LineRange[] } {
    if (kind === "source") return { text: this.code, ranges: sourceRanges(this.bands) };
    const compiled = this.compiled;
    return { text: compiled?.[kind] ?? "", ranges: compiled?.source_lines?.[kind] ?? [] };
  }

  private makePane(kind: PaneKind, index: number): Pane {
    const { text, ranges } = this.textOf(kind);
    const picker = el("select", { class: "pane-kind", "aria-label": `Pane ${index + 1} shows`, "data-testid": "pane-kind" });
    for (const option of PANE_KINDS) picker.append(el("option", { value: option, selected: option === kind }, PANE_TITLES[option]));
    picker.addEventListener("change", () => {
      this.kinds[index] = picker.value as PaneKind;
      this.changed();
    });
    const close = el(
      "button",
      {
        class: "pane-close",
        type: "button",
        title: "Close this pane",
        "aria-label": `Close the ${PANE_TITLES[kind]} pane`,
        disabled: this.kinds.length <= 1,
        onclick: () => {
          this.kinds.splice(index, 1);
          this.active = Math.min(this.active, this.kinds.length - 1);
          this.changed();
        },
      },
      "×",
    );
    const body = el("div", { class: "pane-body", "data-testid": "pane-code" });
    const element = el("section", { class: "pane", "data-kind": kind, "aria-label": `${PANE_TITLES[kind]} pane` },
      el("div", { class: "pane-head" }, picker, close), body);
    const pane: Pane = { kind, element, body, view: null as unknown as EditorView, ranges, firstLines: firstLinesBySource(ranges) };
    pane.view = new EditorView({ parent: body, state: EditorState.create({ doc: text, extensions: this.extensions(pane, index) }) });
    const metadata = kind === "hlo" ? hloMetadataLines(text) : null;
    if (metadata) {
      const doc = pane.view.state.doc;
      pane.view.dispatch({ effects: foldEffect.of({ from: doc.line(metadata[0]).from, to: doc.line(metadata[1]).to }) });
    }
    body.addEventListener("mousemove", (e) => this.setHot(this.sourceAt(pane, e) ?? this.selected));
    body.addEventListener("mouseleave", () => this.setHot(this.selected));
    body.addEventListener("click", (e) => {
      const source = this.sourceAt(pane, e);
      if (source !== null) this.select(source, pane);
    });
    body.addEventListener("dblclick", (e) => {
      const source = this.sourceAt(pane, e);
      if (source !== null) this.hooks.onOpenSource(source);
    });
    return pane;
  }

  private extensions(pane: Pane, index: number): Extension[] {
    const language = pane.kind === "source" ? python() : IR_LANGUAGES[pane.kind];
    return [
      ...irExtensions(`${PANE_TITLES[pane.kind]}, pane ${index + 1} (read-only)`),
      language,
      sourceBands(pane.ranges, this.bands),
      codeFolding({ placeholderDOM: (_view, onclick) => foldedMetadata(onclick) }),
      // The keyboard's way to select: moving the cursor onto a line.
      EditorView.updateListener.of((update) => {
        if (!update.selectionSet || !update.transactions.some((tr) => tr.isUserEvent("select"))) return;
        const line = update.state.doc.lineAt(update.state.selection.main.head).number;
        const source = sourceLineAt(pane.ranges, line);
        if (source !== null) this.select(source, pane);
      }),
    ];
  }

  private drawSwitcher(): void {
    this.switcher.replaceChildren(
      ...this.kinds.map((kind, index) =>
        el(
          "button",
          {
            class: "panes-switch",
            type: "button",
            "aria-pressed": String(index === this.active),
            "data-testid": "panes-switch",
            onclick: () => {
              this.active = index;
              this.markActive();
              // Once laid out: a pane that was hidden has not measured what is on its screen.
              const selected = this.selected;
              if (selected !== null) requestAnimationFrame(() => this.scrollTo(this.panes[index], selected, true));
            },
          },
          PANE_TITLES[kind],
        ),
      ),
    );
  }

  private markActive(): void {
    this.panes.forEach((pane, index) => pane.element.toggleAttribute("data-active", index === this.active));
    this.switcher.querySelectorAll("button").forEach((button, index) => button.setAttribute("aria-pressed", String(index === this.active)));
    this.panes[this.active]?.view.requestMeasure();
  }

  private addPane(): void {
    if (this.kinds.length >= MAX_PANES) return;
    this.kinds.push(PANE_KINDS.find((kind) => !this.kinds.includes(kind)) ?? "hlo");
    this.active = this.kinds.length - 1;
    this.changed();
  }

  private changed(): void {
    this.rebuild();
    this.hooks.onArrangement(this.arrangement);
  }

  // --- the line under the pointer and the selected one ---------------------------

  private sourceAt(pane: Pane, e: MouseEvent): number | null {
    const pos = pane.view.posAtCoords({ x: e.clientX, y: e.clientY });
    if (pos === null) return null;
    return sourceLineAt(pane.ranges, pane.view.state.doc.lineAt(pos).number);
  }

  private setHot(source: number | null): void {
    if (source === this.hot) return;
    this.hot = source;
    for (const pane of this.panes) pane.view.dispatch({ effects: setHotSource.of(source) });
    this.hooks.onHotSource(source);
  }

  private select(source: number, from: Pane): void {
    this.selected = source;
    this.setHot(source);
    for (const pane of this.panes) if (pane !== from) this.scrollTo(pane, source);
  }

  /** Bring the first line compiled from `source` into view, unless one already is (or `always`). */
  private scrollTo(pane: Pane | undefined, source: number, always = false): void {
    const lines = pane?.firstLines.get(source);
    if (!pane || !lines?.length) return;
    const doc = pane.view.state.doc;
    const visible = pane.view.visibleRanges.some(({ from, to }) =>
      lines.some((line) => line <= doc.lines && doc.line(line).from >= from && doc.line(line).from <= to));
    if (visible && !always) return;
    pane.view.dispatch({ effects: EditorView.scrollIntoView(doc.line(Math.min(lines[0], doc.lines)).from, { y: "center" }) });
  }
}

/** What stands for HLO's folded debug-info tables; a click unfolds them. */
function foldedMetadata(onclick: (event: Event) => void): HTMLElement {
  return el("button", { type: "button", class: "inspect-folded", onclick }, "▸ file and stack-frame metadata");
}
