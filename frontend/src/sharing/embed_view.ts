/**
 * Which view an embed (`/e/{id}`, `/e/r/{code}`) opens on: `?view=inspect`
 * or `?view=sharding` in its link brings that tab forward (a slide about
 * sharding shows the picture, not the text). Embeds have the results' tabs
 * but the Gallery, which would replace the code the embed is about.
 */

/** The tabs an embed may open on, in the order the Share dialog offers them. */
export const EMBED_VIEWS = [
  ["output", "Output"],
  ["inspect", "Inspect"],
  ["sharding", "Sharding"],
] as const;

export type EmbedView = (typeof EMBED_VIEWS)[number][0];

/** Tabs an embed leaves out. */
export const EMBED_HIDDEN_TABS: readonly string[] = ["gallery"];

export function embedViewFrom(search: string): EmbedView | null {
  const view = new URLSearchParams(search).get("view");
  return EMBED_VIEWS.some(([id]) => id === view) ? (view as EmbedView) : null;
}

/** The embed link that opens on `view` (the plain link for Output, the default). */
export function embedUrlFor(embedUrl: string, view: EmbedView): string {
  if (view === "output") return embedUrl;
  const url = new URL(embedUrl);
  url.searchParams.set("view", view);
  return url.toString();
}
