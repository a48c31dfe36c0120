/**
 * The backend picker, fed by GET /api/backends. The choice is remembered
 * per browser; a remembered backend that is gone, or has no worker while
 * another has, gives way to the server's default (on a GPU-only host, gpu).
 */

import { LibrariesPopover } from "./backend_libraries";
import { el } from "../core/dom";
import type { BackendInfo, BackendsResponse } from "../wire/protocol";

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
  /** Told what keeps the server from running code (a local worker that cannot start), when it changes. */
  onProblems: ((problems: string[]) => void) | null = null;
  private problems = "";

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
      this.reportProblems(body.problems ?? []);
      this.render(body.backends ?? [], body.default ?? null);
    } catch (err) {
      console.warn("jaxplay: could not list backends", err);
      if (!this.backends.length) this.renderUnavailable("backends unavailable");
    }
  }

  private reportProblems(problems: string[]): void {
    const key = problems.join("\n");
    if (key === this.problems) return;
    this.problems = key;
    this.onProblems?.(problems);
  }

  private render(backends: BackendInfo[], serverDefault: string | null): void {
    this.backends = backends;
    if (!backends.length) {
      this.renderUnavailable(this.problems ? "no worker can start" : "no workers connected");
      return;
    }
    const want = chooseBackend(backends, this.preferred, serverDefault);
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

/** The remembered backend while it can run code (or nothing can), else the server's default, else one with a worker. */
export function chooseBackend(backends: BackendInfo[], preferred: string | null, serverDefault: string | null): string {
  const connected = backends.filter((b) => b.workers > 0);
  const usable = (name: string | null): name is string =>
    !!name && backends.some((b) => b.name === name && (b.workers > 0 || !connected.length));
  if (usable(preferred)) return preferred;
  if (usable(serverDefault)) return serverDefault;
  return (connected[0] ?? backends[0]).name;
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
