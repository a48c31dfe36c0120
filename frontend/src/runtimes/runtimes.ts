/**
 * The JAX version picker beside the backend picker: backend x JAX version.
 *
 * Fed by the chosen backend's `runtimes` (GET /api/backends). The default
 * runtime (the worker's own JAX) is sent as no `runtime` at all; any other as
 * `runtime: "<version>"`. The choice is remembered per browser; a link can pin
 * the version its recorded run used (`pin`), which the banner below the header
 * says, with one click back to today's newest. A runtime no worker can run is
 * listed, disabled, with the reason.
 */

import { el } from "../core/dom";
import { HINT_ACTIONS } from "../panel/hint_actions";
import type { ApiIndexData } from "../editor/api_index";
import type { BackendInfo, ErrorEvent, RuntimeInfo } from "../wire/protocol";
import "./runtimes.css";

const STORAGE_KEY = "jaxplay.runtime";

/** "0.4.38" < "0.10.2", numerically. */
export function compareVersions(a: string, b: string): number {
  const pa = a.split(/[.+_-]/).map((x) => Number.parseInt(x, 10) || 0);
  const pb = b.split(/[.+_-]/).map((x) => Number.parseInt(x, 10) || 0);
  for (let i = 0; i < Math.max(pa.length, pb.length); i++) {
    const d = (pa[i] ?? 0) - (pb[i] ?? 0);
    if (d !== 0) return d;
  }
  return 0;
}

/** The offered version closest to `wanted` (the same line first, then by distance), for a link whose JAX is gone. */
export function nearestVersion(wanted: string, offered: readonly string[]): string | null {
  if (!offered.length) return null;
  const key = (v: string) => v.split(".").map((x) => Number.parseInt(x, 10) || 0);
  const [wm, wn, wp] = key(wanted);
  const distance = (v: string) => {
    const [m, n, p] = key(v);
    return Math.abs(m - wm) * 1e6 + Math.abs(n - wn) * 1e3 + Math.abs((p ?? 0) - (wp ?? 0));
  };
  return [...offered].sort((a, b) => distance(a) - distance(b) || compareVersions(b, a))[0];
}

export function usable(backend: BackendInfo | undefined): RuntimeInfo[] {
  return (backend?.runtimes ?? []).filter((r) => !r.problem);
}

export class RuntimePicker {
  readonly select = el("select", {
    class: "runtime-select",
    "aria-label": "JAX version",
    title: "The JAX version the code runs on",
    "data-testid": "runtime",
  });
  readonly element = el("label", { class: "runtime-picker" }, this.select);
  private backend: BackendInfo | undefined;
  private preferred: string | null;
  /** Told the chosen runtime whenever the list or the choice changes. */
  onSelect: ((runtime: RuntimeInfo | undefined) => void) | null = null;

  /** On a phone the closed picker has room for "JAX 0.10.2" only: "(default)" is left to the option's title. */
  private readonly narrow = window.matchMedia("(max-width: 600px)");

  constructor() {
    this.preferred = localStorage.getItem(STORAGE_KEY);
    this.narrow.addEventListener("change", () => {
      for (const option of this.select.options) {
        const r = this.runtimes.find((x) => x.name === option.value);
        if (r) option.textContent = this.label(r);
      }
    });
    this.select.addEventListener("change", () => {
      this.preferred = this.select.value || null;
      if (this.preferred) localStorage.setItem(STORAGE_KEY, this.preferred);
      this.describe();
      this.onSelect?.(this.selected);
    });
  }

  /** The runtime to name in a run: undefined for the default. */
  get value(): string | undefined {
    const chosen = this.selected;
    return chosen && !chosen.default ? chosen.name : undefined;
  }

  get selected(): RuntimeInfo | undefined {
    return this.runtimes.find((r) => r.name === this.select.value);
  }

  get runtimes(): RuntimeInfo[] {
    return this.backend?.runtimes ?? [];
  }

  get newest(): RuntimeInfo | undefined {
    return usable(this.backend)[0];
  }

  /** Choose `name` for the runs of this page (a link's recorded version), without remembering it. */
  pin(name: string): boolean {
    if (!usable(this.backend).some((r) => r.name === name)) return false;
    this.select.value = name;
    this.describe();
    this.onSelect?.(this.selected);
    return true;
  }

  /** Choose and remember `name` (a person's choice, e.g. from a hint's button). */
  choose(name: string): boolean {
    if (!this.pin(name)) return false;
    this.preferred = name;
    localStorage.setItem(STORAGE_KEY, name);
    return true;
  }

  showBackend(backend: BackendInfo | undefined): void {
    const keep = this.select.value || this.preferred;
    this.backend = backend;
    const runtimes = this.runtimes;
    // One version offered: nothing to choose (the status bar still names it), and the header stays as it was.
    this.element.hidden = runtimes.length < 2;
    const ready = usable(backend);
    const want = ready.some((r) => r.name === keep) ? keep : (ready.find((r) => r.default) ?? ready[0])?.name ?? "";
    this.select.replaceChildren(
      ...runtimes.map((r) =>
        el(
          "option",
          { value: r.name, disabled: Boolean(r.problem), title: r.problem ?? describeRuntime(r) },
          this.label(r),
        ),
      ),
    );
    this.select.value = want ?? "";
    this.select.disabled = ready.length < 2;
    this.describe();
    this.onSelect?.(this.selected);
  }

  private label(r: RuntimeInfo): string {
    const note = r.problem ? " — unavailable" : r.default && !this.narrow.matches ? " (default)" : "";
    return `JAX ${r.name}${note}`;
  }

  private describe(): void {
    const r = this.selected;
    this.element.title = r ? describeRuntime(r) : "";
    this.element.classList.toggle("runtime-old", Boolean(r && !r.default));
  }
}

/** "jax 0.4.38 · jaxlib 0.4.38 · flax 0.10.2, optax 0.2.4, …" */
export function describeRuntime(r: RuntimeInfo): string {
  const libraries = Object.entries(r.libraries)
    .filter(([name]) => !["jax", "jaxlib"].includes(name))
    .map(([name, version]) => `${name} ${version}`)
    .join(", ");
  return `jax ${r.jax_version} · jaxlib ${r.jaxlib_version}${libraries ? `\n${libraries}` : ""}`;
}

/**
 * For an error naming a JAX API this runtime lacks: the offered runtime to try instead, or null.
 * A name JAX removed goes to the newest runtime older than its removal; one it added to the
 * newest that has it. Without version data, the runtimes' API indexes decide (`hasName`).
 */
export function runtimeForMissingApi(
  ev: ErrorEvent,
  current: string | undefined,
  offered: readonly RuntimeInfo[],
  hasName: (runtime: string, name: string) => boolean | null,
): RuntimeInfo | null {
  if (!ev.api) return null;
  const others = offered.filter((r) => !r.problem && r.name !== current);
  const removed = ev.api_versions?.removed_in;
  const added = ev.api_versions?.added_in;
  let fits: RuntimeInfo[];
  if (removed) fits = others.filter((r) => compareVersions(r.jax_version, removed) < 0);
  else if (added) fits = others.filter((r) => compareVersions(r.jax_version, added) >= 0);
  else fits = others.filter((r) => hasName(r.jax_version, ev.api!) === true);
  return fits.sort((a, b) => compareVersions(b.jax_version, a.jax_version))[0] ?? null;
}

/**
 * The public names of each offered JAX (GET /api/api-index/{version}), fetched when an error names a
 * JAX name without version data: whether `jax.x.y` exists there decides which version to offer.
 */
export class ApiNames {
  private readonly indexes = new Map<string, Promise<ApiIndexData | null>>();

  load(version: string): Promise<ApiIndexData | null> {
    let pending = this.indexes.get(version);
    if (!pending) {
      pending = fetch(`/api/api-index/${encodeURIComponent(version)}`)
        .then((r) => (r.ok ? (r.json() as Promise<ApiIndexData>) : null))
        .catch(() => null);
      this.indexes.set(version, pending);
    }
    return pending;
  }

  /** True/false once `version`'s index is loaded; null before (or without one). */
  has(index: ApiIndexData | null, name: string): boolean | null {
    if (!index) return null;
    const dot = name.lastIndexOf(".");
    const module = index.modules[name.slice(0, dot)];
    return module ? name.slice(dot + 1) in module : null;
  }
}

/** Registers the "Run on JAX x.y" button under errors of APIs another offered runtime has. */
export function offerRuntimesInHints(picker: RuntimePicker, names: ApiNames, runOn: (runtime: string) => void): void {
  HINT_ACTIONS.push((ev) => {
    if (!ev.api) return null;
    const current = picker.selected;
    const holder = el("div", { class: "output-error-runtime", "data-testid": "hint-runtime", hidden: true });
    const offer = (target: RuntimeInfo | null) => {
      if (!target) return;
      const older = current && compareVersions(target.jax_version, current.jax_version) < 0;
      holder.replaceChildren(
        el("span", {}, `${ev.api} exists in ${older ? "an older" : "a newer"} JAX this server offers.`),
        el("button", { class: "btn", type: "button", "data-testid": "hint-run-on", onclick: () => runOn(target.name) },
          `Run on JAX ${target.jax_version}`),
      );
      holder.hidden = false;
    };
    if (ev.api_versions?.removed_in || ev.api_versions?.added_in) {
      offer(runtimeForMissingApi(ev, current?.name, picker.runtimes, () => null));
      return holder;
    }
    // No version data: ask the other versions' API indexes, then offer (the holder fills in later).
    const others = usable({ runtimes: picker.runtimes } as BackendInfo).filter((r) => r.name !== current?.name);
    void Promise.all(others.map((r) => names.load(r.jax_version).then((index) => [r.jax_version, index] as const)))
      .then((loaded) => {
        const byVersion = new Map(loaded);
        offer(runtimeForMissingApi(ev, current?.name, picker.runtimes,
          (version, name) => names.has(byVersion.get(version) ?? null, name)));
      });
    return holder;
  });
}
