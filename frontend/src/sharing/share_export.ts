/**
 * Export: the code in the editor as a `.py` file, or as a Jupyter notebook
 * (`.ipynb`, nbformat 4.5) holding the run on screen's outputs (text,
 * values, figures, the error) when that run is of exactly this code. Built in
 * the page, so it works for code that was never shared and needs no server
 * round trip.
 *
 * What a notebook carries, whoever recorded the run: every output's plain
 * text (so GitHub, nbviewer and an untrusted Jupyter show something), images
 * (PNG, JPEG, GIF, and SVG without scripts, handlers or outside references),
 * and HTML only where the server vouched that a run of this code on this
 * server made it (`vouch`, server/runs/output_vouch.py): a link's recorded
 * run is the sharer's word, and a forged one must not put scripts into a
 * notebook. Nothing else: no JavaScript, no widget state, no other MIME types.
 *
 * A program that imports the playground's helpers (`from playground import
 * timeit`) gets a block at the top (playground_fallback.py) that
 * stands in for them where `playground` is not installed, so the file runs
 * as plain Python.
 */

import playgroundFallback from "./playground_fallback.py?raw";
import type { DisplayEvent, ErrorEvent, ServerEvent } from "../wire/protocol";

type NotebookOutput =
  | { output_type: "stream"; name: "stdout" | "stderr"; text: string[] }
  | { output_type: "display_data"; data: Record<string, string | string[]>; metadata: Record<string, unknown> }
  | { output_type: "execute_result"; execution_count: number; data: Record<string, string | string[]>; metadata: Record<string, unknown> }
  | { output_type: "error"; ename: string; evalue: string; traceback: string[] };

export interface NotebookCell {
  cell_type: "code";
  id: string;
  metadata: Record<string, unknown>;
  execution_count: number | null;
  outputs: NotebookOutput[];
  source: string[];
}

export interface Notebook {
  nbformat: 4;
  nbformat_minor: 5;
  metadata: Record<string, unknown>;
  cells: NotebookCell[];
}

const IMPORTS_PLAYGROUND = /^[ \t]*(?:from[ \t]+playground(?:\.\w+)*[ \t]+import\b|import[ \t]+playground\b)/m;
/** MIME types whose data Jupyter keeps as a string, not as lines; the images an export carries from anyone. */
const BINARY_MIMES = new Set(["image/png", "image/jpeg", "image/gif"]);
/** What makes an SVG active or reach out: scripts, event handlers, embedded documents, links out. */
const INSIDE = String.raw`(?!#|data:image\/(?:png|jpeg|gif);)`;
const ACTIVE_SVG = new RegExp(
  String.raw`<\s*(?:script|foreignObject|iframe|embed|object|animate|set|handler|listener)\b|[\s/]on[a-z]+\s*=|` +
  String.raw`javascript:|@import|url\(\s*(?:["']\s*${INSIDE}|(?!["'])${INSIDE})|(?:xlink:)?href\s*=\s*(?:"\s*${INSIDE}|'\s*${INSIDE}|(?!["'])${INSIDE})`,
  "i",
);

/** Jupyter keeps a cell's source as lines, each with its newline except the last. */
export function sourceLines(code: string): string[] {
  const text = code.replace(/\n+$/, "");
  return text ? text.split(/(?<=\n)/) : [];
}

/** Output text as lines, each keeping its newline (the last may have none). */
function textLines(text: string): string[] {
  return text ? text.split(/(?<=\n)/) : [];
}

export function importsPlayground(code: string): boolean {
  return IMPORTS_PLAYGROUND.test(code);
}

/** The code as a file that runs outside the playground: with the helpers' stand-ins when it imports them. */
export function exportablePython(code: string): string {
  const body = code.endsWith("\n") ? code : `${code}\n`;
  return importsPlayground(code) ? `${playgroundFallback}${body}` : body;
}

/** An SVG an export may carry: no scripts, handlers, embedded documents or references outside itself. */
export function inertSvg(svg: string): boolean {
  return !ACTIVE_SVG.test(svg);
}

/** The forms of a display an export carries: always text/plain, then the richer one where allowed. */
export function exportedData(ev: DisplayEvent): Record<string, string | string[]> {
  const text = ev.mime === "text/plain" ? ev.data : ev.text ?? `[${ev.mime} output: run the cell to see it]`;
  const data: Record<string, string | string[]> = { "text/plain": textLines(text) };
  if (BINARY_MIMES.has(ev.mime)) data[ev.mime] = ev.data;
  else if (ev.mime === "image/svg+xml" && inertSvg(ev.data)) data[ev.mime] = textLines(ev.data);
  else if (ev.mime === "text/html" && typeof ev.vouch === "string") data[ev.mime] = textLines(ev.data);
  return data;
}

function displayOutput(ev: DisplayEvent): NotebookOutput {
  const data = exportedData(ev);
  const metadata: Record<string, unknown> =
    ev.width && ev.height && ev.mime in data ? { [ev.mime]: { width: ev.width, height: ev.height } } : {};
  return ev.role === "result"
    ? { output_type: "execute_result", execution_count: 1, data, metadata }
    : { output_type: "display_data", data, metadata };
}

function errorOutput(ev: ErrorEvent): NotebookOutput {
  const traceback = (ev.traceback || `${ev.ename}: ${ev.message}`).replace(/\n+$/, "").split("\n");
  if (ev.hint) traceback.push("", `Hint: ${ev.hint}`);
  return { output_type: "error", ename: ev.ename, evalue: ev.message, traceback };
}

/** A run's events as notebook outputs: consecutive chunks of a stream merged, in the order they came. */
export function notebookOutputs(events: readonly ServerEvent[]): NotebookOutput[] {
  const outputs: NotebookOutput[] = [];
  for (const ev of events) {
    if (ev.type === "stdout" || ev.type === "stderr") {
      const last = outputs[outputs.length - 1];
      if (last?.output_type === "stream" && last.name === ev.type) {
        const merged = last.text.join("") + ev.text;
        last.text = textLines(merged);
      } else if (ev.text) {
        outputs.push({ output_type: "stream", name: ev.type, text: textLines(ev.text) });
      }
    } else if (ev.type === "display") {
      outputs.push(displayOutput(ev));
    } else if (ev.type === "error") {
      outputs.push(errorOutput(ev));
    }
  }
  return outputs;
}

function codeCell(id: string, code: string, outputs: NotebookOutput[] = []): NotebookCell {
  return { cell_type: "code", id, metadata: {}, execution_count: outputs.length ? 1 : null, outputs, source: sourceLines(code) };
}

/** `events`: the recorded run of exactly `code`, whose outputs the program's cell keeps (or null). */
export function notebookFor(code: string, events: readonly ServerEvent[] | null = null): Notebook {
  const cells: NotebookCell[] = [];
  if (importsPlayground(code)) cells.push(codeCell("playground-helpers", playgroundFallback));
  cells.push(codeCell("jax-playground", code, events ? notebookOutputs(events) : []));
  return {
    nbformat: 4,
    nbformat_minor: 5,
    metadata: {
      kernelspec: { name: "python3", display_name: "Python 3", language: "python" },
      language_info: { name: "python", file_extension: ".py", mimetype: "text/x-python" },
    },
    cells,
  };
}

/** "snippet-k3v9q2xa" for a shared snippet, else "jax-playground". */
export function exportBaseName(snippetId: string | null): string {
  return snippetId ? `snippet-${snippetId}` : "jax-playground";
}

export function download(filename: string, text: string, type: string): void {
  const url = URL.createObjectURL(new Blob([text], { type }));
  const link = document.createElement("a");
  link.href = url;
  link.download = filename;
  link.hidden = true;
  document.body.append(link);
  link.click();
  link.remove();
  // The browser has the blob once the click is handled; free it soon after.
  window.setTimeout(() => URL.revokeObjectURL(url), 1000);
}

export function downloadPython(code: string, baseName: string): void {
  download(`${baseName}.py`, exportablePython(code), "text/x-python");
}

export function downloadNotebook(code: string, baseName: string, events: readonly ServerEvent[] | null): void {
  download(`${baseName}.ipynb`, `${JSON.stringify(notebookFor(code, events), null, 1)}\n`, "application/x-ipynb+json");
}
