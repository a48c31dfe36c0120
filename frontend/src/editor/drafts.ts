/**
 * Unsaved edits, kept per page in localStorage so a reload (or the back
 * button, which reloads the page it goes back to) never loses them: one draft
 * for the blank editor at `/`, one per shared snippet at `/s/{id}`. A draft
 * equal to the snippet's shared code is no draft and is removed.
 */

const BLANK_KEY = "jaxplay.draft";
const SNIPPET_PREFIX = "jaxplay.draft.s.";
const SAVE_DELAY_MS = 400;

function keyFor(snippetId: string | null): string {
  return snippetId ? SNIPPET_PREFIX + snippetId : BLANK_KEY;
}

export class Drafts {
  private timer: number | null = null;
  private pending: (() => void) | null = null;

  constructor() {
    // A reload within the save delay must not drop the last keystrokes.
    window.addEventListener("pagehide", () => this.flush());
  }

  /** The kept edits of this page, or null when there are none (or they equal `shared`). */
  load(snippetId: string | null, shared: string | null): string | null {
    const draft = localStorage.getItem(keyFor(snippetId));
    return draft !== null && draft !== shared ? draft : null;
  }

  /** Saves `code` for this page shortly (edits come in bursts); `shared` is the snippet's code, if any. */
  save(snippetId: string | null, code: string, shared: string | null): void {
    if (this.timer !== null) window.clearTimeout(this.timer);
    this.pending = () => {
      const key = keyFor(snippetId);
      if (shared !== null && code === shared) localStorage.removeItem(key);
      else localStorage.setItem(key, code);
    };
    this.timer = window.setTimeout(() => this.flush(), SAVE_DELAY_MS);
  }

  /** Drops a page's draft: its edits now live on as another snippet. */
  forget(snippetId: string | null): void {
    if (this.timer !== null) window.clearTimeout(this.timer);
    this.timer = null;
    this.pending = null;
    localStorage.removeItem(keyFor(snippetId));
  }

  flush(): void {
    if (this.timer !== null) window.clearTimeout(this.timer);
    this.timer = null;
    const write = this.pending;
    this.pending = null;
    write?.();
  }
}
