/**
 * A form for one set of JAX options and XLA flags, built from the server's allow-list (GET /api/flags).
 *
 * Every option starts unset (JAX's and XLA's own default). A boolean is a three-way select (unset, true,
 * false), a closed set a select, a pass list a text field. Options the chosen runtime's XLA does not know,
 * or that act on another backend, are disabled and say what they need; one already set stays set and
 * marked, so the server refuses it by name rather than the page dropping it unseen. The server checks
 * everything again: this form only helps.
 */

import { el } from "../core/dom";
import type { FlagSpecInfo, FlagsCatalogue, RunFlags } from "../wire/protocol";

const PASS_NAMES = /^[A-Za-z0-9_-]{1,64}(,[A-Za-z0-9_-]{1,64}){0,31}$/;
let catalogue: Promise<FlagsCatalogue> | null = null;

/** The allow-list, fetched once per page. */
export function loadCatalogue(): Promise<FlagsCatalogue> {
  catalogue ??= fetch("/api/flags").then((r) => {
    if (!r.ok) throw new Error(`GET /api/flags: ${r.status}`);
    return r.json() as Promise<FlagsCatalogue>;
  });
  return catalogue;
}

/** "jax_enable_x64=true --xla_disable_hlo_passes=algsimp", or "" for none. */
export function flagsSummary(flags: RunFlags | null | undefined): string {
  if (!flags) return "";
  const config = Object.entries(flags.config ?? {}).map(([k, v]) => `${k}=${v}`);
  const xla = Object.entries(flags.xla ?? {}).map(([k, v]) => `--${k}=${v}`);
  return [...config, ...xla].join(" ");
}

export function flagCount(flags: RunFlags | null | undefined): number {
  return Object.keys(flags?.config ?? {}).length + Object.keys(flags?.xla ?? {}).length;
}

function versionOf(text: string): number[] {
  return text.split(".").map((p) => parseInt(p, 10)).filter((n) => !Number.isNaN(n));
}

function older(a: number[], b: number[]): boolean {
  for (let i = 0; i < Math.max(a.length, b.length); i++) {
    const x = a[i] ?? 0;
    const y = b[i] ?? 0;
    if (x !== y) return x < y;
  }
  return false;
}

/** Why `spec` does nothing on this runtime and backend, or null when it applies. */
export function unavailable(spec: FlagSpecInfo, jaxVersion: string | undefined, backend: string | undefined): string | null {
  if (jaxVersion) {
    const v = versionOf(jaxVersion);
    if (spec.since && older(v, versionOf(spec.since))) return `needs JAX ${spec.since} or later`;
    if (spec.until && !older(v, versionOf(spec.until))) return `not in JAX ${spec.until} or later`;
  }
  if (backend && spec.backends.length && !spec.backends.includes(backend)) return `${spec.backends[0]} only`;
  return null;
}

interface Row {
  spec: FlagSpecInfo;
  group: "config" | "xla";
  control: HTMLSelectElement | HTMLInputElement;
  note: HTMLElement;
}

export class FlagsEditor {
  readonly element: HTMLElement;
  private rows: Row[] = [];
  private readonly ready: Promise<void>;
  /** Told after every change a person makes. */
  onChange: (() => void) | null = null;

  /** `prefix` keeps ids and test ids apart when a page holds several editors ("flags", "compare-a"). */
  constructor(private readonly prefix: string, title: string) {
    this.element = el("div", { class: "flags-editor", "data-testid": `${prefix}-editor` },
      el("p", { class: "flags-loading" }, "Loading the options…"));
    this.element.setAttribute("aria-label", title);
    this.ready = loadCatalogue().then((cat) => this.build(cat), (err: Error) => {
      this.element.replaceChildren(el("p", { class: "flags-problem", role: "alert" },
        `The options could not be loaded (${err.message}); reload the page to try again.`));
    });
  }

  whenReady(): Promise<void> {
    return this.ready;
  }

  private build(cat: FlagsCatalogue): void {
    const group = (name: "config" | "xla", legend: string, specs: FlagSpecInfo[]) =>
      el("fieldset", { class: "flags-group" }, el("legend", {}, legend),
        ...specs.map((spec) => this.row(name, spec)));
    this.element.replaceChildren(
      group("config", "JAX options", cat.config),
      group("xla", "XLA flags", cat.xla),
    );
  }

  private row(group: "config" | "xla", spec: FlagSpecInfo): HTMLElement {
    const id = `${this.prefix}-${spec.name}`;
    let control: HTMLSelectElement | HTMLInputElement;
    if (spec.kind === "pass_names") {
      control = el("input", { type: "text", id, spellcheck: "false", autocomplete: "off", placeholder: "e.g. algsimp,cse",
                              "data-testid": id });
    } else {
      const values = spec.kind === "bool" ? ["true", "false"]
        : spec.kind === "int" ? Array.from({ length: spec.high - spec.low + 1 }, (_, i) => String(spec.low + i))
        : spec.choices;
      control = el("select", { id, "data-testid": id },
        el("option", { value: "" }, "default"), ...values.map((v) => el("option", { value: v }, v)));
    }
    const note = el("span", { class: "flags-note", id: `${id}-note` });
    control.setAttribute("aria-describedby", `${id}-note ${id}-help`);
    control.addEventListener("change", () => this.changed());
    control.addEventListener("input", () => this.checkPasses(control, note));
    this.rows.push({ spec, group, control, note });
    const shown = group === "xla" ? `--${spec.name}` : spec.name;
    return el("div", { class: "flags-row" },
      el("label", { for: id, class: "flags-name" }, shown),
      control,
      el("span", { class: "flags-help", id: `${id}-help` }, spec.help),
      note);
  }

  private checkPasses(control: HTMLSelectElement | HTMLInputElement, note: HTMLElement): void {
    if (!(control instanceof HTMLInputElement)) return;
    const value = control.value.trim();
    const bad = value !== "" && !PASS_NAMES.test(value);
    control.setAttribute("aria-invalid", bad ? "true" : "false");
    note.textContent = bad ? "pass names of letters, digits, '_' and '-', separated by commas" : note.dataset.why ?? "";
  }

  private changed(): void {
    this.onChange?.();
  }

  /** Disables what the runtime's XLA lacks or the backend ignores; a set one stays set, and says so. */
  setTarget(jaxVersion: string | undefined, backend: string | undefined): void {
    for (const row of this.rows) {
      const why = unavailable(row.spec, jaxVersion, backend);
      const set = row.control.value !== "";
      row.control.disabled = why !== null && !set;
      row.note.dataset.why = why ? (set ? `${why}: this run will be refused` : why) : "";
      row.note.textContent = row.note.dataset.why;
      row.note.classList.toggle("flags-warn", why !== null && set);
    }
  }

  /** The chosen flags, or null when none is set. */
  value(): RunFlags | null {
    const flags: Required<RunFlags> = { config: {}, xla: {} };
    for (const row of this.rows) {
      const raw = row.control.value.trim();
      if (!raw) continue;
      const value = row.spec.kind === "bool" ? raw === "true" : row.spec.kind === "int" ? Number(raw) : raw;
      flags[row.group][row.spec.name] = value;
    }
    return flagCount(flags) ? flags : null;
  }

  setValue(flags: RunFlags | null | undefined): void {
    for (const row of this.rows) {
      const value = flags?.[row.group]?.[row.spec.name];
      row.control.value = value === undefined ? "" : String(value);
    }
  }

  /** Puts keyboard focus on the control of `name` (a refused flag), if listed. */
  focus(name: string): boolean {
    const row = this.rows.find((r) => r.spec.name === name || `--${r.spec.name}` === name);
    row?.control.focus();
    return row !== undefined;
  }
}
