/**
 * Which panes Inspect shows side by side, and how a link carries that: `?panes=source,jaxpr,hlo` in the
 * address (kept up to date as the panes change, so a copied address opens on them; an embed
 * `/e/<id>?view=inspect&panes=...` opens on them too) and `settings.view.panes` in a shared link's
 * snippet (the page's Share stores it beside the run's settings).
 */

export const PANE_KINDS = ["source", "jaxpr", "stablehlo", "hlo"] as const;
export type PaneKind = (typeof PANE_KINDS)[number];

export const PANE_TITLES: Record<PaneKind, string> = {
  source: "Source",
  jaxpr: "jaxpr",
  stablehlo: "StableHLO",
  hlo: "Optimized HLO",
};

/** At most three at once: more would leave each too narrow to read on any screen. */
export const MAX_PANES = 3;
export const DEFAULT_PANES: readonly PaneKind[] = ["source", "jaxpr", "hlo"];
export const PANES_PARAM = "panes";

function isPaneKind(value: unknown): value is PaneKind {
  return typeof value === "string" && (PANE_KINDS as readonly string[]).includes(value);
}

/** An arrangement from a link: known kinds, each once, at most `MAX_PANES`; null when it names none. */
export function parsePanes(value: unknown): PaneKind[] | null {
  const items = typeof value === "string" ? value.split(",").map((s) => s.trim()) : Array.isArray(value) ? value : [];
  const kinds: PaneKind[] = [];
  for (const item of items) {
    if (isPaneKind(item) && !kinds.includes(item) && kinds.length < MAX_PANES) kinds.push(item);
  }
  return kinds.length ? kinds : null;
}

export function formatPanes(kinds: readonly PaneKind[]): string {
  return kinds.join(",");
}

/** The arrangement a page opens on: the address's `panes`, else the shared snippet's; null: none. */
export function initialPanes(search: string, settings: unknown): PaneKind[] | null {
  const fromAddress = new URLSearchParams(search).get(PANES_PARAM);
  if (fromAddress !== null) return parsePanes(fromAddress);
  const view = (settings as { view?: { panes?: unknown } } | undefined)?.view;
  return parsePanes(view?.panes);
}

/** `href` with `panes` set to the arrangement (or removed for null), everything else kept. */
export function withPanes(href: string, kinds: readonly PaneKind[] | null): string {
  const url = new URL(href);
  if (kinds) url.searchParams.set(PANES_PARAM, formatPanes(kinds));
  else url.searchParams.delete(PANES_PARAM);
  return url.toString().replace(/%2C/gi, ","); // a comma needs no escaping in a query, and reads better
}
