/**
 * Browser <-> server messages on `/ws`, mirroring jaxplay/browser_protocol.py
 * (the single source of truth; docs/protocol.md describes them for people).
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
  /** Fields contributed by panels (`Panel.runFields`); the server validates them. */
  [field: string]: unknown;
}

export interface ClientCancel {
  type: "cancel";
  id: string;
}

export type ClientMessage = ClientRun | ClientCancel;

// --- server -> client -------------------------------------------------------

interface RunEventBase {
  /** The run this event belongs to, as chosen by the client. */
  id: string;
}

export interface QueuedEvent extends RunEventBase {
  type: "queued";
  /** 1 = next to start. */
  position: number;
}

export interface StartedEvent extends RunEventBase {
  type: "started";
  backend: string;
  devices: Record<string, unknown>;
  jax_version: string;
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
  /** The user's frames only, formatted like Python's traceback. */
  traceback: string;
}

export interface DisplayEvent extends RunEventBase {
  type: "display";
  /** text/plain, text/html, image/png (base64 data), image/svg+xml, ... */
  mime: string;
  data: string;
  /** "result" (the final bare expression), "display" (playground.display) or "figure". */
  role?: string;
  /** Set when the value had to be shown in a smaller form. */
  notice?: string;
  /** CSS pixels, for images. */
  width?: number;
  height?: number;
}

export interface DoneEvent extends RunEventBase {
  type: "done";
  status: RunStatus;
  elapsed_ms: number;
  message?: string;
}

/** A problem that may name no run: malformed JSON, a binary frame. */
export interface NoticeEvent {
  type: "notice";
  id: string | null;
  level: "error" | "warning" | "info";
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
}

export interface BackendsResponse {
  backends: BackendInfo[];
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
