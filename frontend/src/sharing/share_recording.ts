/**
 * The run on screen as a link would record it, and the shared snippet a
 * link's page opened on.
 *
 * `RunRecording` keeps the events of the run on screen (live or replayed),
 * without their run id, so the last finished run can be shared exactly as it
 * was shown; it replays a snippet's recorded run into the panels on load, and
 * sets the banner that says a run was recorded, or answered from the result
 * cache.
 */

import type { Boot } from "../core/boot";
import type { ClientRun, DoneEvent, ServerEvent } from "../wire/protocol";
import type { ShareBanner } from "./share_banner";

declare module "../wire/protocol" {
  interface NondeterministicEvent {
    type: "nondeterministic";
    id: string;
    kind: "time" | "randomness" | "host state";
    source: string;
    line: number | null;
  }
  interface EventMap {
    nondeterministic: NondeterministicEvent;
  }
}

export interface SharedSnippet {
  id: string;
  code: string;
  backend: string | null;
  settings: Record<string, unknown>;
  recorded_run: ServerEvent[] | null;
  recorded_at: string | null;
  forked_from: string | null;
  created_at: string | null;
}

export interface RecordedRun {
  code: string;
  backend: string | null;
  settings: string;
  events: ServerEvent[];
  recordedAt: string | null;
  done: DoneEvent | null;
}

export function snippetFrom(boot: Boot): SharedSnippet | null {
  const s = boot.snippet;
  if (!s || typeof s.id !== "string") return null;
  return {
    id: s.id,
    code: s.code,
    backend: typeof s.backend === "string" ? s.backend : null,
    settings: s.settings && typeof s.settings === "object" ? (s.settings as Record<string, unknown>) : {},
    recorded_run: Array.isArray(s.recorded_run) ? (s.recorded_run as ServerEvent[]) : null,
    recorded_at: typeof s.recorded_at === "string" ? s.recorded_at : null,
    forked_from: typeof s.forked_from === "string" ? s.forked_from : null,
    created_at: typeof s.created_at === "string" ? s.created_at : null,
  };
}

function withoutId(ev: ServerEvent): ServerEvent {
  const { id: _id, ...rest } = ev as ServerEvent & { id?: unknown };
  return rest as ServerEvent;
}

export class RunRecording {
  private last: RecordedRun | null = null;
  private replaying = false;

  constructor(private readonly banner: ShareBanner) {}

  onRunStart(message: ClientRun): void {
    const { type: _t, id: _i, code, backend, fresh: _f, runtime: _r, ...settings } = message;
    this.last = { code, backend: backend ?? null, settings: JSON.stringify(settings), events: [], recordedAt: null, done: null };
    if (!this.replaying) this.banner.show({ kind: "none" });
  }

  /** No run on screen: nothing to share with the code, no banner. */
  clear(): void {
    this.last = null;
    this.banner.show({ kind: "none" });
  }

  onEvent(ev: ServerEvent): void {
    if (!this.last || this.last.done || ev.type === "queued") return;
    this.last.events.push(withoutId(ev));
    if (ev.type !== "done") return;
    this.last.done = ev;
    this.last.recordedAt ??= ev.cached_at ?? new Date().toISOString();
    if (this.replaying) return;
    this.banner.show(ev.cached ? { kind: "cached", events: this.last.events, done: ev } : { kind: "none" });
  }

  /** Shows `snippet`'s recorded `events` through `play` (the panels' path for a live run's events). */
  replay(snippet: SharedSnippet, events: ServerEvent[], play: (events: ServerEvent[]) => void): void {
    this.replaying = true;
    try {
      // `view` is how the page showed the run (linkFields), not a run field.
      const { view: _view, ...runSettings } = snippet.settings;
      this.onRunStart({ type: "run", id: "recorded", code: snippet.code, ...(snippet.backend ? { backend: snippet.backend } : {}), ...runSettings });
      this.last!.recordedAt = snippet.recorded_at;
      play(events);
    } finally {
      this.replaying = false;
    }
    this.banner.show({ kind: "recorded", events, recordedAt: snippet.recorded_at, sharedAt: snippet.created_at });
  }

  /** The events of the run on screen if it is a finished run of exactly `code` (its outputs then belong to it). */
  runOf(code: string): ServerEvent[] | null {
    return this.last?.done && this.last.code === code ? this.last.events : null;
  }

  /** The last finished run, if it is a run of exactly what would be shared now. */
  shareableRun(code: string, backend: string | null, settings: string): RecordedRun | null {
    const run = this.last;
    if (!run?.done || run.code !== code || run.settings !== settings) return null;
    if (run.backend !== null && backend !== null && run.backend !== backend) return null;
    return run;
  }
}
