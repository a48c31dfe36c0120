/**
 * XLA's pass lists of one compiled function on two sides of a comparison, side by side: each side's program
 * runs again until that compilation (a `passes` request, with the side's version and flags), and the passes
 * one side ran and the other did not are marked. Asked for on demand, once per side and function.
 */

import { el } from "../core/dom";
import type { CompiledEvent } from "../ir/inspect_types";
import type { PanelContext } from "../panel/types";
import type { PassesEvent } from "../performance/perf_types";
import type { RunFlags, RuntimeInfo } from "../wire/protocol";

export interface PassSide {
  /** The side's column, stable within one comparison. */
  id: number;
  label: string;
  compiled: CompiledEvent | undefined;
  runtime: RuntimeInfo;
  /** The flags its run used (null: none): its passes are XLA's under them. */
  flags: RunFlags | null;
}

interface Answer {
  names: string[] | null;
  error: string | null;
}

export class ComparePassLists {
  readonly element = el("div", { class: "compare-pass-lists", "data-testid": "compare-pass-lists" });
  private readonly answers = new Map<string, Answer>();
  private fn: string | null = null;
  private sides: PassSide[] = [];

  constructor(private readonly ctx: PanelContext) {}

  clear(): void {
    this.answers.clear();
    this.fn = null;
    this.sides = [];
    this.element.replaceChildren();
  }

  show(fn: string | null, sides: PassSide[]): void {
    this.fn = fn;
    this.sides = sides;
    this.draw();
  }

  private key(side: PassSide): string {
    return `${side.id}|${this.fn}`;
  }

  private ask(): void {
    const code = this.ctx.editor.getCode();
    const choices = this.ctx.runChoices();
    for (const side of this.sides) {
      const compiled = side.compiled;
      if (!compiled || this.answers.has(this.key(side))) continue;
      const answer: Answer = { names: null, error: null };
      this.answers.set(this.key(side), answer);
      const flags = side.flags;
      this.ctx.request({ type: "passes", code, key: compiled.key, fn: compiled.fn,
                         ...(choices.backend ? { backend: choices.backend } : {}),
                         ...(side.runtime.default ? {} : { runtime: side.runtime.name }), ...(flags ? { flags } : {}) },
      (ev) => {
        const event = ev as unknown as PassesEvent | { type: "done"; status: string; message?: string };
        if (event.type === "passes") {
          answer.names = (event.passes ?? []).map((p) => p.name);
          answer.error = event.error ?? null;
        } else if (event.type === "done" && answer.names === null) {
          answer.error = event.message ?? `no pass list (${event.status})`;
        }
        this.draw();
      });
    }
    this.draw();
  }

  private draw(): void {
    if (!this.fn || this.sides.length < 2) {
      this.element.replaceChildren();
      return;
    }
    const answers = this.sides.map((side) => this.answers.get(this.key(side)));
    if (answers.every((a) => a === undefined)) {
      this.element.replaceChildren(el("button", { class: "btn btn-ghost", type: "button", "data-testid": "compare-passes",
        title: "Run each side again until this compilation and list XLA's passes", onclick: () => this.ask() },
        `Pass lists of ${this.fn}`));
      return;
    }
    const names = answers.map((a) => new Set(a?.names ?? []));
    this.element.replaceChildren(...this.sides.map((side, i) => {
      const answer = answers[i];
      const other = names[1 - i];
      const body = !answer || (answer.names === null && !answer.error)
        ? [el("div", { class: "compare-line" }, "compiling with per-pass dumps…")]
        : answer.error ? [el("div", { class: "compare-line" }, answer.error)]
        : (answer.names ?? []).map((name) => el("div", {
            class: `compare-line${other.has(name) ? "" : " compare-differs"}`,
            "data-testid": other.has(name) ? "compare-pass" : "compare-pass-only-here" }, name));
      const only = (answer?.names ?? []).filter((n) => !other.has(n)).length;
      return el("section", { class: "compare-column", "data-testid": "compare-pass-list" },
        el("h4", {}, `Passes · ${side.label}`, el("span", { class: "compare-count" },
          answer?.names ? ` · ${answer.names.length} runs, ${only} only here` : "")),
        // Focusable: a list that scrolls must be reachable by keyboard.
        el("div", { class: "compare-output", tabindex: "0", role: "region", "aria-label": `XLA's passes, ${side.label}` },
          ...body));
    }));
  }
}
