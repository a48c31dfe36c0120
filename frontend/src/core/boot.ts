/**
 * What the server put in the page: `<script id="boot" type="application/json">`
 * rendered by server/pages/templates/page.html. Read once, here, so every page
 * (editor `/`, share `/s/{id}`, embed `/e/{id}`) starts from the same object.
 */

export type PageMode = "editor" | "embed";

/** A stored program a share or embed page opens with. */
export interface BootSnippet {
  id?: string;
  code: string;
  backend?: string | null;
  title?: string | null;
  [field: string]: unknown;
}

export interface Boot {
  mode: PageMode;
  snippet: BootSnippet | null;
  page_title: string;
  [field: string]: unknown;
}

const DEFAULT_BOOT: Boot = { mode: "editor", snippet: null, page_title: "JAX Playground" };

/**
 * `code` as the editor holds it: CodeMirror reads `\r\n` and a lone `\r` as line breaks and gives its text
 * back with `\n`. A link's code (stored as sent, so its id stays its content's) is read this way once, here,
 * so everything that compares it with the editor's text (the "modified" note, drafts, the recorded run)
 * compares like with like.
 */
export function asEditorText(code: string): string {
  return code.replace(/\r\n?/g, "\n");
}

export function readBoot(doc: Document = document): Boot {
  const node = doc.getElementById("boot");
  if (!node?.textContent) return { ...DEFAULT_BOOT };
  try {
    const raw = JSON.parse(node.textContent) as Partial<Boot>;
    const snippet = raw.snippet && typeof raw.snippet.code === "string"
      ? { ...raw.snippet, code: asEditorText(raw.snippet.code) }
      : null;
    return {
      ...DEFAULT_BOOT,
      ...raw,
      mode: raw.mode === "embed" ? "embed" : "editor",
      snippet,
      page_title: typeof raw.page_title === "string" ? raw.page_title : DEFAULT_BOOT.page_title,
    };
  } catch (err) {
    console.error("jaxplay: the page's boot data is not valid JSON; starting with defaults", err);
    return { ...DEFAULT_BOOT };
  }
}
