/**
 * The status line: what the run on screen is doing, in words.
 * `data-status` carries the state for styling and tests.
 */

import { el, formatDuration } from "../core/dom";
import type { RunStatus } from "../wire/protocol";

export type StatusState =
  | { kind: "idle" }
  | { kind: "sending" }
  | { kind: "waiting" }
  /** `at`: when the estimate `waitS` arrived (performance.now()), so the wait counts down between updates. */
  | { kind: "queued"; position: number; waitS?: number | null; at?: number }
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
    if (state.kind === "running" || state.kind === "queued") this.ticker = window.setInterval(() => this.render(), TICK_MS);
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
      return `queued (position ${s.position}, ${describeWait(s.waitS ?? null, performance.now() - (s.at ?? performance.now()))})`;
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

/**
 * The server's estimate (from recent runs' durations; null before any has finished), counted down
 * since it arrived. Past it, the wait is overdue: the runs ahead take longer than runs usually do.
 */
export function describeWait(waitS: number | null, sinceMs: number): string {
  if (waitS === null) return "no wait estimate yet";
  const left = waitS - Math.max(0, sinceMs) / 1000;
  const whole = Math.ceil(left);
  if (left >= 1) return `about ${whole < 60 ? `${whole} s` : `${Math.floor(whole / 60)} min ${whole % 60} s`} left`;
  if (left > -1) return "starting in a moment";
  return "longer than usual: the runs ahead are taking a while";
}

/** One decimal while running, so the ticking is visible but calm. */
function formatRunning(ms: number): string {
  const s = Math.max(0, ms) / 1000;
  return s < 60 ? `${s.toFixed(1)} s` : formatDuration(ms);
}
