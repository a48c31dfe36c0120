/**
 * The `sharding` event (sandbox/capture/sharding.py) and the sharding fields
 * the same capture adds to `compiled` events. docs/protocol.md ("Sharding")
 * describes them for people.
 */

export interface MeshInfo {
  axis_names: string[];
  axis_sizes: number[];
  /** "Explicit" | "Auto" | "Manual" per axis. */
  axis_types: string[];
  /** Device ids in row-major order of the mesh (`mesh.device_ids.flatten()`). */
  device_ids: number[];
}

export interface ShardInfo {
  device: number;
  /** [start, stop) per array dimension; start == stop when XLA gives this device nothing. */
  index: [number, number][];
  /** 0 for the first device holding this block, 1 for its first copy, ... */
  replica: number;
  /** Bytes of the elements this device holds; null when the dtype is unknown. */
  bytes: number | null;
}

/** How one array (or one argument/result of a compiled function) lies on the devices. */
export interface ArrayLayout {
  shape: number[];
  dtype: string | null;
  sharding_type: string;
  /** The PartitionSpec as written in Python, e.g. "P('x', 'y')". */
  spec: string;
  mesh: MeshInfo | null;
  devices: number[];
  device_kind: string | null;
  platform: string | null;
  memory_kind: string | null;
  bytes: number | null;
  /** Some dimension does not divide evenly: XLA pads, the last blocks are short or empty. */
  uneven: boolean;
  shards: ShardInfo[];
  /** Inside shard_map: every device holds its own block of `shape`. */
  local_block?: boolean;
  manual_axes?: string[];
  /** Null when the shard_map has check_vma=False: JAX does not know which blocks are equal. */
  varying_axes?: string[] | null;
}

export interface ShardingSource {
  kind: "visualize" | "show_sharding" | string;
  name: string | null;
  line: number | null;
  fn: string | null;
  /** Reported from inside a traced function, once per compilation. */
  traced?: boolean;
}

export interface ShardingEvent extends ArrayLayout {
  type: "sharding";
  id: string;
  typeof: string | null;
  source: ShardingSource;
}

export interface CompiledLayout extends ArrayLayout {
  name: string;
  donated?: boolean;
}

/** The fields of a `compiled` event this panel reads (the Inspect panel owns the rest). */
export interface CompiledShardingFields {
  type: "compiled";
  id: string;
  key?: string;
  fn?: string;
  line?: number | null;
  signature?: string;
  compile_index?: number;
  collectives?: Record<string, number>;
  num_devices?: number;
  in_shardings?: CompiledLayout[];
  out_shardings?: CompiledLayout[];
  in_shardings_omitted?: number;
  out_shardings_omitted?: number;
}

/** The five collectives the issue names, in the order the table lists them. */
export const MAIN_COLLECTIVES = ["all-reduce", "all-gather", "reduce-scatter", "all-to-all", "collective-permute"];

declare module "../wire/protocol" {
  interface EventMap {
    sharding: ShardingEvent;
  }
}
