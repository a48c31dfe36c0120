/**
 * A failed run says so on every tab: a red line above the results while
 * Inspect, Sharding or the Gallery is in front (Output shows the error
 * itself), naming the error and its line, with a way to the Output. It stays
 * until the next run starts, or until dismissed.
 */

import { el } from "../core/dom";
import type { DoneEvent, ErrorEvent, ServerEvent } from "../wire/protocol";

/** Statuses that mean the program did not finish as written (cancelled is the person's own doing). */
const FAILED = new Set(["error", "timeout", "crashed", "rejected"]);

export interface RunAlertOptions {
  /** The panel id of the tab in front. */
  activeTab(): string | null;
  showOutput(): void;
  goToLine(line: number): void;
}

export class RunAlert {
  readonly element = el("div", { class: "run-alert", role: "alert", hidden: true, "data-testid": "run-alert" });
  private error: ErrorEvent | null = null;
  private failed: DoneEvent | null = null;
  private dismissed = false;

  constructor(private readonly options: RunAlertOptions) {}

  /** A new run (or none) is on screen. */
  clear(): void {
    this.error = null;
    this.failed = null;
    this.dismissed = false;
    this.render();
  }

  onEvent(ev: ServerEvent): void {
    if (ev.type === "error" && !this.error) this.error = ev;
  }

  onDone(ev: DoneEvent): void {
    this.failed = FAILED.has(ev.status) ? ev : null;
    this.render();
  }

  /** Another tab came to the front: on Output, the error shows itself. */
  render(): void {
    const failed = this.failed;
    this.element.hidden = !failed || this.dismissed || this.options.activeTab() === "output";
    if (this.element.hidden || !failed) return;
    this.element.dataset.status = failed.status;
    const line = this.error?.line ?? null;
    const lineLink = line === null ? [] : [
      el("button", { class: "run-alert-link", type: "button", title: `Show line ${line} in the editor`,
                     onclick: () => this.options.goToLine(line) }, `line ${line}`),
    ];
    this.element.replaceChildren(
      el("span", { class: "run-alert-mark", "aria-hidden": "true" }, "✕"),
      el("span", { class: "run-alert-text" }, describe(failed, this.error)),
      ...lineLink,
      el("button", { class: "btn run-alert-show", type: "button", "data-testid": "run-alert-show",
                     onclick: () => this.options.showOutput() }, "Show in Output"),
      el("button", { class: "run-alert-dismiss", type: "button", title: "Hide until the next run",
                     "aria-label": "Hide until the next run", onclick: () => {
                       this.dismissed = true;
                       this.render();
                     } }, "×"),
    );
  }
}

function describe(done: DoneEvent, error: ErrorEvent | null): string {
  if (error) {
    const message = error.message.split("\n")[0];
    return `The run failed: ${error.ename}${message ? `: ${message}` : ""}`;
  }
  const words: Record<string, string> = {
    error: "The run failed",
    timeout: "The run timed out",
    crashed: "The run crashed",
    rejected: "The run was not accepted",
  };
  return done.message ? `${words[done.status]}: ${done.message}` : `${words[done.status]}.`;
}
