/**
 * The bottom of the Inspect tab: the selected compilation. Its head (and
 * JAX's reason when it was compiled again), phases, cost and memory, the
 * roofline's verdict and equations per line, then a toolbar and one of the
 * views: its jaxpr, StableHLO or optimized HLO in a highlighted, searchable
 * view whose lines point back at the code under the pointer, or diffed
 * against another compilation of the same function; the panes side by side
 * (panes/); where the memory goes (memory/); or XLA's passes (passes/).
 *
 * Only the artifact on screen is handed to CodeMirror.
 */

import { el } from "../core/dom";
import { costTable, formatBytes, memoryTable, phaseBar } from "../ir/inspect_format";
import type { ArtifactName, CompiledEvent } from "../ir/inspect_types";
import { ArtifactView, type ArtifactViewHooks, DiffView } from "../ir/inspect_view";
import { MemoryPanel } from "../memory/memory_view";
import type { PanelContext } from "../panel/types";
import { type PaneKind, withPanes } from "../panes/pane_layout";
import { PanesView } from "../panes/panes_view";
import { PassesView } from "../passes/passes";
import { eqnCountsOf } from "../performance/perf_types";
import { rooflineVerdict } from "../performance/roofline";
import { eqnCountsTable, type EqnTableState } from "./eqn_counts";
import { type InspectedRun, sourceLink } from "./inspect_list";
import { outputsCode, signatureCode, signatureToggle } from "./inspect_signature";

const ARTIFACTS: [ArtifactName, string][] = [
  ["jaxpr", "jaxpr"],
  ["stablehlo", "StableHLO"],
  ["hlo", "Optimized HLO"],
];
const WRAP_KEY = "jaxplay.inspect.wrap";
const HOVER_OWNER = "inspect";
const BANDS_OWNER = "inspect-bands";
/** Besides one text: the side-by-side panes (panes/) and where the memory goes (memory/). */
const VIEWS: ["panes" | "memory", string][] = [
  ["panes", "Side by side"],
  ["memory", "Memory"],
];

export class CompilationDetail {
  readonly element = el("div", { class: "inspect-detail", "data-testid": "inspect-detail", hidden: true });
  /** The compilation shown (its key), and the one its text is diffed with. */
  selected: string | null = null;
  private compareWith: string | null = null;
  private artifact: ArtifactName = "jaxpr";
  view: "text" | "panes" | "memory";
  private passesShown = false;
  readonly code: ArtifactView;
  readonly panes: PanesView;
  private readonly diff = new DiffView();
  private readonly passes: PassesView;
  private readonly memory: MemoryPanel;
  private wrap = localStorage.getItem(WRAP_KEY) === "1";
  private readonly eqnState: EqnTableState = { sort: "count", expanded: false };

  /** `linkedPanes`: the arrangement a link opens on, if it names one. */
  constructor(private readonly ctx: PanelContext, private readonly run: InspectedRun, linkedPanes: PaneKind[] | null) {
    this.view = linkedPanes ? "panes" : "text";
    const { editor } = ctx;
    const showSource: ArtifactViewHooks = {
      onHoverSource(line) {
        if (line === null) editor.clearLineMarks(HOVER_OWNER);
        else editor.setLineMarks(HOVER_OWNER, [{ line, kind: "hover" }], { clearOnEdit: true });
      },
      onOpenSource(line) {
        editor.goToLine(line);
      },
    };
    this.code = new ArtifactView(showSource);
    this.panes = new PanesView({
      onHotSource: showSource.onHoverSource,
      onOpenSource: showSource.onOpenSource,
      onArrangement: () => this.keepPanesInAddress(),
    });
    if (linkedPanes) this.panes.setArrangement(linkedPanes);
    this.memory = new MemoryPanel({
      openHlo: (line) => {
        this.artifact = "hlo";
        this.view = "text";
        this.compareWith = null;
        this.draw();
        this.code.revealLine(line);
      },
      openSource: showSource.onOpenSource,
    });
    this.passes = new PassesView(ctx, showSource, () => {
      this.closePasses();
      this.draw();
    });
  }

  /** A new run: nothing selected, no passes asked, no marks on the code. */
  clear(): void {
    this.passesShown = false;
    this.passes.reset();
    this.selected = null;
    this.compareWith = null;
    this.ctx.editor.clearLineMarks(HOVER_OWNER);
    this.ctx.editor.clearLineMarks(BANDS_OWNER);
    this.diff.clear();
    this.panes.clear();
    this.element.hidden = true;
  }

  /** Shows compilation `key` from the next draw on; leaving another closes its diff and its passes. */
  select(key: string): void {
    if (this.selected !== key) {
      this.compareWith = null;
      this.closePasses();
    }
    this.selected = key;
  }

  /** Shows where the memory goes from the next draw on (a roofline point or timeline slice asks for it). */
  showMemory(): void {
    this.view = "memory";
    this.closePasses();
  }

  private closePasses(): void {
    this.passesShown = false;
    this.passes.close();
  }

  /** The address names the panes while they show, so a copied address opens on them. */
  keepPanesInAddress(): void {
    const href = withPanes(window.location.href, this.view === "panes" ? this.panes.arrangement : null);
    if (href !== window.location.href) window.history.replaceState(window.history.state, "", href);
  }

  /** The editor's lines wear the panes' colours while the panes show. */
  private showBands(on: boolean): void {
    const { editor } = this.ctx;
    if (!on || !this.panes.bands.size) editor.clearLineMarks(BANDS_OWNER);
    else editor.setLineMarks(BANDS_OWNER, [...this.panes.bands].map(([line, band]) => ({ line, kind: "band" as const, band })));
  }

  draw(): void {
    const { byKey, functions } = this.run;
    const compiled = this.selected ? byKey.get(this.selected) : undefined;
    if (!compiled) {
      this.element.hidden = true;
      return;
    }
    this.element.hidden = false;
    const siblings = functions.get(compiled.fn_id)?.compiles ?? [];
    const head = el(
      "div",
      { class: "inspect-detail-head" },
      sourceLink(this.ctx.editor, compiled.line, compiled.fn, `Go to the definition of ${compiled.fn}`),
      signatureCode(compiled.signature),
      outputsCode(compiled.outputs),
      el(
        "span",
        { class: "inspect-fn-where" },
        `compilation #${compiled.compile_index}${compiled.persistent_cache_hit ? " · from the persistent cache" : ""}`,
      ),
    );
    const parts: (HTMLElement | null)[] = [head, signatureToggle(compiled.signature, head)];
    if (compiled.cache_miss_reason) {
      const previous = compiled.previous_key;
      parts.push(
        el(
          "div",
          { class: "inspect-reason-box" },
          el("div", { class: "inspect-reason-title" }, "Compiled again because (JAX's explanation):"),
          el("div", { class: "inspect-reason" }, compiled.cache_miss_reason),
          previous && byKey.has(previous)
            ? el(
                "button",
                {
                  class: "btn btn-ghost inspect-diff-button",
                  type: "button",
                  "data-testid": "inspect-diff-previous",
                  onclick: () => {
                    this.compareWith = previous;
                    this.draw();
                  },
                },
                `Diff with #${byKey.get(previous)!.compile_index}`,
              )
            : null,
        ),
      );
    }
    if (this.passesShown) {
      // XLA's passes take the room the figures below would: the head and the toolbar stay.
      this.diff.clear();
      this.showBands(false);
      parts.push(this.toolbar(compiled, siblings), this.passes.element);
      this.element.replaceChildren(...parts.filter((p): p is HTMLElement => p !== null));
      return;
    }
    parts.push(phaseBar(compiled.phases_ms));
    parts.push(el("div", { class: "inspect-tables" }, costTable(compiled.cost), memoryTable(compiled.memory)));
    const verdict = this.run.roofline.get(compiled.key);
    if (verdict) parts.push(rooflineVerdict(verdict, () => this.ctx.showPanel("performance")));
    const counts = eqnCountsOf(compiled);
    if (counts && counts.lines.length) parts.push(eqnCountsTable(counts, this.ctx.editor, this.eqnState, () => this.draw()));
    if (compiled.capture_errors?.length) {
      parts.push(
        el("div", { class: "inspect-notice" }, `Parts of this capture failed: ${compiled.capture_errors.join("; ")}`),
      );
    }
    parts.push(this.toolbar(compiled, siblings));
    const artifact = this.artifact;
    const cut = compiled.truncated?.[artifact];
    const other = this.compareWith ? byKey.get(this.compareWith) : undefined;
    if (cut) {
      parts.push(
        el(
          "div",
          { class: "inspect-notice", "data-testid": "inspect-truncated" },
          `Showing the first ${formatBytes(compiled.artifact_limit_bytes)} of ${formatBytes(cut)}: ` +
            "the rest was cut to keep the page responsive (worker setting JAXPLAY_ARTIFACT_LIMIT_BYTES).",
        ),
      );
    }
    if (this.view !== "text" && !other) {
      this.diff.clear();
      if (this.view === "panes") {
        this.panes.show(compiled, this.run.code);
        parts.push(this.panes.element);
      } else {
        this.memory.show(compiled);
        parts.push(this.memory.element);
      }
      this.element.replaceChildren(...parts.filter((p): p is HTMLElement => p !== null));
      this.showBands(this.view === "panes");
      this.panes.refresh();
      return;
    }
    this.showBands(false);
    if (other) {
      parts.push(
        el(
          "div",
          { class: "inspect-diff-legend" },
          el("span", {}, `#${other.compile_index} (${other.signature})`),
          el("span", {}, `#${compiled.compile_index} (${compiled.signature})`),
        ),
      );
      this.diff.show(other[artifact], compiled[artifact], artifact, this.wrap);
      parts.push(this.diff.element);
    } else {
      this.diff.clear();
      this.code.show(compiled[artifact], artifact, compiled.source_lines?.[artifact] ?? []);
      parts.push(this.code.element);
    }
    this.element.replaceChildren(...parts.filter((p): p is HTMLElement => p !== null));
    this.code.refresh();
  }

  /** A toolbar tab: one of the texts, or a view (`choose` makes it the one shown). */
  private tab(name: string, title: string, selected: boolean, testid: string | null, choose: () => void): HTMLElement {
    return el(
      "button",
      {
        class: "inspect-artifact-tab",
        type: "button",
        role: "tab",
        "aria-selected": String(selected),
        "data-artifact": name,
        "data-testid": testid,
        onclick: () => {
          choose();
          this.closePasses();
          this.draw();
          this.keepPanesInAddress();
        },
      },
      title,
    );
  }

  private toolbar(compiled: CompiledEvent, siblings: CompiledEvent[]): HTMLElement {
    const tabs = el("div", { class: "inspect-artifact-tabs", role: "tablist" });
    for (const [name, title] of ARTIFACTS) {
      tabs.append(this.tab(name, title, this.view === "text" && name === this.artifact, null, () => {
        this.artifact = name;
        this.view = "text";
      }));
    }
    for (const [name, title] of VIEWS) {
      tabs.append(this.tab(name, title, this.view === name && !this.passesShown, `inspect-view-${name}`, () => {
        this.view = name;
        this.compareWith = null;
      }));
    }
    const compare = el("select", { class: "inspect-compare", "data-testid": "inspect-compare" });
    compare.append(el("option", { value: "" }, "none"));
    for (const sibling of siblings) {
      if (sibling.key === compiled.key) continue;
      const option = el("option", { value: sibling.key }, `#${sibling.compile_index}`);
      option.selected = sibling.key === this.compareWith;
      compare.append(option);
    }
    compare.disabled = siblings.length < 2;
    compare.addEventListener("change", () => {
      this.compareWith = compare.value || null;
      if (this.compareWith) this.view = "text"; // a diff is of one text
      this.draw();
      this.keepPanesInAddress();
    });
    const wrapBox = el("input", { type: "checkbox" });
    wrapBox.checked = this.wrap;
    wrapBox.addEventListener("change", () => {
      this.wrap = wrapBox.checked;
      localStorage.setItem(WRAP_KEY, this.wrap ? "1" : "0");
      if (this.compareWith) this.draw();
      else this.code.setWrap(this.wrap);
    });
    const copy = el("button", { class: "btn btn-ghost", type: "button", title: "Copy this text", disabled: this.view !== "text" }, "Copy");
    copy.addEventListener("click", () => {
      void navigator.clipboard?.writeText(compiled[this.artifact]).then(
        () => flash(copy, "Copied"),
        () => flash(copy, "Copy failed"),
      );
    });
    const passesButton = el(
      "button",
      {
        class: "btn btn-ghost inspect-passes-button",
        type: "button",
        "aria-pressed": String(this.passesShown),
        "data-testid": "inspect-passes",
        title: "Run the program again until this compilation and show what each of XLA's passes did to it",
        onclick: () => {
          this.passesShown = !this.passesShown;
          const { code, backend, runtime, flags } = this.run;
          if (this.passesShown) this.passes.open(compiled, code, backend, runtime, flags);
          else this.passes.close();
          this.draw();
        },
      },
      "XLA passes",
    );
    return el(
      "div",
      { class: "inspect-toolbar" },
      tabs,
      el("span", { class: "topbar-spacer" }),
      passesButton,
      el("label", { class: "inspect-option inspect-compare-label",
                    title: siblings.length < 2 ? "One compilation: nothing to diff it with" : "Diff this text with another compilation's" },
        "Diff with ", compare),
      el(
        "button",
        {
          class: "btn btn-ghost",
          type: "button",
          title: "Search this text (Ctrl+F inside it)",
          disabled: this.compareWith !== null || this.view !== "text",
          onclick: () => this.code.openSearch(),
        },
        "Search",
      ),
      copy,
      el("label", { class: "inspect-option" }, wrapBox, " Wrap"),
    );
  }
}

function flash(button: HTMLElement, text: string): void {
  const original = button.textContent;
  button.textContent = text;
  window.setTimeout(() => (button.textContent = original), 1200);
}
