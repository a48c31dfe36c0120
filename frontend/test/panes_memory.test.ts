// Inspect's side-by-side panes (colours, arrangement in links) and the memory view (chart, readout, OOM hint).
import { describe, expect, it } from "vitest";
import type { LineRange } from "../src/ir/inspect_view";
import { stackedPaths, aliveText } from "../src/memory/memory_chart";
import { aliveAt, type MemoryView } from "../src/memory/memory_types";
import { outOfMemoryHint } from "../src/memory/oom_hint";
import { initialPanes, parsePanes, withPanes } from "../src/panes/pane_layout";
import { BAND_COUNT, bandsOf, firstLinesBySource, firstRangeFrom, sourceRanges } from "../src/panes/source_bands";
import type { ErrorEvent } from "../src/wire/protocol";

describe("source colours", () => {
  const jaxpr: LineRange[] = [[3, 4, 7], [5, 5, 8], [9, 12, 7]];
  const hlo: LineRange[] = [[40, 40, 11], [41, 43, 8]];

  it("gives each source line any text points at a colour, neighbours different, cycling the palette", () => {
    const bands = bandsOf([jaxpr, hlo]);
    expect([...bands]).toEqual([[7, 0], [8, 1], [11, 2]]);
    const many = bandsOf([Array.from({ length: 25 }, (_, i): LineRange => [i + 1, i + 1, i + 1])]);
    expect(many.get(1)).toBe(0);
    expect(many.get(BAND_COUNT + 1)).toBe(0);
    expect(new Set(many.values()).size).toBe(BAND_COUNT);
    expect(sourceRanges(bands)).toEqual([[7, 7, 7], [8, 8, 8], [11, 11, 11]]);
  });

  it("finds the first range on screen by binary search, and where each source line's text starts", () => {
    expect(firstRangeFrom(jaxpr, 1)).toBe(0);
    expect(firstRangeFrom(jaxpr, 5)).toBe(1);
    expect(firstRangeFrom(jaxpr, 6)).toBe(2);
    expect(firstRangeFrom(jaxpr, 13)).toBe(3);
    expect([...firstLinesBySource(jaxpr)]).toEqual([[7, [3, 9]], [8, [5]]]);
  });
});

describe("the panes a link carries", () => {
  it("reads known kinds once each, three at most, and ignores the rest", () => {
    expect(parsePanes("source,jaxpr,hlo")).toEqual(["source", "jaxpr", "hlo"]);
    expect(parsePanes("hlo, hlo,bogus,stablehlo,jaxpr,source")).toEqual(["hlo", "stablehlo", "jaxpr"]);
    expect(parsePanes("nothing")).toBeNull();
    expect(parsePanes(["jaxpr", 3])).toEqual(["jaxpr"]);
  });

  it("prefers the address to the snippet's settings, and writes the address back readably", () => {
    const settings = { inspect: true, view: { panes: ["stablehlo", "hlo"] } };
    expect(initialPanes("?view=inspect&panes=source,hlo", settings)).toEqual(["source", "hlo"]);
    expect(initialPanes("?view=inspect", settings)).toEqual(["stablehlo", "hlo"]);
    expect(initialPanes("", { inspect: true })).toBeNull();
    expect(withPanes("http://h/e/abc?view=inspect", ["source", "jaxpr"])).toBe("http://h/e/abc?view=inspect&panes=source,jaxpr");
    expect(withPanes("http://h/s/abc?panes=source", null)).toBe("http://h/s/abc");
  });
});

const VIEW: MemoryView = {
  positions: 4,
  totals: { argument: 16, output: 24, alias: 0, temp: 32, constant: 0, thread_local: 4 },
  peak: { bytes: 64, position: 3, by_kind: { argument: 16, aliased: 0, output: 16, temp: 32 }, instruction: 0 },
  at_peak: [],
  at_peak_others: null,
  steps: [[0, 16, 0, 0, 0], [1, 16, 0, 0, 16], [2, 16, 0, 0, 32], [3, 16, 0, 16, 32]],
  steps_binned: false,
  schedule: [1, 2, 3, 0],
  instructions: [["out", "add", "main", 7, 4], ["p0", "parameter", "main", 3, null], ["exp", "exponential", "main", 4, 2],
    ["neg", "negate", "main", 5, 3]],
};

describe("the memory chart", () => {
  it("stacks the kinds step by step, each a closed band over the one below", () => {
    const [argument, aliased, output, temp] = stackedPaths(VIEW, 400, 100);
    // Arguments: 16 of the 64 at the top of the scale, from position 0 to the end, down to 0.
    expect(argument).toBe("M0.00,76.00L100.00,76.00L100.00,76.00L200.00,76.00L200.00,76.00L300.00,76.00L300.00,76.00" +
      "L400.00,76.00L400.00,100.00L300.00,100.00L300.00,100.00L200.00,100.00L200.00,100.00L100.00,100.00L100.00,100.00L0.00,100.00Z");
    expect(aliased).toContain("M0.00,76.00");
    expect(temp.startsWith("M0.00,76.00L100.00,76.00L100.00,52.00")).toBe(true);
    expect(output).toContain("300.00,52.00");
    expect(temp).toContain("300.00,4.00"); // the peak reaches the top
  });

  it("says what is alive at a position, by kind", () => {
    expect(aliveAt(VIEW, 2)).toEqual([16, 0, 0, 32]);
    expect(aliveAt(VIEW, 9)).toEqual([16, 0, 16, 32]);
    expect(aliveText(VIEW, 1)).toBe("32 B alive: arguments 16 B, temporaries 16 B");
  });
});

describe("the out-of-memory hint", () => {
  const error: ErrorEvent = { type: "error", id: "r", ename: "MemoryError", message: "…", line: 14, traceback: "" };

  it("names the function and its peak, and opens its memory view", () => {
    const hint = outOfMemoryHint({ ...error, out_of_memory: { fn: "outer", line: 8, phase: "execute", key: "1.2", peak_bytes: 2 ** 40, instruction: "fusion.3" } });
    expect(hint?.textContent).toContain("outer (line 8) ran out of memory: its peak is 1.00 TiB, at fusion.3.");
    let asked: unknown = null;
    window.addEventListener("jaxplay:show-compiled", (e) => (asked = (e as CustomEvent).detail), { once: true });
    hint?.querySelector("button")?.click();
    expect(asked).toEqual({ key: "1.2", view: "memory" });
  });

  it("says when XLA ran out compiling, and stays away from other errors", () => {
    const hint = outOfMemoryHint({ ...error, out_of_memory: { fn: "f", line: null, phase: "compile", key: null, peak_bytes: null, instruction: null } });
    expect(hint?.textContent).toBe("XLA ran out of memory compiling f.");
    expect(hint?.querySelector("button")).toBeNull();
    expect(outOfMemoryHint(error)).toBeNull();
  });
});
