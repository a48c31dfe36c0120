/**
 * Export: the code in the editor as a `.py` file, or as a one-cell Jupyter
 * notebook (`.ipynb`, nbformat 4.5). Built in the page, so it works for code
 * that was never shared and needs no server round trip.
 */

export interface NotebookCell {
  cell_type: "code";
  id: string;
  metadata: Record<string, unknown>;
  execution_count: null;
  outputs: never[];
  source: string[];
}

export interface Notebook {
  nbformat: 4;
  nbformat_minor: 5;
  metadata: Record<string, unknown>;
  cells: NotebookCell[];
}

/** Jupyter keeps a cell's source as lines, each with its newline except the last. */
export function sourceLines(code: string): string[] {
  const text = code.replace(/\n+$/, "");
  return text ? text.split(/(?<=\n)/) : [];
}

export function notebookFor(code: string): Notebook {
  return {
    nbformat: 4,
    nbformat_minor: 5,
    metadata: {
      kernelspec: { name: "python3", display_name: "Python 3", language: "python" },
      language_info: { name: "python", file_extension: ".py", mimetype: "text/x-python" },
    },
    cells: [
      { cell_type: "code", id: "jax-playground", metadata: {}, execution_count: null, outputs: [], source: sourceLines(code) },
    ],
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
  download(`${baseName}.py`, code.endsWith("\n") ? code : `${code}\n`, "text/x-python");
}

export function downloadNotebook(code: string, baseName: string): void {
  download(`${baseName}.ipynb`, `${JSON.stringify(notebookFor(code), null, 1)}\n`, "application/x-ipynb+json");
}
