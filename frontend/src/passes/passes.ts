/**
 * XLA's pass pipeline of one compilation, in Inspect: "XLA passes" asks the server for it (a
 * `passes` message: the program runs again in a fresh sandbox until that compilation, which XLA
 * compiles once more dumping the module after every pass), then lists the passes that ran,
 * those that changed the module first (the others behind a checkbox), searchable by name, and
 * shows the module before and after the selected pass.
 *
 * One answer per compilation is kept until the next run, so going back and forth costs nothing.
 */

import { el } from "../core/dom";
import "./passes.css";
import { formatBytes, formatMs } from "../ir/inspect_format";
import type { CompiledEvent } from "../ir/inspect_types";
import type { ArtifactViewHooks } from "../ir/inspect_view";
import { LinkedPassDiff } from "./passes_diff";
import type { PassDump, PassEntry, PassesEvent } from "../performance/perf_types";
import type { PanelContext } from "../panel/types";
import type { RunFlags } from "../wire/protocol";

interface Answer {
  compiled: CompiledEvent;
  state: "waiting" | "queued" | "running" | "done";
  position?: number;
  event?: PassesEvent;
  failure?: string;
  cancel?: () => void;
  sentAt: number;
}

export class PassesView {
  readonly element = el("div", { class: "passes", "data-testid": "passes" });
  private readonly answers = new Map<string, Answer>();
  private shown: string | null = null;
  private selected: number | null = null;
  private query = "";
  private showUnchanged = false;
  private wrap = false;
  private readonly diff: LinkedPassDiff;

  constructor(private readonly ctx: PanelContext, hooks: ArtifactViewHooks, private readonly onClose: () => void) {
    this.diff = new LinkedPassDiff(hooks);
  }

  /** Shows the passes of `compiled` (from a run of `code` on `backend` and JAX `runtime`), asking the first time. */
  open(compiled: CompiledEvent, code: string, backend: string | undefined, runtime?: string, flags?: RunFlags): void {
    this.shown = compiled.key;
    this.selected = null;
    if (!this.answers.has(compiled.key)) {
      const answer: Answer = { compiled, state: "waiting", sentAt: performance.now() };
      this.answers.set(compiled.key, answer);
      answer.cancel = this.ctx.request(
        { type: "passes", code, key: compiled.key, fn: compiled.fn, ...(backend ? { backend } : {}),
          ...(runtime ? { runtime } : {}), ...(flags ? { flags } : {}) },
        (ev) => this.onEvent(answer, ev as unknown as { type: string } & Record<string, unknown>),
      );
    }
    this.draw();
  }

  isOpen(key: string): boolean {
    return this.shown === key;
  }

  close(): void {
    this.shown = null;
    this.diff.clear();
  }

  /** A new run: answers about the old one no longer apply. */
  reset(): void {
    for (const answer of this.answers.values()) if (answer.state !== "done") answer.cancel?.();
    this.answers.clear();
    this.close();
  }

  private onEvent(answer: Answer, ev: { type: string } & Record<string, unknown>): void {
    if (ev.type === "queued") {
      answer.state = "queued";
      answer.position = ev.position as number;
    } else if (ev.type === "started") {
      answer.state = "running";
    } else if (ev.type === "passes") {
      answer.event = ev as unknown as PassesEvent;
    } else if (ev.type === "error") {
      answer.failure = `The program raised ${String(ev.ename)} before reaching this compilation: ${String(ev.message)}`;
    } else if (ev.type === "done") {
      answer.state = "done";
      if (!answer.event && !answer.failure) {
        answer.failure = (ev.message as string | undefined) ?? `The request ended (${String(ev.status)}) without an answer.`;
      }
    } else {
      return;
    }
    if (this.shown === answer.compiled.key) this.draw();
  }

  private draw(): void {
    const answer = this.shown ? this.answers.get(this.shown) : undefined;
    if (!answer) {
      this.element.replaceChildren();
      return;
    }
    const compiled = answer.compiled;
    const title = el(
      "div",
      { class: "passes-title" },
      el("span", { class: "passes-heading" }, "XLA passes of "),
      el("code", { class: "inspect-fn-name" }, compiled.fn),
      el("span", { class: "inspect-fn-where" }, ` compilation #${compiled.compile_index}`),
      el("span", { class: "topbar-spacer" }),
      el("button", { class: "btn btn-ghost", type: "button", "data-testid": "passes-close",
                     onclick: () => this.onClose() }, "Back to the IR"),
    );
    const event = answer.event;
    if (!event || event.error) {
      this.diff.clear();
      this.element.replaceChildren(title, this.progress(answer));
      return;
    }
    this.element.replaceChildren(title, this.summary(event), ...this.notices(event), this.body(event));
  }

  private progress(answer: Answer): HTMLElement {
    const failure = answer.event?.error ?? answer.failure;
    if (failure) return el("div", { class: "inspect-notice", "data-testid": "passes-error" }, failure);
    const where =
      answer.state === "queued"
        ? `waiting in the queue (position ${answer.position ?? "?"})`
        : answer.state === "running"
          ? "running the program again until this compilation, then compiling it with a dump after every pass…"
          : "asking the server…";
    return el("div", { class: "passes-progress", "data-testid": "passes-progress" },
      el("span", { class: "passes-spinner", "aria-hidden": "true" }), where);
  }

  private summary(event: PassesEvent): HTMLElement {
    const passes = event.passes ?? [];
    const changed = passes.filter((p) => p.changed).length;
    const cost =
      `XLA compiled it again with a dump after every pass in ${formatMs(event.compile_ms)}` +
      (event.profiled_compile_ms ? ` (and once more under the profiler, ${formatMs(event.profiled_compile_ms)}, ` +
        "for the full list and each pass's time)" : "") +
      `; it wrote ${event.dump_files ?? 0} files, ${formatBytes(event.dump_bytes)}.`;
    return el(
      "div",
      { class: "passes-summary", "data-testid": "passes-summary" },
      el("b", {}, `${changed} of ${passes.length} passes changed the module`),
      ` (${event.module ?? "module"}). `,
      el("span", { class: "passes-cost" }, cost),
    );
  }

  private notices(event: PassesEvent): HTMLElement[] {
    return (event.notices ?? []).map((text) => el("div", { class: "inspect-notice", "data-testid": "passes-notice" }, text));
  }

  private body(event: PassesEvent): HTMLElement {
    const passes = event.passes ?? [];
    const search = el("input", { type: "search", class: "passes-search", placeholder: "Search passes",
                                 "aria-label": "Search passes by name", "data-testid": "passes-search",
                                 value: this.query });
    search.addEventListener("input", () => {
      this.query = search.value;
      list.replaceChildren(...this.items(event, passes));
    });
    const unchanged = el("input", { type: "checkbox", "data-testid": "passes-unchanged" });
    unchanged.checked = this.showUnchanged;
    unchanged.addEventListener("change", () => {
      this.showUnchanged = unchanged.checked;
      list.replaceChildren(...this.items(event, passes));
    });
    const list = el("ol", { class: "passes-list", "data-testid": "passes-list" }, ...this.items(event, passes));
    if (this.selected === null) {
      const first = passes.findIndex((p) => p.changed && p.dump !== null && (p.added ?? 0) + (p.removed ?? 0) > 0);
      if (first >= 0) this.selected = first;
    }
    const side = el("div", { class: "passes-detail" }, ...this.detail(event));
    return el(
      "div",
      { class: "passes-body" },
      el(
        "div",
        { class: "passes-side" },
        el("div", { class: "passes-controls" }, search,
          el("label", { class: "inspect-option", title: "Passes that ran and changed nothing" }, unchanged,
            " Unchanged too")),
        list,
      ),
      side,
    );
  }

  private items(event: PassesEvent, passes: PassEntry[]): HTMLElement[] {
    const query = this.query.trim().toLowerCase();
    const pipelines = event.pipelines ?? [];
    const items: HTMLElement[] = [];
    passes.forEach((entry, index) => {
      if (!entry.changed && !this.showUnchanged) return;
      const pipeline = pipelines[entry.pipeline]?.name ?? "";
      if (query && !entry.name.toLowerCase().includes(query) && !pipeline.toLowerCase().includes(query)) return;
      const delta = passDelta(entry);
      items.push(
        el(
          "li",
          {},
          el(
            "button",
            {
              type: "button",
              class: entry.changed ? "passes-item" : "passes-item passes-item-unchanged",
              "aria-pressed": String(index === this.selected),
              "data-pass": entry.name,
              title: passTitle(entry, pipeline),
              onclick: () => {
                this.selected = index;
                this.draw();
              },
            },
            el("span", { class: "passes-name" }, entry.name),
            el("span", { class: "passes-time" }, entry.duration_us === null ? "" : formatMs(entry.duration_us / 1000)),
            el("span", { class: "passes-pipeline" }, pipeline),
            el("span", { class: "passes-delta" }, delta),
          ),
        ),
      );
    });
    if (!items.length) {
      items.push(el("li", { class: "passes-none" }, query ? `No pass matches “${this.query}”.` : "No pass changed the module."));
    }
    return items;
  }

  private detail(event: PassesEvent): HTMLElement[] {
    const entry = this.selected === null ? undefined : event.passes?.[this.selected];
    if (!entry) {
      this.diff.clear();
      return [el("div", { class: "inspect-empty" }, "Pick a pass to see the module before and after it.")];
    }
    if (entry.dump === null) {
      this.diff.clear();
      return [el("div", { class: "inspect-empty", "data-testid": "passes-no-dump" },
        entry.changed
          ? `${entry.name} changed the module inside a step XLA did not dump on its own; the passes around it show the result.`
          : `${entry.name} ran and changed nothing.`)];
    }
    const dumps = event.dumps ?? [];
    const after = resolve(dumps, entry.dump);
    const before = resolve(dumps, entry.dump - 1);
    if (!after?.text || !before?.text) {
      this.diff.clear();
      return [el("div", { class: "inspect-notice" },
        "This pass's text was left out: the dumps were over the size limit (see above).")];
    }
    const header = event.header ?? "";
    const wrap = el("input", { type: "checkbox", "data-testid": "passes-wrap" });
    wrap.checked = this.wrap;
    wrap.addEventListener("change", () => {
      this.wrap = wrap.checked;
      this.draw();
    });
    const parts: HTMLElement[] = [
      el("div", { class: "passes-legend-row" },
        el("div", { class: "inspect-diff-legend" },
          el("span", {}, `before: ${dumps[entry.dump - 1]?.label ?? ""}`),
          el("span", {}, `after: ${dumps[entry.dump]?.label ?? entry.name}`)),
        el("label", { class: "inspect-option" }, wrap, " Wrap")),
    ];
    if (entry.same_text) {
      parts.push(el("div", { class: "inspect-note", "data-testid": "passes-same-text" },
        `XLA reported a change after ${entry.name}, but the module reads the same as before it: what changed ` +
        "was dumped by the steps before it (a nested pipeline's passes, copy-insertion's steps), or is not printed."));
    } else if (entry.reordered) {
      parts.push(el("div", { class: "inspect-note", "data-testid": "passes-reordered" },
        `${entry.name} added and removed no line: it moved ${entry.reordered} lines (XLA reordered instructions).`));
    }
    this.diff.show({ text: before.text, ranges: before.source_lines ?? [] },
                   { text: after.text, ranges: after.source_lines ?? [] }, this.wrap);
    parts.push(this.diff.element);
    if (header) parts.push(el("details", { class: "passes-header" },
      el("summary", {}, "XLA's file and stack-frame tables (the same before and after)"), el("pre", {}, header)));
    return parts;
  }
}

/** "+3 −1" lines added and removed, "↕ 4" lines only moved, or nothing for a pass without a text. */
export function passDelta(entry: PassEntry): string {
  if (entry.added === undefined || entry.same_text) return "";
  if (!entry.added && !entry.removed && entry.reordered) return `↕ ${entry.reordered}`;
  return `+${entry.added} −${entry.removed}`;
}

export function passTitle(entry: PassEntry, pipeline: string): string {
  if (entry.same_text) {
    return `${entry.name}: XLA dumped the module after it, but it reads the same as before it (pipeline ${pipeline})`;
  }
  if (!entry.changed) return `${entry.name} ran and changed nothing (pipeline ${pipeline})`;
  if (entry.reordered && !entry.added && !entry.removed) {
    return `${entry.name} moved ${entry.reordered} lines and added or removed none (pipeline ${pipeline})`;
  }
  return `${entry.name} changed the module (pipeline ${pipeline})`;
}

function resolve(dumps: PassDump[], index: number): PassDump | undefined {
  let entry = dumps[index];
  for (let hops = 0; entry && entry.same_as !== undefined && hops < dumps.length; hops++) entry = dumps[entry.same_as];
  return entry;
}
