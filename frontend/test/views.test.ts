// The views' logic: sharding layout math, rooflines, call statistics, IR line maps, Compare's diff.
import { describe, expect, it } from "vitest";
import { differenceCount, differingLines, recordedWhen } from "../src/compare/compare_columns";
import { callStats } from "../src/inspect/inspect_calls";
import { foldHloMetadata, hloMetadataLines } from "../src/ir/hlo";
import type { FunctionTiming } from "../src/ir/inspect_types";
import { sourceLineAt } from "../src/ir/inspect_view";
import { memorySum } from "../src/ir/inspect_format";
import { passDelta, passTitle } from "../src/passes/passes";
import { eqnCountsOf, type RooflineRow } from "../src/performance/perf_types";
import { howMeasured, verdictText } from "../src/performance/roofline";
import { blocksInView, defaultDims, isEmptyShard, rangesAlong } from "../src/sharding/sharding_grid";
import type { ArrayLayout, ShardInfo } from "../src/sharding/sharding_types";
import type { CompiledEvent } from "../src/ir/inspect_types";

function layout(shape: number[], shards: Omit<ShardInfo, "bytes">[]): ArrayLayout {
  return {
    shape, dtype: "float32", sharding_type: "NamedSharding", spec: "P()", mesh: null,
    devices: shards.map((s) => s.device), device_kind: "cpu", platform: "cpu", memory_kind: null, bytes: null,
    uneven: false, shards: shards.map((s) => ({ ...s, bytes: 16 })),
  };
}

describe("sharding layout", () => {
  // An (8, 4) array on 4 devices: rows split in two, each half on two devices (replicas 0 and 1).
  const rowsOnTwo = layout([8, 4], [
    { device: 0, index: [[0, 4], [0, 4]], replica: 0 },
    { device: 1, index: [[0, 4], [0, 4]], replica: 1 },
    { device: 2, index: [[4, 8], [0, 4]], replica: 0 },
    { device: 3, index: [[4, 8], [0, 4]], replica: 1 },
  ]);

  it("groups the shards covering one region into a block, copies ordered by replica", () => {
    const blocks = blocksInView(rowsOnTwo, 0, 1, new Map());
    expect(blocks.map((b) => [b.row, b.col, b.shards.map((s) => s.device)])).toEqual([
      [[0, 4], [0, 4], [0, 1]],
      [[4, 8], [0, 4], [2, 3]],
    ]);
  });

  it("draws a 1-D array as one row and a scalar as one cell", () => {
    expect(defaultDims(layout([16], [{ device: 0, index: [[0, 16]], replica: 0 }]))).toEqual([-1, 0]);
    expect(defaultDims(layout([], [{ device: 0, index: [], replica: 0 }]))).toEqual([-1, -1]);
    expect(defaultDims(rowsOnTwo)).toEqual([0, 1]);
  });

  it("picks the two most split dimensions of a 3-D array, later ones winning ties", () => {
    const split = (d0: [number, number], d2: [number, number], device: number): Omit<ShardInfo, "bytes"> =>
      ({ device, index: [d0, [0, 3], d2], replica: 0 });
    const cube = layout([4, 3, 4], [split([0, 2], [0, 2], 0), split([0, 2], [2, 4], 1), split([2, 4], [0, 2], 2),
      split([2, 4], [2, 4], 3)]);
    expect(defaultDims(cube)).toEqual([0, 2]);
  });

  it("keeps, for a hidden dimension, the shards that overlap the chosen range", () => {
    const hidden = new Map<number, [number, number]>([[0, [4, 8]]]);
    const blocks = blocksInView(rowsOnTwo, -1, 1, hidden);
    expect(blocks).toHaveLength(1);
    expect(blocks[0].shards.map((s) => s.device)).toEqual([2, 3]);
    expect(rangesAlong(rowsOnTwo, 0)).toEqual([[0, 4], [4, 8]]);
  });

  it("treats a shard XLA gave no elements as empty and leaves it out", () => {
    const uneven = layout([3], [
      { device: 0, index: [[0, 2]], replica: 0 },
      { device: 1, index: [[2, 3]], replica: 0 },
      { device: 2, index: [[3, 3]], replica: 0 },
    ]);
    expect(isEmptyShard(uneven.shards[2])).toBe(true);
    expect(isEmptyShard(uneven.shards[0])).toBe(false);
    expect(rangesAlong(uneven, 0)).toEqual([[0, 2], [2, 3]]);
    expect(blocksInView(uneven, -1, 0, new Map()).flatMap((b) => b.shards.map((s) => s.device))).toEqual([0, 1]);
  });
});

describe("roofline verdicts", () => {
  const row: RooflineRow = {
    key: "1.1", fn_id: 1, fn: "f", line: 3, compile_index: 1, flops: 2e6, bytes: 1e6, timed_calls: 5, median_ms: 0.5,
    intensity: 2, achieved_flops_per_s: 4e9, achieved_bytes_per_s: 2e9, roof_flops_per_s: 20e9, bound: "memory",
    fraction_of_roof: 0.2,
  };

  it("names the roof that bounds a function and how close it came", () => {
    expect(verdictText(row)).toBe("Memory-bound: 20% of the memory roof (bandwidth × intensity). It reached " +
      "4.00 GFLOP/s and 2.00 GB/s at 2.00 FLOP/byte, where the roof is 20.0 GFLOP/s.");
  });

  it("says a function far below both roofs spends its time on fixed costs", () => {
    expect(verdictText({ ...row, bound: "compute", fraction_of_roof: 0.001 }))
      .toMatch(/^Compute-bound: 0\.10% of the compute roof .* its time is mostly fixed costs/);
  });

  it("explains each row it cannot place", () => {
    expect(verdictText({ ...row, intensity: null })).toMatch(/^No roofline: XLA's cost analysis reported no bytes/);
    expect(verdictText({ ...row, median_ms: null })).toMatch(/^Not timed/);
    expect(verdictText({ ...row, bound: null })).toMatch(/the device's peak is not measured on this worker/);
  });

  it("says how the figures were measured", () => {
    const text = howMeasured({ ...row, timed_calls: 1 }, { flops_per_s: 1e11, bytes_per_s: 2e10, how: "a matmul",
      measured_at: "2026-11-20T10:00:00Z" });
    expect(text).toContain("2.00 MFLOP and 1.00 MB accessed per call");
    expect(text).toContain("median of 1 call (500 µs)");
    expect(text).toContain("Roofs: 100 GFLOP/s and 20.0 GB/s, measured by the worker on 2026-11-20: a matmul.");
    expect(howMeasured(null, null)).toBe("");
  });

  it("reads equation counts only when the capture sent a table of lines", () => {
    const counts = { total: 3, lines: [], other_lines: 0, other_count: 0 };
    expect(eqnCountsOf({ eqn_counts: counts } as unknown as CompiledEvent)).toBe(counts);
    expect(eqnCountsOf({ eqn_counts: { total: 3 } } as unknown as CompiledEvent)).toBeNull();
    expect(eqnCountsOf({} as CompiledEvent)).toBeNull();
  });
});

describe("Inspect's call statistics", () => {
  const timing = (calls: number, compiled: number, extra: Partial<FunctionTiming> = {}): FunctionTiming => ({
    fn_id: 1, fn: "f", line: 1, calls, total_ms: 0.5, median_ms: 0.25, min_ms: 0.2, max_ms: 0.3, first_call_ms: 9,
    traced_calls: 0, compile_calls: compiled, sampled_calls: calls - compiled, ...extra,
  });

  it("splits calls into compiled and cached, timing the cached ones", () => {
    expect(callStats(timing(4, 1)).text).toBe("4 calls (1 compiled, 3 cached) · median 250 µs, total 500 µs of the cached calls");
    expect(callStats(timing(3, 0)).text).toBe("3 calls, all cached · median 250 µs, total 500 µs");
    expect(callStats(timing(1, 1)).text).toBe("1 call, which compiled: timed below");
  });

  it("says when only the first cached calls were timed, and counts calls inside transformations", () => {
    expect(callStats(timing(102, 2, { sampled_calls: 50 })).text)
      .toBe("102 calls (2 compiled, 100 cached) · median 250 µs, total 500 µs of the first 50 cached calls");
    expect(callStats(timing(0, 0, { traced_calls: 2 })).text).toBe("2 calls inside transformations");
  });
});

describe("IR line maps", () => {
  it("finds the source line of an IR line among sorted ranges", () => {
    const ranges: [number, number, number][] = [[1, 2, 10], [4, 4, 11], [7, 9, 12]];
    expect(sourceLineAt(ranges, 1)).toBe(10);
    expect(sourceLineAt(ranges, 4)).toBe(11);
    expect(sourceLineAt(ranges, 8)).toBe(12);
    expect(sourceLineAt(ranges, 3)).toBeNull();
    expect(sourceLineAt([], 1)).toBeNull();
  });

  it("finds the debug tables before an HLO module's computations, to fold them", () => {
    const hlo = "HloModule jit_f\n\nFileNames\n1 \"a.py\"\n2 \"b.py\"\n\nFunctionNames\n1 \"f\"\n\nENTRY main {\n}";
    expect(hloMetadataLines(hlo)).toEqual([3, 8]);
    expect(hloMetadataLines("HloModule jit_f\nENTRY main {\n}")).toBeNull();
  });
});

describe("Compare's output diff", () => {
  it("marks the lines that differ from the first version's, including lines it lacks", () => {
    expect(differingLines("a\nb\nc", "a\nB\nc\nd")).toEqual([false, true, false, true]);
    expect(differingLines("same", "same")).toEqual([false]);
  });

  it("counts the differing lines in words, singular or plural", () => {
    expect(differenceCount(0)).toBe("same output");
    expect(differenceCount(1)).toBe("1 line differs");
    expect(differenceCount(3)).toBe("3 lines differ");
  });

  it("says when a cached run was recorded: the time today, the day before that", () => {
    const now = new Date(2026, 10, 27, 15, 0, 0);
    expect(recordedWhen(new Date(2026, 10, 27, 14, 2, 9).toISOString(), now)).toMatch(/02.09/);  // 14:02:09 or 02:02:09 PM
    expect(recordedWhen(new Date(2026, 10, 12, 9, 30).toISOString(), now)).toMatch(/12/);
    expect(recordedWhen("not a time", now)).toBe("earlier");
  });
});

describe("HLO diffs across versions", () => {
  it("compare the program, with the debug-info tables folded into one line that counts them", () => {
    const newer = "HloModule jit_f\n\nFileNames\n1 \"/a/b.py\"\n2 \"/c.py\"\n\nStackFrames\n1 1 0\n\nENTRY main {\n  ROOT x = f32[] constant(1)\n}";
    const older = "HloModule jit_f\n\nFileNames\n1 \"/old.py\"\n\nENTRY main {\n  ROOT x = f32[] constant(1)\n}";
    const a = foldHloMetadata(newer);
    const b = foldHloMetadata(older);
    expect([a.folded, b.folded]).toEqual([6, 2]);
    expect(a.text.split("\n").slice(2)).toEqual([
      "// 6 lines of XLA's file and stack-frame tables (folded)", "", "ENTRY main {", "  ROOT x = f32[] constant(1)", "}"]);
    // Only the counting line differs: the program's lines are the same.
    expect(differingLines(a.text, b.text).filter(Boolean)).toHaveLength(1);
    expect(foldHloMetadata("HloModule m\nENTRY e {\n}")).toEqual({ text: "HloModule m\nENTRY e {\n}", folded: 0 });
  });
});

describe("Inspect's memory and XLA's passes", () => {
  it("sums every buffer once: donated outputs live in their inputs' buffers", () => {
    expect(memorySum({ argument_size_in_bytes: 100, output_size_in_bytes: 40, temp_size_in_bytes: 10, alias_size_in_bytes: 40 }))
      .toBe(110);
    expect(memorySum({ argument_size_in_bytes: 100 })).toBeNull();
  });

  it("says what a pass changed: lines added and removed, lines moved, or nothing for an unchanged text", () => {
    const entry = { pipeline: 0, name: "algsimp", changed: true, duration_us: 1, dump: 3 };
    expect(passDelta({ ...entry, added: 3, removed: 1 })).toBe("+3 −1");
    expect(passDelta({ ...entry, added: 0, removed: 0, reordered: 4 })).toBe("↕ 4");
    expect(passDelta({ ...entry, changed: false, added: 0, removed: 0, same_text: true })).toBe("");
    expect(passDelta({ ...entry, dump: null })).toBe("");
    expect(passTitle({ ...entry, added: 0, removed: 0, reordered: 4 }, "simplification")).toContain("moved 4 lines");
    expect(passTitle({ ...entry, changed: false, same_text: true }, "p")).toContain("reads the same");
  });
});
