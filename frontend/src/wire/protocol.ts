/**
 * Browser <-> server messages on `/ws`, mirroring jaxplay/browser_protocol.py
 * (the single source of truth; docs/protocol.md describes them for people).
 * tests/unit/test_protocol_mirror.py fails when a message or a field here and
 * there differ: change both.
 *
 * Server events are keyed by `type` in `EventMap`. A feature that adds an
 * event declares its interface next to its panel and merges it in:
 *
 *     declare module "../protocol" {
 *       interface EventMap { jit: JitEvent }
 *     }
 *
 * so `ServerEvent` narrows on `ev.type` everywhere without editing this file.
 */

export type RunStatus = "ok" | "error" | "timeout" | "cancelled" | "crashed" | "rejected";

// --- client -> server -------------------------------------------------------

export interface ClientRun {
  type: "run";
  id: string;
  code: string;
  backend?: string;
  timeout_s?: number;
  inspect?: boolean;
  fresh?: boolean;
  /** Record the whole run with jax.profiler (the Performance panel's `runFields`). */
  profile?: boolean;
  /** A JAX version the backend offers (`BackendInfo.runtimes`); left out for the default. */
  runtime?: string;
  /** One of the Compare panel's runs (a version each): counted as such, never the room's run. */
  compare?: boolean;
  /** JAX options and XLA flags from the allow-list (GET /api/flags; jaxplay/run_flags.py). */
  flags?: RunFlags;
  /** Fields contributed by panels (`Panel.runFields`); the server validates them. */
  [field: string]: unknown;
}

export interface ClientCancel {
  type: "cancel";
  id: string;
}

/**
 * XLA's pass pipeline of compilation `key` of function `fn` in a run of `code`: the server runs the
 * program again, in a fresh sandbox, until that compilation. Answered by one `passes` event, then `done`.
 */
export interface ClientPasses {
  type: "passes";
  id: string;
  code: string;
  key: string;
  fn: string;
  backend?: string;
  /** The JAX of the run whose compilation it was (its `started` event's runtime). */
  runtime?: string;
  /** That run's flags (its `started` event's): XLA compiles under them again. */
  flags?: RunFlags;
}

// Workshop rooms (server/rooms/hub.py): follow a presenter's editor and runs.

export interface RoomJoin {
  type: "room_join";
  room: string;
  /** The presenter secret: present the room instead of following it. */
  secret?: string;
}

export interface RoomLeave {
  type: "room_leave";
}

/** Presenter only: the whole program (left out when only the selection moved), selection as [anchor, head]. */
export interface RoomEdit {
  type: "room_edit";
  code?: string;
  selection?: [number, number];
}

/** Presenter only: move every follower through the deck, or set the deck (snippet ids). */
export interface RoomDeck {
  type: "room_deck";
  action: "next" | "prev" | "goto" | "set";
  position?: number;
  snippets?: string[];
}

export type RoomMessage = RoomJoin | RoomLeave | RoomEdit | RoomDeck;

export type ClientMessage = ClientRun | ClientCancel | ClientPasses | RoomMessage;

// --- server -> client -------------------------------------------------------

interface RunEventBase {
  /** The run this event belongs to, as chosen by the client. */
  id: string;
}

export interface QueuedEvent extends RunEventBase {
  type: "queued";
  /** 1 = next to start. */
  position: number;
  /** Seconds until it starts, from recent runs' durations; null before any run finished. */
  estimated_wait_s: number | null;
}

export interface StartedEvent extends RunEventBase {
  type: "started";
  backend: string;
  devices: Record<string, unknown>;
  /** The JAX of the runtime that runs it. */
  jax_version: string;
  /** Sent with every run now; a recorded run shared by an older server may lack them. */
  jaxlib_version?: string;
  /** "bwrap", or "none" when the server runs code unsandboxed. */
  sandbox?: string;
  /** That runtime's name (its JAX version), and whether it is the worker's default. */
  runtime?: string;
  default_runtime?: boolean;
  /** The JAX options and XLA flags it runs with; left out when none. */
  flags?: RunFlags;
}

/** A run's JAX options (`config`) and XLA flags (`xla`), names to values. */
export interface RunFlags {
  config?: Record<string, boolean | number | string>;
  xla?: Record<string, boolean | number | string>;
}

/** One allow-listed option or flag, as GET /api/flags lists it. */
export interface FlagSpecInfo {
  name: string;
  kind: "bool" | "int" | "choice" | "pass_names";
  help: string;
  /** What values it takes, in words. */
  allowed: string;
  low: number;
  high: number;
  choices: string[];
  /** The first JAX whose XLA knows it, and the first that no longer does ("" for none). */
  since: string;
  until: string;
  /** The only backends it acts on; empty for every one. */
  backends: string[];
}

export interface FlagsCatalogue {
  config: FlagSpecInfo[];
  xla: FlagSpecInfo[];
}

export interface StdoutEvent extends RunEventBase {
  type: "stdout";
  text: string;
}

export interface StderrEvent extends RunEventBase {
  type: "stderr";
  text: string;
}

export interface ErrorEvent extends RunEventBase {
  type: "error";
  ename: string;
  message: string;
  /** 1-based line in the user's code, or null when the error is not in it. */
  line: number | null;
  /** The user's frames only (every frame from the program's first with JAX_TRACEBACK_FILTERING=off), formatted like Python's traceback. */
  traceback: string;
  /** A short hint for a removed or moved JAX API, or "Did you mean ...?"; shown under the error. */
  hint?: string;
  /** The JAX name the program used that this JAX lacks, e.g. "jax.tree_map" (offer another runtime). */
  api?: string;
  /** When that name came or went, where known: `{ removed_in: "0.6.0" }` or `{ added_in: "0.6.0" }`. */
  api_versions?: { removed_in?: string; added_in?: string };
  /** An out-of-memory error a jitted call raised: the function, its compilation (`key`) and that compilation's peak. */
  out_of_memory?: {
    fn: string;
    line: number | null;
    phase: "compile" | "execute";
    key: string | null;
    peak_bytes: number | null;
    instruction: string | null;
  };
}

export interface DisplayEvent extends RunEventBase {
  type: "display";
  /** text/plain, text/html, image/png (base64 data), image/svg+xml, ... */
  mime: string;
  data: string;
  /** "result" (the final bare expression), "display" (playground.display) or "figure". */
  role: string;
  /** Set when the value had to be shown in a smaller form. */
  notice?: string;
  /** CSS pixels, for images. */
  width?: number;
  height?: number;
  /** The value as plain text, beside a richer form (exports, screen readers). */
  text?: string;
  /** The server's word that this output came from a run of this code (server/runs/output_vouch.py). */
  vouch?: string;
}

export interface DoneEvent extends RunEventBase {
  type: "done";
  status: RunStatus;
  elapsed_ms: number;
  message?: string;
  /** The run could load compiled code its browser session's earlier runs saved: its result answers that session alone. */
  read_session_cache?: boolean;
  /** True when the server answered from its result cache; `cached_at` is when the recorded run finished. */
  cached?: boolean;
  cached_at?: string;
  /** A rejected run's: why, as a fixed word (e.g. "queue_full"; docs/protocol.md lists them). */
  reason?: string;
}

/** A problem that may name no run: malformed JSON, a binary frame. */
export interface NoticeEvent {
  type: "notice";
  id: string | null;
  level: "error" | "warning" | "info";
  message: string;
  /** The tab it is about, e.g. "Inspect" (a view that shows less on this JAX). */
  view?: string;
}

/**
 * The server is shutting down (a restart, a deploy): runs in flight may finish within `grace_s`,
 * new runs are refused, then the socket closes. The page says the server is restarting and holds
 * new runs until it has reconnected.
 */
export interface ServerDrainingEvent {
  type: "server_draining";
  message: string;
  grace_s: number;
}

/** Everything a member needs to show a room now: on join, reconnect and slide changes. */
export interface RoomStateEvent {
  type: "room_state";
  room: string;
  /** The six-character code the room left for `room` (its presenter opened it after that code ended). */
  moved_from?: string;
  /** "join": the answer to room_join (also after a reconnect); "deck": the presenter changed slide;
   * "moved": the room has a new code (`moved_from`). */
  reason: "join" | "deck" | "moved";
  role: "presenter" | "attendee";
  code: string;
  selection: [number, number] | null;
  version: number;
  deck: string[];
  position: number;
  attendee_timeout_s: number;
  presenter_online: boolean;
  /** The presenter's latest run's events (ending with `done` once it ended), or null. */
  run: ServerEvent[] | null;
  people: number;
  ran: number;
  errors: number;
}

export interface RoomEditEvent {
  type: "room_edit";
  room: string;
  version: number;
  /** Left out when only the selection moved. */
  code?: string;
  selection: [number, number] | null;
}

/** One event of the presenter's run; `event.id` is the presenter's run id. */
export interface RoomRunEvent {
  type: "room_run";
  room: string;
  event: ServerEvent;
}

/** People following; of them, how many ran since the presenter last ran or changed slide, and how many failed. */
export interface RoomCountsEvent {
  type: "room_counts";
  room: string;
  people: number;
  ran: number;
  errors: number;
}

export interface RoomPresenceEvent {
  type: "room_presence";
  room: string;
  presenter_online: boolean;
}

export interface RoomClosedEvent {
  type: "room_closed";
  room: string;
  message: string;
}

/** Every server event by `type`; features extend this by declaration merging. */
export interface EventMap {
  queued: QueuedEvent;
  started: StartedEvent;
  stdout: StdoutEvent;
  stderr: StderrEvent;
  error: ErrorEvent;
  display: DisplayEvent;
  done: DoneEvent;
  notice: NoticeEvent;
  server_draining: ServerDrainingEvent;
  room_state: RoomStateEvent;
  room_edit: RoomEditEvent;
  room_run: RoomRunEvent;
  room_counts: RoomCountsEvent;
  room_presence: RoomPresenceEvent;
  room_closed: RoomClosedEvent;
}

export type ServerEventType = keyof EventMap;
export type ServerEvent = EventMap[ServerEventType];

// --- REST -------------------------------------------------------------------

export interface BackendInfo {
  name: string;
  device_kind: string;
  device_count: number;
  jax_version: string;
  jaxlib_version: string;
  workers: number;
  slots: number;
  free_slots: number;
  queued: number;
  /** "bwrap", or "none" when the server runs code unsandboxed (development only). */
  sandbox: string;
  /** {import name: version} of what a program can import there. */
  libraries?: Record<string, string>;
  /** The device's measured peak for rooflines (null until a worker measured it). */
  device_peak?: DevicePeak | null;
  /** The JAX versions it offers, newest first (jaxplay/worker_protocol.py, server/runs/runtimes.py). */
  runtimes?: RuntimeInfo[];
}

/** Measured by the worker at start (a matmul and an in-place copy), per host. */
export interface DevicePeak {
  flops_per_s: number;
  bytes_per_s: number;
  how?: string;
  measured_at?: string;
  device_kind?: string;
}

export interface RuntimeInfo {
  /** Its JAX version: what a run names in `runtime`. */
  name: string;
  jax_version: string;
  jaxlib_version: string;
  /** A worker's own JAX: what runs get when they name none. */
  default: boolean;
  libraries: Record<string, string>;
  /** Workers that can run it. */
  workers: number;
  /** Why no worker can run it (its install or start failed); null when it works. */
  problem: string | null;
}

export interface BackendsResponse {
  backends: BackendInfo[];
  /** What a run that names no backend runs on: the picker's first choice. */
  default?: string | null;
  /** What keeps the server from running code, said plainly (a local worker that cannot start). */
  problems?: string[];
}

/** Parses one text frame; anything that is not an object with a string `type` is null. */
export function parseServerEvent(text: string): ServerEvent | null {
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch {
    return null;
  }
  if (typeof raw !== "object" || raw === null || typeof (raw as { type?: unknown }).type !== "string") {
    return null;
  }
  return raw as ServerEvent;
}
