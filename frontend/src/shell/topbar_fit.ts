/**
 * The header fits its window (or the frame of an embed), whatever it holds.
 *
 * What the header holds depends on the page (a link's origin, a room's
 * controls, an embed's Edit), on the server (the JAX version picker) and on
 * data that arrives later (backend names), so no fixed breakpoint fits them
 * all. Instead the header tries its layouts from the widest down and keeps
 * the first whose first row fits on one line (`data-fit`, styled in
 * layout.css):
 *
 * - "wide": one row, everything with its label and shortcut hint;
 * - "compact": one row; shortcut hints and the "Backend" label go (they stay
 *   in the buttons' titles and names), Libraries reads "Libs";
 * - "rows": compact, with the backend's controls on a second row;
 * - "stacked": the phone layout: the name, Stop and Run on the first row,
 *   everything else below;
 * - "stacked-tight": stacked, with the name shown as its mark alone.
 *
 * It fits again when the window changes size and when anything in the header
 * changes (a MutationObserver: items added, shown, hidden or renamed). The
 * header's bottom edge is published as `--topbar-bottom`, where popovers that
 * span a phone's width hang.
 */

const LEVELS = ["wide", "compact", "rows", "stacked", "stacked-tight"] as const;
export type TopbarFit = (typeof LEVELS)[number];

/** Items with this `order` or more are on later rows by design (layout.css): only the rest must share a line. */
const LATER_ROWS_ORDER = 4;

/** True when the header's first-row items share one line and nothing sticks out sideways. */
function firstRowFits(header: HTMLElement): boolean {
  if (header.scrollWidth > header.clientWidth + 1) return false;
  let low = Infinity;
  let high = -Infinity;
  for (const child of header.children) {
    if (!(child instanceof HTMLElement) || child.getClientRects().length === 0) continue;
    const style = getComputedStyle(child);
    if (style.position === "absolute" || Number(style.order) >= LATER_ROWS_ORDER) continue;
    const box = child.getBoundingClientRect();
    if (box.right > header.getBoundingClientRect().right + 1) return false;
    const middle = box.top + box.height / 2;
    low = Math.min(low, middle);
    high = Math.max(high, middle);
  }
  // Items of one line are centred on it; the next line is at least a button's height lower.
  return high - low < 6;
}

export function fitTopbar(header: HTMLElement): TopbarFit {
  let chosen: TopbarFit = LEVELS[LEVELS.length - 1];
  for (const level of LEVELS) {
    header.dataset.fit = level;
    if (firstRowFits(header)) {
      chosen = level;
      break;
    }
  }
  header.dataset.fit = chosen;
  document.documentElement.style.setProperty("--topbar-bottom", `${Math.round(header.getBoundingClientRect().bottom)}px`);
  return chosen;
}

/** Fits `header` now and whenever the window or the header's content changes. */
export function keepTopbarFitted(header: HTMLElement): void {
  let scheduled = false;
  const refit = () => {
    if (scheduled) return;
    scheduled = true;
    // Microtask: after the change that prompted it, before the page is painted.
    queueMicrotask(() => {
      scheduled = false;
      fitTopbar(header);
    });
  };
  fitTopbar(header);
  window.addEventListener("resize", refit);
  header.addEventListener("change", refit); // a select's new choice may be longer or shorter
  new MutationObserver(refit).observe(header, {
    subtree: true,
    childList: true,
    characterData: true,
    attributes: true,
    attributeFilter: ["hidden", "class", "disabled"],
  });
  void document.fonts?.ready.then(refit);
}
