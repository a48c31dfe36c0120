/**
 * Sharing: the Share button (and Ctrl+S / Cmd+S) that stores the code, its
 * backend and settings, and the run on screen as a permanent link and copies
 * it, with the embed code beside it; the Export menu; the link a snippet was
 * forked from, and the line above the code while it differs from its link's;
 * the embed view's read-only lock.
 *
 * The app calls `onRunStart` and `onEvent` for the run on screen (live or
 * replayed): `share_recording.ts` keeps it, so the last finished run can be
 * shared exactly as it was shown, and replays a shared snippet's recorded run
 * into the panels on load under the "recorded" (or "cached") banner.
 */

import type { Boot } from "../core/boot";
import { el, isApple } from "../core/dom";
import { Popup } from "../core/popup";
import type { PlaygroundEditor } from "../editor/editor";
import type { ClientRun, ServerEvent, StartedEvent } from "../wire/protocol";
import { ShareBanner } from "./share_banner";
import { EMBED_VIEWS, type EmbedView, embedUrlFor } from "./embed_view";
import { lockUntilEdit } from "./share_embed";
import { downloadNotebook, downloadPython, exportBaseName } from "./share_export";
import { RunRecording, type SharedSnippet, snippetFrom } from "./share_recording";
import "./share_storage";
import "./share.css";

/** The server's limit on a shared recorded run (max_recorded_run_bytes), as a link's page holds it. */
const MAX_RECORDED_RUN_CHARS = 10 * 1024 * 1024;

/** A run's size as a link's page holds it: the page writes <, >, & and ' as \u003c and so on. */
function pageSize(json: string): number {
  return json.length + 5 * (json.match(/[<>&']/g)?.length ?? 0);
}
const shortcutLabel = isApple ? "⌘ S" : "Ctrl S";

export interface ShareContext {
  boot: Boot;
  editor: PlaygroundEditor;
  topbar: HTMLElement;
  /** Where the editor is: a line above it says when the code differs from the link's. */
  editorPane: HTMLElement;
  results: HTMLElement;
  backend(): string | undefined;
  /** The run fields the panels add (e.g. inspect): the snippet's settings. */
  runFields(): Record<string, unknown>;
  /** How the panels show the run (e.g. Inspect's panes), kept in the snippet's settings beside the run fields. */
  linkFields(): Record<string, unknown>;
  run(extra?: Partial<ClientRun>): void;
  /** Shows recorded events through the same path as a live run's. */
  replay(events: ServerEvent[]): void;
  /** The editor's text was just stored as snippet `id`. */
  linked(id: string, code: string): void;
}

interface ShareAnswer {
  id: string;
  url: string;
  embed_url: string;
}

function embedSnippet(embedUrl: string): string {
  return `<iframe src="${embedUrl}" width="100%" height="420" style="border:1px solid #ddd;border-radius:6px" loading="lazy" title="JAX Playground"></iframe>`;
}

export class ShareController {
  readonly banner: ShareBanner;
  private readonly snippet: SharedSnippet | null;
  private readonly embed: boolean;
  /** The link this editor's content descends from: the opened snippet, then each one shared here. */
  private link: { id: string; forkedFrom: string | null } | null;
  private readonly recording: RunRecording;
  private readonly popover = el("div", { class: "share-popover", hidden: true, "data-testid": "share-dialog" });
  private readonly origin = el("span", { class: "share-origin", "data-testid": "share-origin" });
  private readonly modifiedStrip = el("div", { class: "share-modified", role: "status", hidden: true, "data-testid": "draft-note" });
  private readonly shareButton = el(
    "button",
    { class: "btn share-button", type: "button", title: `Share a permanent link (${shortcutLabel})`, "data-testid": "share" },
    "Share",
    el("kbd", { class: "btn-kbd" }, shortcutLabel),
  );
  /** The code the link on screen holds: the editor's text differs from it once edited ("modified"). */
  private linkCode: string | null;
  private modified = false;
  private includeRun = true;
  private embedView: EmbedView = "output";
  private busy = false;
  private sharePopup: Popup | null = null;

  constructor(private readonly ctx: ShareContext) {
    this.embed = ctx.boot.mode === "embed";
    this.snippet = snippetFrom(ctx.boot);
    this.link = this.snippet ? { id: this.snippet.id, forkedFrom: this.snippet.forked_from } : null;
    this.linkCode = this.snippet?.code ?? null;
    this.banner = new ShareBanner(() => ctx.run({ fresh: true }));
    this.recording = new RunRecording(this.banner);
    ctx.results.prepend(this.banner.element);
    if (this.embed) {
      lockUntilEdit(ctx.editor.view, ctx.topbar);
    } else {
      this.modified = this.linkCode !== null && ctx.editor.getCode() !== this.linkCode;
      this.mountControls();
    }
    const snippet = this.snippet;
    if (snippet?.recorded_run?.length) {
      const events = snippet.recorded_run;
      // After the app is built: the replay goes through its panels.
      queueMicrotask(() => this.recording.replay(snippet, events, (recorded) => ctx.replay(recorded)));
    }
  }

  // --- the run on screen -------------------------------------------------

  onRunStart(message: ClientRun): void {
    this.recording.onRunStart(message);
  }

  /** No run on screen: nothing to share with the code, no banner. */
  clear(): void {
    this.recording.clear();
  }

  onEvent(ev: ServerEvent): void {
    this.recording.onEvent(ev);
  }

  // --- sharing -----------------------------------------------------------

  async share(): Promise<void> {
    if (this.busy) return;
    this.busy = true;
    this.shareButton.disabled = true;
    try {
      await this.createLink();
    } finally {
      this.busy = false;
      this.shareButton.disabled = false;
    }
  }

  private async createLink(): Promise<void> {
    const code = this.ctx.editor.getCode();
    const backend = this.ctx.backend() ?? null;
    const fields = this.ctx.runFields();
    const run = this.recording.shareableRun(code, backend, JSON.stringify(fields));
    const body: Record<string, unknown> = { code, backend, settings: { ...fields, ...this.ctx.linkFields() } };
    let runNote: string | null = run ? null : "No recorded run: run the code first to include its output.";
    if (run && this.includeRun) {
      if (pageSize(JSON.stringify(run.events)) > MAX_RECORDED_RUN_CHARS) {
        runNote = "The run's output is over 10 MiB, so the link has the code only.";
      } else {
        body.recorded_run = run.events;
        // The JAX version it ran on: opening the link runs on it again while it is offered (runtimes_link.ts).
        const started = run.events.find((e): e is StartedEvent => e.type === "started");
        if (started?.runtime) body.runtime = started.runtime;
        if (run.recordedAt) body.recorded_at = run.recordedAt;
      }
    }
    if (this.link) body.forked_from = this.link.id;
    this.showPopover([el("div", { class: "share-status" }, "Creating a link…")]);
    let answer: ShareAnswer;
    try {
      const response = await fetch("/api/snippets", {
        method: "POST",
        headers: { "Content-Type": "application/json", Accept: "application/json" },
        body: JSON.stringify(body),
      });
      const payload = (await response.json().catch(() => ({}))) as Partial<ShareAnswer> & { message?: string };
      if (!response.ok || !payload.id || !payload.url || !payload.embed_url) {
        throw new Error(payload.message ?? `The server answered HTTP ${response.status}.`);
      }
      answer = payload as ShareAnswer;
    } catch (err) {
      const message = err instanceof Error ? err.message : String(err);
      this.showPopover([el("div", { class: "share-status share-error", role: "alert" }, `Could not share: ${message}`)]);
      return;
    }
    if (answer.id !== this.link?.id) this.link = { id: answer.id, forkedFrom: this.link?.id ?? null };
    this.linkCode = code;
    this.modified = this.ctx.editor.getCode() !== code;
    this.ctx.linked(answer.id, code);
    // The address bar names what is on screen, so a reload or a copied URL gives this snippet;
    // the page it came from stays one Back away.
    const path = `/s/${answer.id}`;
    if (window.location.pathname !== path) window.history.pushState({ snippet: answer.id }, "", path);
    this.renderOrigin();
    const urlInput = el("input", { class: "share-url", type: "text", readonly: true, value: answer.url, "aria-label": "Link", "data-testid": "share-url" });
    const copied = el("span", { class: "share-copied", "data-testid": "share-copied" });
    const embedInput = el("input", { class: "share-url", type: "text", readonly: true, value: embedSnippet(embedUrlFor(answer.embed_url, this.embedView)), "aria-label": "Embed code", "data-testid": "share-embed-code" });
    const embedView = el("select", { class: "share-embed-view", "aria-label": "The embed opens on", "data-testid": "share-embed-view" },
      ...EMBED_VIEWS.map(([id, title]) => el("option", { value: id, selected: id === this.embedView }, title)));
    embedView.addEventListener("change", () => {
      this.embedView = embedView.value as EmbedView;
      embedInput.value = embedSnippet(embedUrlFor(answer.embed_url, this.embedView));
    });
    const include = el("input", { type: "checkbox", checked: Boolean(run) && this.includeRun, disabled: !run, "data-testid": "share-include-run" });
    include.addEventListener("change", () => {
      this.includeRun = include.checked;
      void this.share();
    });
    this.showPopover([
      el("label", { class: "share-row" }, el("span", { class: "share-label" }, "Link"), urlInput,
        el("button", { class: "btn", type: "button", onclick: () => void this.copy(urlInput, copied) }, "Copy")),
      copied,
      el("label", { class: "share-check" }, include, " Include the recorded run (output, compiled functions, sharding)"),
      runNote && (!run || this.includeRun) ? el("div", { class: "share-note" }, runNote) : null,
      el("label", { class: "share-row" }, el("span", { class: "share-label" }, "Embed"), embedInput,
        el("button", { class: "btn", type: "button", onclick: () => void this.copy(embedInput, null) }, "Copy")),
      el("label", { class: "share-check" }, "The embed opens on ", embedView,
        el("span", { class: "share-note-inline" }, " (its tabs reach the others)")),
      el("div", { class: "share-note" }, "Links never change: editing and sharing again makes a new link that names this one."),
    ]);
    await this.copy(urlInput, copied);
  }

  private async copy(input: HTMLInputElement, report: HTMLElement | null): Promise<void> {
    input.focus();
    input.select();
    let done = false;
    try {
      await navigator.clipboard.writeText(input.value);
      done = true;
    } catch {
      // Not a secure context, or no permission: the selected text can still be copied the old way.
      try {
        done = document.execCommand("copy");
      } catch {
        done = false;
      }
    }
    if (report) {
      report.textContent = done ? "Copied to the clipboard." : `Press ${isApple ? "⌘" : "Ctrl"}+C to copy the selected link.`;
      report.dataset.copied = String(done);
    }
  }

  // --- controls ------------------------------------------------------------

  private mountControls(): void {
    const { topbar } = this.ctx;
    this.ctx.editorPane.prepend(this.modifiedStrip);
    const exportMenu = this.exportMenu();
    const anchor = el("span", { class: "share-anchor" }, this.shareButton, this.popover);
    this.sharePopup = new Popup({ button: this.shareButton, popup: this.popover, kind: "dialog", label: "Share",
                                  within: anchor, toggleOnClick: false });
    const before = topbar.querySelector(".backend");
    if (before) before.before(exportMenu, anchor);
    else topbar.append(exportMenu, anchor);
    topbar.querySelector(".brand")?.after(this.origin);
    this.renderOrigin();
    this.shareButton.addEventListener("click", () => void this.share());
    // Back and Forward move between pages this one pushed (`/`, `/s/{id}`): load the one now named.
    window.addEventListener("popstate", () => window.location.reload());
    // Ctrl+S shares from anywhere on the page (the browser would save the page instead).
    document.addEventListener("keydown", (e) => {
      const mod = isApple ? e.metaKey && !e.ctrlKey : e.ctrlKey && !e.metaKey;
      if (mod && !e.altKey && !e.shiftKey && e.key.toLowerCase() === "s") {
        e.preventDefault();
        void this.share();
      }
    }, true);
  }

  private showPopover(children: (Node | null)[]): void {
    this.popover.replaceChildren(...children.filter((c): c is Node => c !== null));
    this.sharePopup?.open("none");
  }

  /** The editor's text changed: a link's page says when it no longer shows what its link holds. */
  onCodeChange(code: string): void {
    const modified = this.linkCode !== null && code !== this.linkCode;
    if (modified === this.modified) return;
    this.modified = modified;
    this.renderOrigin();
  }

  private renderOrigin(): void {
    this.renderModified();
    if (!this.link) {
      this.origin.hidden = true;
      return;
    }
    const { id, forkedFrom } = this.link;
    this.origin.hidden = false;
    this.origin.replaceChildren(
      el("a", { href: `/s/${id}`, title: "This snippet's permanent link", "data-testid": "snippet-link" }, id),
      ...(forkedFrom
        ? [el("span", { class: "share-forked" }, " · forked from ",
            el("a", { href: `/s/${forkedFrom}`, "data-testid": "forked-from" }, forkedFrom))]
        : []),
    );
  }

  /** A line above the code while it differs from the link's (edits, or edits kept from an earlier visit):
   * the address still names the link, so copying it would share the old code. */
  private renderModified(): void {
    const strip = this.modifiedStrip;
    strip.hidden = !(this.modified && this.link && this.linkCode !== null);
    if (strip.hidden || !this.link || this.linkCode === null) return;
    const linkCode = this.linkCode;
    strip.replaceChildren(
      el("span", { class: "share-modified-tag" }, "modified"),
      el("span", { class: "share-modified-text" }, "This code differs from the link ",
         el("a", { href: `/s/${this.link.id}` }, this.link.id), " in the address bar."),
      el("button", { class: "btn share-modified-button", type: "button", "data-testid": "share-again",
                     title: "Make a link to the code as it is now", onclick: () => void this.share() }, "Share again"),
      el("button", { class: "btn btn-ghost share-modified-button", type: "button", "data-testid": "draft-revert",
                     title: "Put the link's code back", onclick: () => this.ctx.editor.setCode(linkCode) }, "Revert"),
    );
  }

  private exportMenu(): HTMLElement {
    const menu = el("div", { class: "share-menu" });
    const toggle = el("button", { class: "btn btn-ghost", type: "button", title: "Download the code", "data-testid": "export" },
      "Export", el("span", { "aria-hidden": "true" }, " ▾"));
    const name = () => exportBaseName(this.link?.id ?? null);
    const popup = new Popup({ button: toggle, popup: menu, kind: "menu" });
    const item = (label: string, testid: string, action: () => void) =>
      el("button", { class: "share-menu-item", type: "button", role: "menuitem", tabindex: "-1", "data-testid": testid,
        onclick: () => { popup.close(true); action(); } }, label);
    menu.append(
      item("Python file (.py)", "export-py", () => downloadPython(this.ctx.editor.getCode(), name())),
      item("Jupyter notebook (.ipynb)", "export-ipynb", () => {
        const code = this.ctx.editor.getCode();
        downloadNotebook(code, name(), this.recording.runOf(code));
      }),
    );
    return el("span", { class: "share-anchor" }, toggle, menu);
  }
}

export function mountShare(ctx: ShareContext): ShareController {
  return new ShareController(ctx);
}
