/**
 * The Output tab: stdout, stderr (set apart), errors with clickable line
 * numbers and links, displayed results and notices, in arrival order; a
 * one-line pointer for each sharding drawn in the Sharding tab. While another
 * tab is in front, new output shows as a "new" badge on this one.
 *
 * Output can arrive as thousands of small chunks (up to the server's 1 MiB
 * cap), so events only queue work; one flush per animation frame merges
 * consecutive chunks of a stream into one text node, and a stream block is
 * closed after BLOCK_CHARS so the browser lays out small blocks rather than
 * one ever-growing one.
 */

import { el, formatDuration, runShortcutLabel } from "../core/dom";
import { hintActions } from "../panel/hint_actions";
import type { DisplayEvent, DoneEvent, ErrorEvent, NoticeEvent, ServerEvent } from "../wire/protocol";
import { DISPLAY_RENDERERS } from "./display_renderers";
import type { ShardingEvent } from "../sharding/sharding_types";
import type { EditorAccess } from "../editor/editor";
import type { PanelContext, PanelFactory } from "../panel/types";
import "./output.css";

type StreamKind = "stdout" | "stderr";
type Pending = { kind: StreamKind; text: string } | { kind: "node"; node: HTMLElement };

const BLOCK_CHARS = 32_768;
/** Within this many pixels of the bottom, the log keeps following new output. */
const FOLLOW_SLACK_PX = 24;

export const outputPanel: PanelFactory = (ctx) => {
  const log = el("div", { class: "output-log", "data-testid": "output-log" });
  const element = el("div", { class: "output" }, log);

  let pending: Pending[] = [];
  let flushScheduled = false;
  let openBlock: { kind: StreamKind; node: HTMLElement; chars: number } | null = null;
  let follow = true;
  let hasContent = false;
  let errorShown = false;

  /** Tells a person looking at another tab that this one has something new. */
  function markUnseen(): void {
    if (!ctx.isActive() && !errorShown) ctx.setBadge("new");
  }

  log.addEventListener("scroll", () => {
    follow = log.scrollTop + log.clientHeight >= log.scrollHeight - FOLLOW_SLACK_PX;
  });

  function showEmptyHint(): void {
    log.replaceChildren(
      el(
        "div",
        { class: "output-empty" },
        "Output appears here as the program prints it. Press ",
        el("kbd", {}, runShortcutLabel),
        " or Run.",
      ),
    );
  }
  showEmptyHint();

  function enqueue(item: Pending): void {
    pending.push(item);
    if (!flushScheduled) {
      flushScheduled = true;
      requestAnimationFrame(flush);
    }
  }

  function flush(): void {
    flushScheduled = false;
    const items = pending;
    pending = [];
    if (!hasContent && items.length) {
      log.replaceChildren();
      hasContent = true;
    }
    let i = 0;
    while (i < items.length) {
      const item = items[i];
      if (item.kind === "node") {
        openBlock = null;
        log.append(item.node);
        i += 1;
        continue;
      }
      // Merge the run of consecutive chunks of the same stream.
      let text = item.text;
      let j = i + 1;
      while (j < items.length && items[j].kind === item.kind) {
        text += (items[j] as { text: string }).text;
        j += 1;
      }
      appendStream(item.kind, text);
      i = j;
    }
    if (follow) log.scrollTop = log.scrollHeight;
  }

  function appendStream(kind: StreamKind, text: string): void {
    while (text.length) {
      if (!openBlock || openBlock.kind !== kind || openBlock.chars >= BLOCK_CHARS) {
        const node = el("div", { class: `output-stream output-${kind}`, "data-stream": kind });
        log.append(node);
        openBlock = { kind, node, chars: 0 };
      }
      // Split at a newline near the block limit so one block never grows unbounded.
      let take = text.length;
      const room = BLOCK_CHARS - openBlock.chars;
      if (take > room) {
        const cut = text.lastIndexOf("\n", room);
        take = cut > 0 ? cut + 1 : room;
      }
      openBlock.node.append(text.slice(0, take));
      openBlock.chars += take;
      text = text.slice(take);
    }
  }

  return {
    id: "output",
    title: "Output",
    element,
    handles: ["stdout", "stderr", "error", "display", "notice", "sharding"],
    onRunStart() {
      pending = [];
      openBlock = null;
      follow = true;
      hasContent = true;
      errorShown = false;
      log.replaceChildren();
      ctx.setBadge(null);
      ctx.editor.clearLineMarks("error");
    },
    onRunCleared() {
      hasContent = false;
      showEmptyHint();
    },
    onShow() {
      if (!errorShown) ctx.setBadge(null);
    },
    onEvent(ev: ServerEvent) {
      if (ev.type !== "error") markUnseen();
      switch (ev.type) {
        case "stdout":
        case "stderr":
          if (ev.text) enqueue({ kind: ev.type, text: ev.text });
          break;
        case "sharding":
          if (ev.source.kind === "visualize") enqueue({ kind: "node", node: shardingPointer(ev, ctx) });
          break;
        case "error":
          enqueue({ kind: "node", node: errorBlock(ev, ctx.editor) });
          if (ev.line !== null) {
            ctx.editor.setLineMarks(
              "error",
              [{ line: ev.line, kind: "error", title: `${ev.ename}: ${ev.message}` }],
              { clearOnEdit: true },
            );
          }
          errorShown = true;
          ctx.setBadge("!", "error");
          break;
        case "display":
          enqueue({ kind: "node", node: displayBlock(ev) });
          break;
        case "notice":
          enqueue({ kind: "node", node: noticeBlock(ev) });
          break;
      }
    },
    onRunDone(ev: DoneEvent) {
      const line = endOfRunLine(ev);
      if (line) enqueue({ kind: "node", node: line });
      // The status says the run ended in this same task: the log must be whole by then,
      // not a frame later (a screen reader, a test or a person reading at once sees it all).
      flush();
    },
  };
};

/** `jax.debug.visualize_array_sharding` draws in the Sharding tab; Output says where, in one line. */
function shardingPointer(ev: ShardingEvent, ctx: PanelContext): HTMLElement {
  const call = ev.source.name ? `visualize_array_sharding(${ev.source.name})` : "visualize_array_sharding";
  return el(
    "div",
    { class: "output-pointer", "data-testid": "sharding-pointer" },
    `${call}: drawn in the `,
    el("button", { class: "output-pointer-link", type: "button", onclick: () => ctx.showPanel("sharding") }, "Sharding tab"),
    ev.source.line !== null ? ` (line ${ev.source.line})` : "",
  );
}

/** http(s) URLs in error text; trailing punctuation belongs to the sentence, not the link. */
const URL_IN_TEXT = /https?:\/\/[^\s<>"'`]+[^\s<>"'`.,;:!?)\]]/g;

/** `text` with every URL in it an anchor that opens in a new tab. */
function linkified(text: string): (string | HTMLElement)[] {
  const parts: (string | HTMLElement)[] = [];
  let last = 0;
  for (const match of text.matchAll(URL_IN_TEXT)) {
    parts.push(text.slice(last, match.index));
    parts.push(el("a", { href: match[0], target: "_blank", rel: "noopener noreferrer", class: "output-link" }, match[0]));
    last = match.index + match[0].length;
  }
  parts.push(text.slice(last));
  return parts.filter((p) => p !== "");
}

const USER_FRAME_LINE = /File "<playground>", line (\d+)/g;

/** The traceback with each `line N` of a user frame a button that jumps there. */
function linkedTraceback(text: string, editor: EditorAccess): HTMLElement {
  const pre = el("pre", { class: "output-traceback" });
  let last = 0;
  for (const match of text.matchAll(USER_FRAME_LINE)) {
    const start = match.index + match[0].length - `line ${match[1]}`.length;
    pre.append(text.slice(last, start), lineButton(Number(match[1]), editor));
    last = match.index + match[0].length;
  }
  pre.append(text.slice(last));
  return pre;
}

function lineButton(line: number, editor: EditorAccess): HTMLElement {
  return el(
    "button",
    {
      class: "output-line-link",
      type: "button",
      title: `Show line ${line} in the editor`,
      "data-line": line,
      onclick: () => editor.goToLine(line),
    },
    `line ${line}`,
  );
}

/** JAX appends a note after the exception line, below a row of dashes. */
const NOTE_SEPARATOR = /\n-{8,}\n/;

/**
 * Splits a traceback into the frames (shown, with line links) and the notes
 * after the exception line; the exception line itself is the block's heading.
 */
function splitTraceback(ev: ErrorEvent): { frames: string; notes: string } {
  const text = ev.traceback ?? "";
  let at = -1;
  for (const m of text.matchAll(/(^|\n)([\w.]+)(:|\n|$)/g)) {
    if (m[2] === ev.ename || m[2].endsWith(`.${ev.ename}`)) at = m.index + m[1].length;
  }
  if (at < 0) return { frames: text, notes: "" };
  const rest = text.slice(at);
  const sep = NOTE_SEPARATOR.exec(rest);
  return { frames: text.slice(0, at), notes: sep ? rest.slice(sep.index + sep[0].length).trim() : "" };
}

function errorBlock(ev: ErrorEvent, editor: EditorAccess): HTMLElement {
  const { frames, notes } = splitTraceback(ev);
  const head = el(
    "div",
    { class: "output-error-head" },
    el("span", { class: "output-error-name" }, ev.ename),
    ev.line !== null ? lineButton(ev.line, editor) : null,
  );
  return el(
    "div",
    { class: "output-error", role: "alert", "data-testid": "output-error" },
    head,
    ev.message ? el("div", { class: "output-error-message" }, ...linkified(ev.message)) : null,
    frames.trim() ? linkedTraceback(frames.replace(/\n+$/, ""), editor) : null,
    notes ? el("div", { class: "output-error-notes" }, ...linkified(notes)) : null,
    ev.hint
      ? el("div", { class: "output-error-hint", "data-testid": "error-hint" }, el("span", { class: "output-error-hint-label" }, "Hint"), ...linkified(ev.hint))
      : null,
    ...hintActions(ev),
  );
}

function displayBlock(ev: DisplayEvent): HTMLElement {
  const render = DISPLAY_RENDERERS[ev.mime];
  const body = render
    ? render(ev)
    : el("div", { class: "output-note" }, `This page cannot show ${ev.mime} output yet.`);
  return el(
    "div",
    { class: "output-display", "data-role": ev.role ?? "", "data-mime": ev.mime },
    ev.role === "result" ? el("span", { class: "output-display-label" }, "result") : null,
    body,
    ev.notice ? el("div", { class: "output-note" }, ev.notice) : null,
  );
}

function noticeBlock(ev: NoticeEvent): HTMLElement {
  return el("div", { class: `output-notice output-notice-${ev.level}`, role: "status" }, ev.message);
}

/** A closing line for runs that did not end normally (ok and error speak for themselves). */
function endOfRunLine(ev: DoneEvent): HTMLElement | null {
  const after = ev.elapsed_ms > 0 ? ` after ${formatDuration(ev.elapsed_ms)}` : "";
  const words: Record<string, string> = {
    timeout: `Timed out${after}.`,
    cancelled: `Cancelled${after}.`,
    crashed: `The run crashed${after}.`,
    rejected: "The run was not accepted.",
  };
  const text = words[ev.status];
  if (!text) return null;
  return el(
    "div",
    { class: `output-end output-end-${ev.status}` },
    text,
    ev.message ? el("span", { class: "output-end-message" }, ` ${ev.message}`) : null,
  );
}
