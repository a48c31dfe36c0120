/**
 * The events the Inspect tab reads, as docs/protocol.md ("Inspect events")
 * describes them, merged into the protocol's EventMap. Other panels that
 * read `compiled` events (Sharding) import `CompiledEvent` from here.
 */

import type { IrDialect } from "./hlo";
import type { Phase } from "./inspect_format";
import type { LineRange } from "./inspect_view";

export type ArtifactName = IrDialect;

export interface CompiledArgument {
  name: string;
  type?: string;
  static?: string;
}

/** One distinct compilation (docs/protocol.md, "compiled"). */
export interface CompiledEvent {
  type: "compiled";
  id: string;
  key: string;
  fn_id: number;
  fn: string;
  line: number | null;
  module: string | null;
  compile_index: number;
  previous_key: string | null;
  signature: string;
  arguments: CompiledArgument[];
  outputs: string | null;
  phases_ms: Record<Phase, number>;
  persistent_cache_hit: boolean;
  lowered_module_cached?: boolean;
  cache_miss_reason: string | null;
  jaxpr: string;
  stablehlo: string;
  hlo: string;
  source_lines: Partial<Record<ArtifactName, LineRange[]>>;
  truncated: Partial<Record<ArtifactName, number>>;
  artifact_limit_bytes: number;
  cost: Record<string, number | string | null> | null;
  memory: Record<string, number> | null;
  capture_errors?: string[];
  /** Fields added by other captures' hooks (e.g. shardings). */
  [field: string]: unknown;
}

export interface FunctionTiming {
  fn_id: number;
  fn: string;
  line: number | null;
  calls: number;
  total_ms: number;
  median_ms: number | null;
  min_ms: number | null;
  max_ms: number | null;
  first_call_ms: number | null;
  traced_calls: number;
  compile_calls: number;
  sampled_calls: number;
}

export interface FnTimingEvent {
  type: "fn_timing";
  id: string;
  final: boolean;
  functions: FunctionTiming[];
}

export interface TimingEvent {
  type: "timing";
  id: string;
  label: string;
  line: number | null;
  loops: number;
  repeats: number;
  samples_ms: number[];
  median_ms: number;
  min_ms: number;
  max_ms: number;
  mean_ms: number;
  q1_ms: number;
  q3_ms: number;
  iqr_ms: number;
  warmup_ms: number;
}

/** A jitted function was traced and is being lowered and compiled now; its `compiled` event follows. */
export interface CompilingEvent {
  type: "compiling";
  id: string;
  fn_id: number;
  fn: string;
  line: number | null;
  compile_index: number;
}

declare module "../wire/protocol" {
  interface EventMap {
    compiling: CompilingEvent;
    compiled: CompiledEvent;
    fn_timing: FnTimingEvent;
    timing: TimingEvent;
  }
}
