/**
 * The `memory_view` field of a `compiled` event (sandbox/capture/memory_view.py; docs/protocol.md): XLA's
 * buffer assignment of one compilation, followed over its schedule.
 */

export type BufferKind = "argument" | "aliased" | "output" | "temp";
export const BUFFER_KINDS: readonly BufferKind[] = ["argument", "aliased", "output", "temp"];

export const KIND_TITLES: Record<BufferKind, string> = {
  argument: "arguments",
  aliased: "donated (argument reused for an output)",
  output: "outputs",
  temp: "temporaries",
};

/** [name, opcode, computation, line in the HLO text (null: past a cut), line of the program (null: none)]. */
export type InstructionRow = [string, string, string, number | null, number | null];

export interface PeakBuffer {
  bytes: number;
  kind: BufferKind;
  /** First and last positions of the schedule it is alive at (inclusive). */
  start: number;
  end: number;
  /** What made it: an index into `instructions`. */
  instruction: number | null;
  shape: string | null;
  /** The argument's position, for arguments and donated ones. */
  parameter?: number | null;
  /** For a donated argument: the output XLA wrote into its memory. */
  reused_by?: number | null;
}

export interface MemoryView {
  /** Positions in the flattened schedule: the chart's x axis. */
  positions: number;
  totals: { argument: number; output: number; alias: number; temp: number; constant: number; thread_local: number };
  peak: { bytes: number; position: number; by_kind: Record<BufferKind, number>; instruction: number | null };
  /** Alive at the peak, largest first. */
  at_peak: PeakBuffer[];
  at_peak_others: { count: number; bytes: number } | null;
  /** [position, argument, aliased, output, temp]: the bytes alive from that position on. */
  steps: [number, number, number, number, number][];
  /** Whether `steps` groups positions (each bin keeping its largest total). */
  steps_binned: boolean;
  /** The instruction at each position (indices into `instructions`), or null for long schedules. */
  schedule: (number | null)[] | null;
  instructions: InstructionRow[];
  /** Where XLA kept its heap simulator's trace: [its peak, this view's peak of the same buffers]. */
  heap_simulator?: [number, number][];
  build_ms?: number;
}

export function memoryViewOf(compiled: { [field: string]: unknown }): MemoryView | null {
  const view = compiled.memory_view as MemoryView | null | undefined;
  return view && typeof view === "object" && Array.isArray(view.steps) && view.peak ? view : null;
}

/** The bytes alive at `position` by kind, from the chart's steps (the last step at or before it). */
export function aliveAt(view: MemoryView, position: number): [number, number, number, number] {
  let lo = 0;
  let hi = view.steps.length - 1;
  let found = -1;
  while (lo <= hi) {
    const mid = (lo + hi) >> 1;
    if (view.steps[mid][0] <= position) {
      found = mid;
      lo = mid + 1;
    } else hi = mid - 1;
  }
  if (found < 0) return [0, 0, 0, 0];
  const [, a, b, c, d] = view.steps[found];
  return [a, b, c, d];
}
