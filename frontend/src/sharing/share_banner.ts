/**
 * The line above the results that says where they came from when they were
 * not produced just now: a shared snippet's recorded run, or a run the
 * server answered from its result cache. Live runs show no banner.
 */

import { el, formatDuration } from "../core/dom";
import type { DoneEvent, ServerEvent, StartedEvent } from "../wire/protocol";

export type BannerState =
  | { kind: "none" }
  | { kind: "recorded"; events: readonly ServerEvent[]; recordedAt: string | null; sharedAt: string | null }
  | { kind: "cached"; events: readonly ServerEvent[]; done: DoneEvent };

/** "1 May 2025, 14:00" in the viewer's locale and time zone ("14:00" for today, if asked). */
export function formatWhen(iso: string, options: { sameDayTimeOnly?: boolean } = {}): string {
  const when = new Date(iso);
  if (Number.isNaN(when.getTime())) return iso;
  if (options.sameDayTimeOnly && when.toDateString() === new Date().toDateString()) {
    return when.toLocaleTimeString(undefined, { timeStyle: "short" });
  }
  return when.toLocaleString(undefined, { dateStyle: "medium", timeStyle: "short" });
}

/** "cpu · 8× cpu · jax 0.10.2 · jaxlib 0.10.2" from a run's `started` event. */
export function describeEnvironment(events: readonly ServerEvent[]): string {
  const started = events.find((e): e is StartedEvent => e.type === "started");
  if (!started) return "";
  const devices = (started.devices ?? {}) as { kind?: unknown; count?: unknown };
  const parts = [started.backend];
  if (typeof devices.count === "number") {
    parts.push(typeof devices.kind === "string" ? `${devices.count}× ${devices.kind}` : `${devices.count} devices`);
  }
  if (started.jax_version) parts.push(`jax ${started.jax_version}`);
  const jaxlib = (started as StartedEvent & { jaxlib_version?: unknown }).jaxlib_version;
  if (typeof jaxlib === "string" && jaxlib) parts.push(`jaxlib ${jaxlib}`);
  return parts.join(" · ");
}

export class ShareBanner {
  readonly element = el("div", { class: "share-banner", hidden: true, role: "note", "data-testid": "run-banner" });

  constructor(private readonly onRunFresh: () => void) {}

  show(state: BannerState): void {
    if (state.kind === "none") {
      this.element.hidden = true;
      this.element.replaceChildren();
      delete this.element.dataset.kind;
      return;
    }
    const environment = describeEnvironment(state.events);
    this.element.dataset.kind = state.kind;
    this.element.hidden = false;
    if (state.kind === "recorded") {
      const at = state.recordedAt ?? state.sharedAt;
      this.element.replaceChildren(
        el("span", { class: "share-banner-tag" }, "Recorded run"),
        el(
          "span",
          { class: "share-banner-text" },
          at ? el("time", { datetime: at, title: at }, `${state.recordedAt ? "" : "shared "}${formatWhen(at)}`) : null,
          environment ? `${at ? " · " : ""}${environment}` : null,
        ),
        el("span", { class: "share-banner-hint" }, "Press Run to run it live."),
      );
      return;
    }
    const { done } = state;
    const at = done.cached_at ?? "";
    // One line where it fits: what a person needs is "not live" and "Run fresh"; the rest is detail.
    const took = formatDuration(done.elapsed_ms);
    const summary = `${at ? `from ${formatWhen(at, { sameDayTimeOnly: true })} (${took})` : `took ${took}`}; timings are from then`;
    this.element.replaceChildren(
      el("span", { class: "share-banner-tag" }, "Cached result"),
      el(
        "span",
        { class: "share-banner-text", title: `An identical run${at ? ` at ${formatWhen(at)}` : ""}${environment ? ` on ${environment}` : ""}` },
        at ? el("time", { datetime: at }, summary) : summary,
        environment ? el("span", { class: "share-banner-env" }, ` · ${environment}`) : null,
      ),
      el(
        "button",
        { class: "btn btn-ghost share-banner-fresh", type: "button", "data-testid": "run-fresh", onclick: this.onRunFresh },
        "Run fresh",
      ),
    );
  }
}
