/**
 * The status line: what the run on screen is doing, in words.
 * `data-status` carries the state for styling and tests.
 */

import { el, formatDuration } from "./dom";
import type { RunStatus } from "./protocol";

export type StatusState =
  | { kind: "idle" }
  | { kind: "sending" }
  | { kind: "waiting" }
  | { kind: "queued"; position: number; waitS?: number | null }
  | { kind: "running"; since: number; compiling?: { fn: string; line: number | null } }
  | { kind: "done"; status: RunStatus; elapsedMs: number; message?: string }
  | { kind: "lost" };

const TICK_MS = 100;

export class StatusLine {
  readonly element = el("div", { class: "status", role: "status", "aria-live": "polite", "data-testid": "status" });
  private readonly dot = el("span", { class: "status-dot", "aria-hidden": "true" });
  private readonly text = el("span", { class: "status-text" });
  private ticker: number | null = null;
  state: StatusState = { kind: "idle" };

  constructor() {
    this.element.append(this.dot, this.text);
    this.set({ kind: "idle" });
  }

  set(state: StatusState): void {
    this.state = state;
    if (this.ticker !== null) {
      window.clearInterval(this.ticker);
      this.ticker = null;
    }
    if (state.kind === "running") this.ticker = window.setInterval(() => this.render(), TICK_MS);
    this.render();
  }

  private render(): void {
    const s = this.state;
    const key = s.kind === "done" ? s.status : s.kind;
    this.element.dataset.status = key;
    this.text.textContent = describe(s);
    this.element.title = s.kind === "done" && s.message ? s.message : "";
  }
}

export function describe(s: StatusState): string {
  switch (s.kind) {
    case "idle":
      return "ready";
    case "sending":
      return "starting…";
    case "waiting":
      return "waiting for the server…";
    case "queued":
      return s.waitS != null && s.waitS >= 1
        ? `queued (position ${s.position}, about ${Math.round(s.waitS)} s)`
        : `queued (position ${s.position})`;
    case "running": {
      const time = formatRunning(performance.now() - s.since);
      if (!s.compiling) return `running ${time}`;
      const where = s.compiling.line !== null ? ` (line ${s.compiling.line})` : "";
      return `compiling ${s.compiling.fn}${where}… · running ${time}`;
    }
    case "lost":
      return "lost: the connection dropped during the run";
    case "done": {
      const time = formatDuration(s.elapsedMs);
      switch (s.status) {
        case "ok":
          return `ok in ${time}`;
        case "rejected":
          return s.message ? `rejected: ${s.message}` : "rejected";
        default:
          return s.elapsedMs > 0 ? `${s.status} after ${time}` : s.status;
      }
    }
  }
}

/** One decimal while running, so the ticking is visible but calm. */
function formatRunning(ms: number): string {
  const s = Math.max(0, ms) / 1000;
  return s < 60 ? `${s.toFixed(1)} s` : formatDuration(ms);
}
