/**
 * A link's JAX version: a shared snippet records the runtime its recorded run
 * used. Opening it runs on that version while it is offered, and says so, with
 * one click to run on today's newest; a version no longer offered is named,
 * with the nearest offered one a click away.
 */

import type { Boot } from "../core/boot";
import { el } from "../core/dom";
import type { BackendInfo, ServerEvent, StartedEvent } from "../wire/protocol";
import { nearestVersion, type RuntimePicker, usable } from "./runtimes";

/** The version a snippet's run used: its `runtime`, else its recorded run's `started` event. */
export function linkedRuntime(boot: Boot): string | null {
  const snippet = boot.snippet as (Boot["snippet"] & { runtime?: unknown; recorded_run?: unknown }) | null;
  if (!snippet) return null;
  if (typeof snippet.runtime === "string" && snippet.runtime) return snippet.runtime;
  const events = Array.isArray(snippet.recorded_run) ? (snippet.recorded_run as ServerEvent[]) : [];
  const started = events.find((e): e is StartedEvent => e.type === "started");
  return started?.runtime ?? started?.jax_version ?? null;
}

export class LinkRuntimeNote {
  readonly element = el("div", { class: "runtime-link-note", hidden: true, role: "note", "data-testid": "link-runtime" });
  private settled = false;

  constructor(
    private readonly version: string | null,
    private readonly picker: RuntimePicker,
    private readonly run: () => void,
  ) {}

  /** Called with each backend list; decides once, when the backend's runtimes are first known. */
  showBackend(backend: BackendInfo | undefined): void {
    if (this.settled || !this.version || !backend?.runtimes?.length) return;
    this.settled = true;
    const offered = usable(backend);
    const newest = offered[0];
    const here = offered.find((r) => r.name === this.version);
    if (here) {
      if (here.default && here === newest) return; // what every run gets anyway
      this.picker.pin(here.name);
      this.say(
        `This link ran on JAX ${here.name}; runs here use it too.`,
        newest && newest.name !== here.name ? `Run on JAX ${newest.name} (newest)` : null,
        () => {
          this.picker.choose(newest.name);
          this.element.hidden = true;
          this.run();
        },
      );
      return;
    }
    const nearest = nearestVersion(this.version, offered.map((r) => r.name));
    const current = this.picker.selected?.name;
    this.say(
      `This link ran on JAX ${this.version}, which this server no longer offers; runs use JAX ${current ?? "the default"}.`,
      nearest && nearest !== current ? `Use JAX ${nearest} (nearest)` : null,
      () => {
        if (nearest) this.picker.choose(nearest);
        this.element.hidden = true;
      },
    );
  }

  private say(text: string, action: string | null, onclick: () => void): void {
    const parts: HTMLElement[] = [el("span", { "data-testid": "link-runtime-text" }, text)];
    if (action) parts.push(el("button", { class: "btn btn-ghost", type: "button", "data-testid": "link-runtime-action", onclick }, action));
    this.element.replaceChildren(...parts);
    this.element.hidden = false;
  }
}
