// Numbers as the panels print them: bytes, counts, times, rates, shares, array indexes.
import { describe, expect, it } from "vitest";
import { formatDuration } from "../src/core/dom";
import { formatBytes, formatCount, formatMs } from "../src/ir/inspect_format";
import { formatFraction, formatRate } from "../src/performance/perf_types";
import { blockShape, formatBytes as shardBytes, formatIndex } from "../src/sharding/sharding_draw";

describe("Inspect's units", () => {
  it("prints bytes in binary units with three digits, and plain bytes below 1 KiB", () => {
    expect(formatBytes(512)).toBe("512 B");
    expect(formatBytes(1536)).toBe("1.50 KiB");
    expect(formatBytes(3 * 1024 ** 2)).toBe("3.00 MiB");
    expect(formatBytes(5 * 1024 ** 5)).toBe("5.12e+3 TiB"); // 5 PiB: TiB is the largest unit
  });

  it("prints a dash for what was not measured", () => {
    for (const missing of [null, undefined, Number.NaN, Number.POSITIVE_INFINITY]) {
      expect(formatBytes(missing)).toBe("—");
      expect(formatCount(missing)).toBe("—");
      expect(formatMs(missing)).toBe("—");
    }
  });

  it("prints counts with an SI prefix that a unit follows", () => {
    expect(formatCount(33619968)).toBe("33.6 M");
    expect(formatCount(1500)).toBe("1.50 k");
    expect(formatCount(999)).toBe("999 ");
    expect(formatCount(0.5)).toBe("0.500 ");
    expect(formatCount(2.5e12)).toBe("2.50 T");
  });

  it("prints times at timer resolution, switching unit before a rounded value would need four digits", () => {
    expect(formatMs(0.0005)).toBe("500 ns");
    expect(formatMs(0.0142)).toBe("14.2 µs");
    expect(formatMs(3.61)).toBe("3.61 ms");
    expect(formatMs(0.9997)).toBe("1.00 ms");
    expect(formatMs(999.7)).toBe("1.00 s");
    expect(formatMs(1200)).toBe("1.20 s");
  });
});

describe("run durations", () => {
  it("reads ms, then seconds with shrinking precision, then minutes", () => {
    expect(formatDuration(120)).toBe("120 ms");
    expect(formatDuration(1234)).toBe("1.23 s");
    expect(formatDuration(12345)).toBe("12.3 s");
    expect(formatDuration(125_000)).toBe("2 min 05 s");
  });
});

describe("roofline figures", () => {
  it("prints rates with SI prefixes as peaks are written", () => {
    expect(formatRate(1.23e9, "FLOP/s")).toBe("1.23 GFLOP/s");
    expect(formatRate(45.6e9, "B/s")).toBe("45.6 GB/s");
    expect(formatRate(12, "FLOP/s")).toBe("12.0 FLOP/s");
    expect(formatRate(null, "B/s")).toBe("—");
  });

  it("prints a share of the roof with the digits that matter", () => {
    expect(formatFraction(0.5)).toBe("50%");
    expect(formatFraction(0.0123)).toBe("1.2%");
    expect(formatFraction(0.00123)).toBe("0.12%");
    expect(formatFraction(Number.NaN)).toBe("—");
  });
});

describe("sharding labels", () => {
  it("prints a shard's bytes with one decimal below 10 and a question mark when unknown", () => {
    expect(shardBytes(12)).toBe("12 B");
    expect(shardBytes(1536)).toBe("1.5 KiB");
    expect(shardBytes(20 * 1024)).toBe("20 KiB");
    expect(shardBytes(null)).toBe("?");
  });

  it("writes an index in NumPy's slice notation and a block's shape as a tuple", () => {
    expect(formatIndex([[0, 4], [2, 4]])).toBe("[0:4, 2:4]");
    expect(formatIndex([])).toBe("[] (a scalar)");
    expect(blockShape([[0, 4], [2, 4]])).toBe("(4, 2)");
    expect(blockShape([[3, 6]])).toBe("(3,)");
  });
});
