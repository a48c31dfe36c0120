/**
 * What Inspect says about a jitted function's calls, and which calls its
 * times are of. A call that compiled (traced, lowered and compiled, or loaded
 * its executable from the persistent cache) is timed in its compilation's
 * row, phase by phase; the median and total here are of the other calls, the
 * ones that ran the executable JAX already had.
 */

import { formatMs } from "../ir/inspect_format";
import type { FunctionTiming } from "../ir/inspect_types";

const TITLE =
  "Counted: calls with concrete arguments, from your code (calls inside grad, vmap or an outer jit run as part " +
  "of that computation). A call that compiled, or loaded its executable from the persistent compile cache, is " +
  "timed in its compilation's row below (trace, lower, compile, execute). The median and total are of the " +
  "cached calls: those that ran an executable JAX already had, each timed from dispatch until its result was ready.";

function plural(count: number, word: string): string {
  return `${count.toLocaleString()} ${word}${count === 1 ? "" : "s"}`;
}

/** "4 calls (3 compiled, 1 cached) · cached calls: median 237 µs, total 237 µs" and the why, as a tooltip. */
export function callStats(timing: FunctionTiming): { text: string; title: string } {
  const parts: string[] = [];
  const compiled = Math.min(timing.compile_calls, timing.calls);
  const cached = timing.calls - compiled;
  if (timing.calls) {
    if (cached === 0) {
      parts.push(`${timing.calls === 1 ? "1 call, which" : `${plural(timing.calls, "call")}, each`} compiled: timed below`);
    } else if (compiled === 0) {
      parts.push(`${plural(timing.calls, "call")}, all cached`);
    } else {
      parts.push(`${plural(timing.calls, "call")} (${compiled} compiled, ${cached} cached)`);
    }
    if (cached > 0) {
      const timed = timing.sampled_calls;
      const of = timed < cached ? ` of the first ${plural(timed, "cached call")}` : compiled ? " of the cached calls" : "";
      parts.push(
        timing.median_ms !== null
          ? `median ${formatMs(timing.median_ms)}, total ${formatMs(timing.total_ms)}${of}`
          : "cached calls still running",
      );
    }
  }
  if (timing.traced_calls) parts.push(`${plural(timing.traced_calls, "call")} inside transformations`);
  return { text: parts.join(" · "), title: TITLE };
}
