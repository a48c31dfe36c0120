/**
 * The Flags tab: the JAX options and XLA flags the next run sets, and the ones the run on screen used.
 *
 * Its `runFields` adds `flags` to every run (and to Compare's runs on other versions) when any is set; the
 * choice is kept per browser. The run's `started` says which flags it runs with, shown here and on the
 * tab's badge; a run refused for its flags (`done` with reason "bad_flags") shows the server's message
 * here, beside the controls, and moves focus to the flag it names.
 *
 * The flags are part of a link: they are a run field, so a shared snippet keeps them in its `settings`,
 * and its page (and embed) opens with exactly those flags chosen, or none if its run had none.
 */

import { el } from "../core/dom";
import type { PanelFactory } from "../panel/types";
import type { RunFlags } from "../wire/protocol";
import { FlagsEditor, flagCount, flagsSummary } from "./flags_editor";
import "./flags.css";

const STORAGE_KEY = "jaxplay.flags";

function asFlags(value: unknown): RunFlags | null {
  if (!value || typeof value !== "object") return null;
  const { config, xla } = value as RunFlags;
  const object = (part: unknown) => part === undefined || (typeof part === "object" && part !== null);
  return object(config) && object(xla) ? { ...(config ? { config } : {}), ...(xla ? { xla } : {}) } : null;
}

function remembered(): RunFlags | null {
  try {
    const raw = localStorage.getItem(STORAGE_KEY);
    return raw ? (JSON.parse(raw) as RunFlags) : null;
  } catch {
    return null;
  }
}

export const flagsPanel: PanelFactory = (ctx) => {
  const editor = new FlagsEditor("flags", "Flags for the next run");
  const used = el("p", { class: "flags-used", "data-testid": "flags-used" });
  const problem = el("p", { class: "flags-problem", role: "alert", "data-testid": "flags-problem", hidden: true });
  const clear = el("button", { class: "btn btn-ghost", type: "button", "data-testid": "flags-clear" }, "Reset all");
  const element = el("div", { class: "flags" },
    el("p", { class: "flags-intro" },
      "JAX options and XLA flags for the next run. Unset ones keep JAX's and XLA's defaults; Compare can run " +
      "two sets side by side."),
    el("div", { class: "flags-toolbar" }, clear),
    problem,
    used,
    editor.element);
  // A link's page opens on its own run's flags; the editor's page on this browser's last choice.
  const shared = ctx.boot.snippet ? (ctx.boot.snippet.settings as { flags?: unknown } | undefined) : undefined;
  let chosen = ctx.boot.snippet ? asFlags(shared?.flags) : remembered();

  function retarget(): void {
    const choices = ctx.runChoices();
    editor.setTarget(choices.runtime?.jax_version, choices.backend);
  }

  function showChosen(): void {
    const n = flagCount(chosen);
    ctx.setBadge(n || null);
  }

  void editor.whenReady().then(() => {
    editor.setValue(chosen);
    retarget();
  });
  editor.onChange = () => {
    chosen = editor.value();
    if (chosen) localStorage.setItem(STORAGE_KEY, JSON.stringify(chosen));
    else localStorage.removeItem(STORAGE_KEY);
    problem.hidden = true;
    retarget();
    showChosen();
  };
  clear.addEventListener("click", () => {
    editor.setValue(null);
    editor.onChange?.();
  });
  showChosen();

  return {
    id: "flags",
    title: "Flags",
    element,
    handles: ["started"],
    onRunStart() {
      used.textContent = "";
      problem.hidden = true;
    },
    onEvent(ev) {
      if (ev.type !== "started") return;
      const summary = flagsSummary(ev.flags);
      used.textContent = summary ? `This run used: ${summary}` : "This run used no flags: JAX's and XLA's defaults.";
    },
    onRunDone(ev) {
      if (ev.status !== "rejected" || ev.reason !== "bad_flags") return;
      problem.textContent = ev.message ?? "The server refused these flags.";
      problem.hidden = false;
      ctx.setBadge("!", "error");
      const named = /(--)?(x?la_[a-z0-9_]+|jax_[a-z0-9_]+)/.exec(ev.message ?? "");
      if (named && ctx.isActive()) editor.focus(named[0]);
    },
    onShow() {
      retarget();
    },
    runFields() {
      return chosen ? { flags: chosen } : {};
    },
  };
};
