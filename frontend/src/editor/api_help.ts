/**
 * Help while writing JAX, from the API index of the JAX the backend runs
 * (./api_index): completion after `jnp.`, `jax.random.`, ...; the signature of
 * the function whose call the cursor is in; docs on hover. All offline: the
 * index comes from this server, once per JAX version, when one of them first needs it. This
 * module is loaded when the editor is first used (./api_help_loader).
 */

import { autocompletion, type Completion, type CompletionContext, type CompletionResult } from "@codemirror/autocomplete";
import { pythonLanguage } from "@codemirror/lang-python";
import { syntaxTree } from "@codemirror/language";
import { type EditorState, type Extension, StateEffect, StateField } from "@codemirror/state";
import {
  EditorView, hoverTooltip, keymap, showTooltip, type Tooltip, tooltips, ViewPlugin, type ViewUpdate,
} from "@codemirror/view";
import { activeParam, compactSignature, docNodes, signatureParams } from "./api_doc_text";
import type { ApiIndex, ResolvedName } from "./api_index";
import { el } from "../core/dom";
import "./api_help.css";

type SyntaxNode = ReturnType<ReturnType<typeof syntaxTree>["resolveInner"]>;

const COMPLETION_TYPES: Record<string, string> = { function: "function", class: "class", module: "namespace", value: "variable" };
const NO_HELP_NODES = new Set(["String", "FormatString", "Comment"]);
const DOTTED_BEFORE = /[A-Za-z_][\w]*(?:\.[A-Za-z_]\w*)*\.\w*$/;

function inStringOrComment(state: EditorState, pos: number): boolean {
  for (let node: SyntaxNode | null = syntaxTree(state).resolveInner(pos, -1); node; node = node.parent) {
    if (NO_HELP_NODES.has(node.name)) return true;
  }
  return false;
}

function completionSource(index: ApiIndex) {
  return async (context: CompletionContext): Promise<CompletionResult | null> => {
    const match = context.matchBefore(DOTTED_BEFORE);
    if (!match || inStringOrComment(context.state, context.pos)) return null;
    if (!index.data) await index.ensure();
    if (context.aborted) return null;
    const dot = match.text.lastIndexOf(".");
    const module = index.module(match.text.slice(0, dot), context.state.doc.toString());
    const names = module ? index.data?.modules[module] : undefined;
    if (!names) return null;
    const options: Completion[] = Object.entries(names).map(([label, entry]) => {
      const signature = entry.s ? compactSignature(entry.s) : undefined;
      const doc = entry.d;
      return {
        label,
        type: COMPLETION_TYPES[entry.k] ?? "variable",
        detail: signature && signature.length <= 60 ? signature : signature ? `${signature.slice(0, 57)}…)` : undefined,
        info: doc ? () => el("div", { class: "api-help-doc" }, ...docNodes(doc)) : undefined,
      };
    });
    return { from: match.from + dot + 1, options, validFor: /^\w*$/ };
  };
}

/** The argument the cursor is in: its position among the call's arguments, or the keyword it names. */
interface ArgumentAt {
  index: number;
  keyword: string | null;
}

/** The parameters, the one the cursor fills marked (signature help). */
function paramsNodes(signature: string, at: ArgumentAt | null): HTMLElement {
  const compact = compactSignature(signature);
  if (!at) return el("span", { class: "api-help-params" }, compact);
  const { params, tail } = signatureParams(compact);
  const active = activeParam(params, at.index, at.keyword);
  const parts: (string | HTMLElement)[] = ["("];
  params.forEach((param, i) => {
    if (i) parts.push(", ");
    parts.push(i === active ? el("span", { class: "api-help-active", "data-testid": "signature-active" }, param.text) : param.text);
  });
  parts.push(`)${tail}`);
  return el("span", { class: "api-help-params" }, ...parts);
}

/** `jax.numpy.sum(a, axis=None, ...)` and the docstring's first line. */
function helpCard(name: ResolvedName, role: string, at: ArgumentAt | null = null): HTMLElement {
  const { path, entry } = name;
  return el(
    "div",
    { class: "api-help", "data-testid": role },
    el("code", { class: "api-help-signature" }, path, entry.s ? paramsNodes(entry.s, at) : null),
    entry.d ? el("div", { class: "api-help-doc" }, ...docNodes(entry.d)) : null,
  );
}

/** The innermost call whose argument list holds `pos`: the callee's text, where its list opens, and
 * which argument `pos` is in. */
function enclosingCall(state: EditorState, pos: number): { callee: string; open: number; at: ArgumentAt } | null {
  for (let node: SyntaxNode | null = syntaxTree(state).resolveInner(pos, -1); node; node = node.parent) {
    if (node.name !== "ArgList" || pos <= node.from) continue;
    const closed = state.doc.sliceString(node.to - 1, node.to) === ")";
    if (closed && pos >= node.to) continue;
    const call = node.parent;
    const callee = call?.firstChild;
    if (call?.name !== "CallExpression" || !callee) return null;
    let index = 0;
    let argumentStart = node.from + 1;
    for (let child = node.firstChild; child && child.from < pos; child = child.nextSibling) {
      if (child.name === "," && child.to <= pos) {
        index++;
        argumentStart = child.to;
      }
    }
    const keyword = /^\s*(\w+)\s*=(?!=)/.exec(state.doc.sliceString(argumentStart, pos))?.[1] ?? null;
    return {
      callee: state.doc.sliceString(callee.from, callee.to).replace(/\s+/g, ""),
      open: node.from,
      at: { index, keyword },
    };
  }
  return null;
}

/** Escape hides the signature of the call the cursor is in, until the cursor is in another call. */
const dismissSignature = StateEffect.define<number>();
/** The API index arrived: what the cursor is in may now have a signature to show. */
const indexArrived = StateEffect.define<null>();

interface SignatureState {
  tooltip: Tooltip | null;
  /** Where the dismissed call's argument list opens (mapped through edits). */
  dismissed: number | null;
}

function signatureField(index: ApiIndex) {
  const compute = (state: EditorState, dismissed: number | null): SignatureState => {
    const selection = state.selection.main;
    if (!selection.empty || inStringOrComment(state, selection.head)) return { tooltip: null, dismissed };
    const call = enclosingCall(state, selection.head);
    if (!call || call.open === dismissed || !/^[\w.]+$/.test(call.callee)) return { tooltip: null, dismissed };
    const name = index.resolve(call.callee, state.doc.toString());
    if (!name?.entry.s) return { tooltip: null, dismissed };
    // Above the call where there is room in the editor, else below it: never over the page's header.
    const tooltip: Tooltip = {
      pos: call.open, above: true, arrow: false, create: () => ({ dom: helpCard(name, "signature-help", call.at) }),
    };
    return { tooltip, dismissed };
  };
  const field = StateField.define<SignatureState>({
    create: (state) => compute(state, null),
    update(value, tr) {
      let dismissed = value.dismissed === null ? null : tr.changes.mapPos(value.dismissed);
      let arrived = false;
      for (const effect of tr.effects) {
        if (effect.is(dismissSignature)) dismissed = effect.value;
        arrived ||= effect.is(indexArrived);
      }
      const changed = tr.docChanged || tr.selection || arrived || dismissed !== value.dismissed;
      return changed ? compute(tr.state, dismissed) : value;
    },
    provide: (f) => showTooltip.from(f, (value) => value.tooltip),
  });
  const escape = keymap.of([{
    key: "Escape",
    run(view) {
      const tooltip = view.state.field(field).tooltip;
      if (!tooltip) return false;
      view.dispatch({ effects: dismissSignature.of(tooltip.pos) });
      return true;
    },
  }]);
  // Typing or moving the cursor is using the editor: the index is fetched then, once.
  const fetcher = ViewPlugin.define((view) => {
    const redraw = () => view.dispatch({ effects: indexArrived.of(null) });
    index.onLoad.push(redraw);
    return {
      update(update: ViewUpdate) {
        if (!index.data && (update.docChanged || update.selectionSet)) void index.ensure();
      },
      destroy() {
        index.onLoad.splice(index.onLoad.indexOf(redraw), 1);
      },
    };
  });
  return [field, escape, fetcher];
}

function hoverDocs(index: ApiIndex): Extension {
  return hoverTooltip(async (view, pos) => {
    const line = view.state.doc.lineAt(pos);
    const text = line.text;
    let start = pos - line.from;
    let end = start;
    while (start > 0 && /[\w.]/.test(text[start - 1])) start -= 1;
    while (end < text.length && /\w/.test(text[end])) end += 1;
    const dotted = text.slice(start, end).replace(/^\.+/, "");
    if (!dotted || !/^[A-Za-z_]/.test(dotted) || inStringOrComment(view.state, pos)) return null;
    if (!index.data) await index.ensure();
    const name = index.resolve(dotted, view.state.doc.toString());
    if (!name) return null;
    return { pos: line.from + start, end: line.from + end, above: true, create: () => ({ dom: helpCard(name, "hover-docs") }) };
  });
}

/** Room beside the list below which the docs go under (or over) the whole list instead. */
const INFO_MIN_WIDTH = 180;
const INFO_MAX_WIDTH = 400;

interface Rect { left: number; right: number; top: number; bottom: number }

/**
 * Where a completion's docs go: beside the list, on the side with room (right first), level with the
 * selected option; without room on either side, under the whole list (or over it when there is more
 * room there), never over its rows. CodeMirror's own choice drops the docs onto the rows below the
 * selected one when the editor is narrow.
 */
export function infoBesideList(view: EditorView, list: Rect, option: Rect, info: Rect, space: Rect):
    { style?: string; class?: string } {
  // Rects are on screen; styles are in the editor's own (possibly CSS-scaled) pixels.
  const scaleY = view.scaleY || 1;
  const scaleX = view.scaleX || 1;
  const height = info.bottom - info.top;
  const spaceLeft = list.left - space.left;
  const spaceRight = space.right - list.right;
  if (Math.max(spaceLeft, spaceRight) >= INFO_MIN_WIDTH) {
    const left = spaceRight < INFO_MIN_WIDTH;
    const width = Math.min(INFO_MAX_WIDTH, left ? spaceLeft : spaceRight);
    const top = Math.max(space.top, Math.min(option.top, space.bottom - height)) - list.top;
    return { style: `top: ${top / scaleY}px; max-width: ${width / scaleX}px`, class: `cm-completionInfo-${left ? "left" : "right"}` };
  }
  const width = Math.min(INFO_MAX_WIDTH, space.right - list.left - 8);
  const below = space.bottom - list.bottom >= Math.min(height, list.top - space.top);
  const edge = (list.bottom - list.top) / scaleY;
  return {
    style: `${below ? "top" : "bottom"}: ${edge}px; max-width: ${width / scaleX}px`,
    class: below ? "cm-completionInfo-below" : "cm-completionInfo-above",
  };
}

/** The editor extensions; they read `index` as it loads, so they can be mounted before it has. */
export function apiHelp(index: ApiIndex): Extension[] {
  return [
    pythonLanguage.data.of({ autocomplete: completionSource(index) }),
    autocompletion({ positionInfo: infoBesideList }),
    ...signatureField(index),
    hoverDocs(index),
    // Tooltips stay inside the editor's own area, so none covers the header's buttons.
    tooltips({ tooltipSpace: (view) => view.scrollDOM.getBoundingClientRect() }),
    EditorView.baseTheme({
      ".cm-tooltip:has(> .api-help)": { border: "none", background: "transparent" },
      ".cm-completionInfo.cm-completionInfo-below, .cm-completionInfo.cm-completionInfo-above": { left: "0" },
    }),
  ];
}
