/**
 * The API index's text as a person reads it: docstrings' Sphinx markup
 * (":func:`jax.numpy.absolute`", "``fun``") drawn as code, and signatures
 * made compact (`Union[A, B, NoneType]` as `A | B | None`, module paths
 * dropped from type names) and split into parameters, so signature help can
 * mark the one the cursor is at.
 */

import { el } from "../core/dom";

/** ":func:`~jax.numpy.sum`", ":py:class:`Array <jax.Array>`", "``code``". */
const MARKUP = /:(?:[\w]+:)?[\w]+:`(~?)([^`<]*?)(?:\s*<([^>`]+)>)?`|``([^`]+)``/g;

/** A docstring line with its markup drawn: roles and literals as code, the rest as text. */
export function docNodes(text: string): (string | HTMLElement)[] {
  const parts: (string | HTMLElement)[] = [];
  let last = 0;
  for (const match of text.matchAll(MARKUP)) {
    parts.push(text.slice(last, match.index));
    const [, tilde, target, , literal] = match;
    const shown = literal ?? (tilde ? target.split(".").pop() ?? target : target);
    parts.push(el("code", { class: "api-help-code" }, shown.trim()));
    last = match.index + match[0].length;
  }
  parts.push(text.slice(last));
  return parts.filter((part) => part !== "");
}

/** Splits at commas outside brackets and quotes. */
function splitTopLevel(text: string): string[] {
  const parts: string[] = [];
  let depth = 0;
  let quote: string | null = null;
  let start = 0;
  for (let i = 0; i < text.length; i++) {
    const c = text[i];
    if (quote) {
      if (c === quote && text[i - 1] !== "\\") quote = null;
    } else if (c === "'" || c === '"') {
      quote = c;
    } else if ("([{<".includes(c)) {
      depth++;
    } else if (")]}>".includes(c)) {
      depth--;
    } else if (c === "," && depth === 0) {
      parts.push(text.slice(start, i));
      start = i + 1;
    }
  }
  parts.push(text.slice(start));
  return parts.map((p) => p.trim()).filter(Boolean);
}

/** The text inside the brackets that open at `open` (a `[`), and where they close. */
function bracketed(text: string, open: number): [string, number] | null {
  let depth = 0;
  for (let i = open; i < text.length; i++) {
    if (text[i] === "[") depth++;
    else if (text[i] === "]" && --depth === 0) return [text.slice(open + 1, i), i];
  }
  return null;
}

const MAX_UNION_MEMBERS = 4;

/** `Union[...]` and `Optional[...]` written as `|`, at most a few members (then `…`). */
function compactUnions(text: string): string {
  let out = "";
  let i = 0;
  while (i < text.length) {
    const rest = text.slice(i);
    const head = /^(?:typing\.)?(Union|Optional)\[/.exec(rest);
    if (head && (i === 0 || !/[\w.]/.test(text[i - 1]))) {
      const inner = bracketed(text, i + head[0].length - 1);
      if (inner) {
        let members = splitTopLevel(inner[0]).map(compactUnions);
        if (head[1] === "Optional") members.push("None");
        members = [...new Set(members)];
        const shown = members.length > MAX_UNION_MEMBERS ? [...members.slice(0, MAX_UNION_MEMBERS - 1), "…"] : members;
        out += shown.join(" | ");
        i = inner[1] + 1;
        continue;
      }
    }
    out += text[i];
    i++;
  }
  return out;
}

/** A signature as a person reads it: short type names, unions with `|`, no object addresses. */
export function compactSignature(signature: string): string {
  return compactUnions(signature)
    .replace(/\b(?:[a-z_][\w]*\.)+([A-Za-z_]\w*)/g, (whole, name: string) =>
      // Module paths go (jax._src.typing.SupportsDType -> SupportsDType); a value like jnp.float32 stays.
      /^[A-Z]/.test(name) || whole.includes("._") ? name : whole)
    .replace(/\bNoneType\b/g, "None")
    .replace(/<object object at 0x[0-9a-f]+>/g, "…")
    .replace(/<function (\w+) at 0x[0-9a-f]+>/g, "$1");
}

export interface SignatureParam {
  text: string;
  /** The parameter's name ("axis", "args" for `*args`), or null for the `/` and `*` markers. */
  name: string | null;
  kind: "positional" | "keyword" | "varargs" | "varkw" | "marker";
}

/** "(a, /, b=1, *args, c, **kw) -> T" split into its parameters, and what follows the list. */
export function signatureParams(signature: string): { params: SignatureParam[]; tail: string } {
  let depth = 0;
  let close = -1;
  for (let i = 0; i < signature.length; i++) {
    if ("([{".includes(signature[i])) depth++;
    else if (")]}".includes(signature[i]) && --depth === 0) {
      close = i;
      break;
    }
  }
  const inner = signature.startsWith("(") && close > 0 ? signature.slice(1, close) : signature.replace(/^\(/, "");
  const tail = close > 0 ? signature.slice(close + 1) : "";
  let keywordOnly = false;
  const params = splitTopLevel(inner).map((text): SignatureParam => {
    if (text === "/") return { text, name: null, kind: "marker" };
    if (text === "*") {
      keywordOnly = true;
      return { text, name: null, kind: "marker" };
    }
    const name = /^\**(\w+)/.exec(text)?.[1] ?? null;
    if (text.startsWith("**")) return { text, name, kind: "varkw" };
    if (text.startsWith("*")) {
      keywordOnly = true;
      return { text, name, kind: "varargs" };
    }
    return { text, name, kind: keywordOnly ? "keyword" : "positional" };
  });
  return { params, tail };
}

/** Which parameter the argument at `index` (0-based), or the keyword `keyword`, fills; -1 for none. */
export function activeParam(params: SignatureParam[], index: number, keyword: string | null): number {
  if (keyword !== null) {
    const named = params.findIndex((p) => p.name === keyword && p.kind !== "varargs");
    if (named >= 0) return named;
    return params.findIndex((p) => p.kind === "varkw");
  }
  let positional = 0;
  for (let i = 0; i < params.length; i++) {
    const param = params[i];
    if (param.kind === "varargs") return i;
    if (param.kind !== "positional") continue;
    if (positional === index) return i;
    positional++;
  }
  return -1;
}
