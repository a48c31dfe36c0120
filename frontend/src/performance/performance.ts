/**
 * The Performance tab: where the time went and how close it came to the hardware.
 *
 * Top: "Profile this run" (the run option `profile`), then the roofline of every jitted function
 * that ran (from the `roofline` event), then one timeline per `profile` event (the whole run, or
 * each `with playground.profile():` block). Slices and points link to Inspect (a
 * `jaxplay:show-compiled` window event naming the compilation) and to the editor.
 */

import { el } from "../core/dom";
import "./performance.css";
import type { RooflineEvent } from "./perf_types";
import { rooflineChart } from "./roofline";
import { timelineBlock } from "./timeline";
import type { PanelFactory } from "../panel/types";

const PROFILE_KEY = "jaxplay.profile";

export const performancePanel: PanelFactory = (ctx) => {
  let profileOn = localStorage.getItem(PROFILE_KEY) === "1";
  let roofline: RooflineEvent | null = null;
  let profiles = 0;
  let finished = false;

  const toggle = el("input", { type: "checkbox", "data-testid": "profile-toggle" });
  toggle.checked = profileOn;
  toggle.addEventListener("change", () => {
    profileOn = toggle.checked;
    localStorage.setItem(PROFILE_KEY, profileOn ? "1" : "0");
  });
  const option = el(
    "label",
    { class: "inspect-option", title: "Record the next run with jax.profiler and draw its timeline here (slower Python while it records)" },
    toggle,
    " Profile this run",
  );
  const rooflineArea = el("div", { class: "perf-roofline", "data-testid": "perf-roofline" });
  const profilesArea = el("div", { class: "perf-profiles", "data-testid": "perf-profiles" });
  const hint = el("div", { class: "inspect-empty perf-hint" });
  const element = el(
    "div",
    { class: "perf" },
    el("div", { class: "inspect-top-bar" }, el("h3", { class: "inspect-heading" }, "Roofline"), option),
    hint,
    rooflineArea,
    profilesArea,
  );
  const hooks = {
    onLine: (line: number) => ctx.editor.goToLine(line),
    onCompiled: (key: string) => window.dispatchEvent(new CustomEvent("jaxplay:show-compiled", { detail: { key } })),
  };

  function drawHint(): void {
    const parts: string[] = [];
    if (!roofline) {
      parts.push(finished
        ? "No jitted function ran after compiling in this run, so there is nothing to place on a roofline."
        : "After a run, each jitted function that ran appears here against the device's roofs: compute- or " +
          "memory-bound, and how close to the peak.");
    }
    if (!profiles) {
      parts.push("For a timeline of where the time went, tick “Profile this run”, or wrap code in " +
        "`with profile():` (from playground import profile).");
    }
    hint.textContent = parts.join(" ");
    hint.hidden = parts.length === 0;
  }
  drawHint();

  return {
    id: "performance",
    title: "Performance",
    element,
    handles: ["roofline", "profile"],
    runFields: () => (profileOn ? { profile: true } : {}),
    onRunStart() {
      roofline = null;
      profiles = 0;
      finished = false;
      rooflineArea.replaceChildren();
      profilesArea.replaceChildren();
      ctx.setBadge(null);
      drawHint();
    },
    onEvent(ev) {
      if (ev.type === "roofline") {
        roofline = ev;
        rooflineArea.replaceChildren(rooflineChart(ev, hooks.onCompiled, hooks.onLine));
      } else if (ev.type === "profile") {
        profiles += 1;
        if (profiles === 1) profilesArea.append(el("h3", { class: "inspect-heading" }, "Profiles"));
        profilesArea.append(timelineBlock(ev, hooks));
        ctx.setBadge(profiles);
      }
      drawHint();
    },
    onRunDone() {
      finished = true;
      drawHint();
    },
  };
};
