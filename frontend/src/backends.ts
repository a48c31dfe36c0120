/**
 * The backend picker, fed by GET /api/backends. The choice is remembered
 * per browser; a remembered backend that is gone falls back to the first.
 */

import { LibrariesPopover } from "./backend_libraries";
import { el } from "./dom";
import type { BackendInfo, BackendsResponse } from "./protocol";

const STORAGE_KEY = "jaxplay.backend";
const REFRESH_MS = 15_000;

export class BackendPicker {
  readonly select = el("select", {
    class: "backend-select",
    "aria-label": "Backend",
    title: "Where the code runs",
    "data-testid": "backend",
  });
  private readonly libraries = new LibrariesPopover();
  readonly element = el(
    "span",
    { class: "backend" },
    el("label", { class: "backend-picker" }, el("span", { class: "backend-label" }, "Backend"), this.select),
    this.libraries.element,
  );
  private backends: BackendInfo[] = [];
  private preferred: string | null;
  private reachable = true;
  /** Told the chosen backend whenever the list or the choice changes. */
  onSelect: ((backend: BackendInfo | undefined) => void) | null = null;

  constructor(preferred: string | null = null) {
    this.preferred = preferred ?? localStorage.getItem(STORAGE_KEY);
    this.select.addEventListener("change", () => {
      this.preferred = this.select.value || null;
      if (this.preferred) localStorage.setItem(STORAGE_KEY, this.preferred);
      this.onSelect?.(this.selected);
      this.libraries.show(this.selected);
    });
    this.select.append(el("option", { value: "" }, "loading…"));
    void this.refresh();
    window.setInterval(() => void this.refresh(), REFRESH_MS);
  }

  /** The chosen backend's name, or undefined to let the server pick. */
  get value(): string | undefined {
    return this.select.value || undefined;
  }

  get selected(): BackendInfo | undefined {
    return this.backends.find((b) => b.name === this.select.value);
  }

  /** While the server cannot be reached the choice stays (a waiting run keeps it) but cannot change. */
  setReachable(reachable: boolean): void {
    if (reachable === this.reachable) return;
    this.reachable = reachable;
    this.element.classList.toggle("offline", !reachable);
    this.element.title = reachable ? "" : "The server cannot be reached";
    if (reachable) void this.refresh();
    else this.select.disabled = true;
  }

  async refresh(): Promise<void> {
    try {
      const response = await fetch("/api/backends", { headers: { Accept: "application/json" } });
      if (!response.ok) throw new Error(`HTTP ${response.status}`);
      const body = (await response.json()) as BackendsResponse;
      this.render(body.backends ?? []);
    } catch (err) {
      console.warn("jaxplay: could not list backends", err);
      if (!this.backends.length) this.renderUnavailable("backends unavailable");
    }
  }

  private render(backends: BackendInfo[]): void {
    this.backends = backends;
    if (!backends.length) {
      this.renderUnavailable("no workers connected");
      return;
    }
    const want = this.preferred && backends.some((b) => b.name === this.preferred) ? this.preferred : backends[0].name;
    this.select.replaceChildren(
      ...backends.map((b) =>
        el(
          "option",
          { value: b.name, selected: b.name === want, title: describeLoad(b) },
          describeBackend(b),
        ),
      ),
    );
    // Code running without a sandbox is never something to miss.
    this.element.classList.toggle("unsandboxed", backends.some((b) => b.sandbox === "none"));
    this.select.value = want;
    this.select.disabled = !this.reachable;
    this.onSelect?.(this.selected);
    this.element.title = this.selected ? `${describeLoad(this.selected)}\njax ${this.selected.jax_version}` : "";
    this.libraries.show(this.selected);
  }

  private renderUnavailable(reason: string): void {
    // Leave the backend out of runs: the server then answers with its own message.
    this.select.replaceChildren(el("option", { value: "" }, reason));
    this.select.disabled = true;
    this.libraries.show(undefined);
  }
}

/** "cpu · 8× cpu"; a backend whose workers are all gone says so instead of inventing devices. */
function describeBackend(b: BackendInfo): string {
  const devices = b.workers > 0 && typeof b.device_count === "number"
    ? `${b.device_count}× ${b.device_kind}`
    : "no worker connected";
  return `${b.name} · ${devices}${b.sandbox === "none" ? " · UNSANDBOXED" : ""}`;
}

function describeLoad(b: BackendInfo): string {
  const queue = b.queued ? `, ${b.queued} queued` : "";
  return `${b.free_slots} of ${b.slots} slots free on ${b.workers} worker${b.workers === 1 ? "" : "s"}${queue}`;
}
