/**
 * The events the performance views read (docs/protocol.md, "Performance events"), merged into the
 * protocol's EventMap: `profile` (a timeline), `roofline` (each compilation against the device's
 * peak), `passes` (XLA's pass pipeline of one compilation), and the `eqn_counts` field of `compiled`.
 */

import type { DevicePeak } from "../wire/protocol";
import type { CompiledEvent } from "../ir/inspect_types";
import type { LineRange } from "../ir/inspect_view";

/** One source line of a traced function and the jaxpr equations it made. */
export interface EqnCountRow {
  line: number | null;
  count: number;
  /** The most frequent primitives on that line: [name, count]. */
  primitives: [string, number][];
  source: string;
}

export interface EqnCounts {
  total: number;
  lines: EqnCountRow[];
  other_lines: number;
  other_count: number;
}

export function eqnCountsOf(compiled: CompiledEvent): EqnCounts | null {
  const counts = compiled.eqn_counts as EqnCounts | null | undefined;
  return counts && Array.isArray(counts.lines) ? counts : null;
}

export interface RooflineRow {
  key: string;
  fn_id: number;
  fn: string;
  line: number | null;
  compile_index: number;
  flops: number | null;
  bytes: number | null;
  timed_calls: number;
  median_ms: number | null;
  intensity: number | null;
  achieved_flops_per_s: number | null;
  achieved_bytes_per_s: number | null;
  roof_flops_per_s: number | null;
  bound: "compute" | "memory" | null;
  fraction_of_roof: number | null;
}

export interface RooflineEvent {
  type: "roofline";
  id: string;
  peak: DevicePeak | null;
  functions: RooflineRow[];
  left_out?: number;
}

/** [track, depth, start_us, duration_us, name index, kind index, link index or -1]. */
export type TimelineSlice = [number, number, number, number, number, number, number];

export interface ProfileEvent {
  type: "profile";
  id: string;
  label: string;
  line: number | null;
  notices: string[];
  duration_us?: number;
  kinds?: string[];
  tracks?: { name: string; process: string; device: boolean }[];
  names?: string[];
  /** [fn, fn_id, compile key, source line], any of them null. */
  links?: [string | null, number | null, string | null, number | null][];
  slices?: TimelineSlice[];
  summary?: { name: string; kind: string; link: number; count: number; total_us: number }[];
  total_slices?: number;
  min_duration_us?: number;
  trace?: { format: string; bytes: number; filtered: boolean; data: string } | null;
  summarize_ms?: number;
}

export interface PassEntry {
  pipeline: number;
  name: string;
  changed: boolean;
  duration_us: number | null;
  /** Index into `dumps` of the module after this pass (null: no dump). */
  dump: number | null;
  added?: number;
  removed?: number;
  /** Lines standing elsewhere after a pass that only moved lines (`added` and `removed` are 0). */
  reordered?: number;
  /** XLA dumped after it, but the text reads the same as before it: not `changed`. */
  same_text?: boolean;
}

export interface PassDump {
  label: string;
  text?: string | null;
  same_as?: number;
  source_lines?: LineRange[];
}

export interface PassesEvent {
  type: "passes";
  id: string;
  key: string;
  fn: string;
  fn_id?: number;
  line?: number | null;
  signature?: string;
  module?: string;
  error?: string;
  notices?: string[];
  compile_ms?: number;
  profiled_compile_ms?: number;
  dump_bytes?: number;
  dump_files?: number;
  limit_bytes?: number;
  pipelines?: { name: string; duration_us: number | null }[];
  passes?: PassEntry[];
  header?: string;
  dumps?: PassDump[];
}

declare module "../wire/protocol" {
  interface EventMap {
    roofline: RooflineEvent;
    profile: ProfileEvent;
    passes: PassesEvent;
  }
}

/** "1.23 GFLOP/s", "45.6 GB/s": SI prefixes, as peak figures are usually written. */
export function formatRate(value: number | null | undefined, unit: string): string {
  if (value === null || value === undefined || !Number.isFinite(value)) return "—";
  const steps: [number, string][] = [[1e15, "P"], [1e12, "T"], [1e9, "G"], [1e6, "M"], [1e3, "k"]];
  for (const [scale, prefix] of steps) {
    if (Math.abs(value) >= scale) return `${(value / scale).toPrecision(3)} ${prefix}${unit}`;
  }
  return `${value.toPrecision(3)} ${unit}`;
}

/** 0.00123 -> "0.12%", 0.5 -> "50%". */
export function formatFraction(value: number | null | undefined): string {
  if (value === null || value === undefined || !Number.isFinite(value)) return "—";
  const percent = value * 100;
  return `${percent >= 10 ? percent.toFixed(0) : percent >= 1 ? percent.toFixed(1) : percent.toPrecision(2)}%`;
}
