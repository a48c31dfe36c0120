// The wire (frames in, the socket's address), the boot data, and the shell's status line and results button.
import { afterEach, describe, expect, it } from "vitest";
import { readBoot } from "../src/core/boot";
import { describe as describeStatus, describeWait } from "../src/shell/status";
import { resultsSizeButton } from "../src/shell/results_size";
import { socketUrl } from "../src/wire/connection";
import { parseServerEvent } from "../src/wire/protocol";

describe("parseServerEvent", () => {
  it("returns an object with a string type as the event", () => {
    const ev = parseServerEvent('{"type": "stdout", "id": "r1", "text": "hi\\n"}');
    expect(ev).toEqual({ type: "stdout", id: "r1", text: "hi\n" });
  });

  it("drops what is not an event: bad JSON, non-objects, a missing or non-string type", () => {
    for (const frame of ["{not json", "[1, 2]", "null", '"done"', "42", '{"id": "r1"}', '{"type": 3}']) {
      expect(parseServerEvent(frame), frame).toBeNull();
    }
  });
});

describe("socketUrl", () => {
  it("speaks wss on an https page and ws otherwise, to /ws on the same host", () => {
    expect(socketUrl({ protocol: "https:", host: "play.example:8443" } as Location)).toBe("wss://play.example:8443/ws");
    expect(socketUrl({ protocol: "http:", host: "127.0.0.1:8000" } as Location)).toBe("ws://127.0.0.1:8000/ws");
  });
});

describe("readBoot", () => {
  function page(json: string | null): Document {
    const doc = document.implementation.createHTMLDocument("t");
    if (json !== null) {
      const script = doc.createElement("script");
      script.id = "boot";
      script.type = "application/json";
      script.textContent = json;
      doc.body.append(script);
    }
    return doc;
  }

  it("reads a share page's snippet and title", () => {
    const boot = readBoot(page('{"mode": "editor", "snippet": {"id": "abc", "code": "print(1)", "backend": "cpu"}, "page_title": "Shared"}'));
    expect(boot.mode).toBe("editor");
    expect(boot.snippet).toEqual({ id: "abc", code: "print(1)", backend: "cpu" });
    expect(boot.page_title).toBe("Shared");
  });

  it("starts from the editor's defaults without boot data or with broken boot data", () => {
    const defaults = { mode: "editor", snippet: null, page_title: "JAX Playground" };
    expect(readBoot(page(null))).toEqual(defaults);
    const errors = console.error;
    console.error = () => {};
    try {
      expect(readBoot(page("{broken"))).toEqual(defaults);
    } finally {
      console.error = errors;
    }
  });

  it("keeps only the two known modes and drops a snippet without code", () => {
    const boot = readBoot(page('{"mode": "presenter", "snippet": {"id": "x"}, "page_title": 7, "room": {"code": "r"}}'));
    expect(boot.mode).toBe("editor");
    expect(boot.snippet).toBeNull();
    expect(boot.page_title).toBe("JAX Playground");
    expect(boot.room).toEqual({ code: "r" }); // other fields pass through for the features that read them
    expect(readBoot(page('{"mode": "embed"}')).mode).toBe("embed");
  });
});

describe("the status line's words", () => {
  it("says how a run ended", () => {
    expect(describeStatus({ kind: "done", status: "ok", elapsedMs: 120 })).toBe("ok in 120 ms");
    expect(describeStatus({ kind: "done", status: "timeout", elapsedMs: 30_000 })).toBe("timeout after 30.0 s");
    expect(describeStatus({ kind: "done", status: "cancelled", elapsedMs: 0 })).toBe("cancelled");
    expect(describeStatus({ kind: "done", status: "rejected", elapsedMs: 0, message: "the queue is full" }))
      .toBe("rejected: the queue is full");
    expect(describeStatus({ kind: "idle" })).toBe("ready");
    expect(describeStatus({ kind: "lost" })).toBe("lost: the connection dropped during the run");
  });

  it("names the function being compiled and its line while a run compiles", () => {
    const text = describeStatus({ kind: "running", since: performance.now(), compiling: { fn: "update", line: 12 } });
    expect(text).toMatch(/^compiling update \(line 12\)… · running 0\.\d s$/);
    const nowhere = describeStatus({ kind: "running", since: performance.now(), compiling: { fn: "f", line: null } });
    expect(nowhere).toMatch(/^compiling f… · running/);
  });

  it("counts the queue's estimated wait down, and says when it is overdue or unknown", () => {
    expect(describeWait(null, 0)).toBe("no wait estimate yet");
    expect(describeWait(10, 2500)).toBe("about 8 s left");
    expect(describeWait(125, 0)).toBe("about 2 min 5 s left");
    expect(describeWait(3, 2500)).toBe("starting in a moment");
    expect(describeWait(3, 5000)).toBe("longer than usual: the runs ahead are taking a while");
  });

  it("shows the queue position with the wait", () => {
    expect(describeStatus({ kind: "queued", position: 2, waitS: null })).toBe("queued (position 2, no wait estimate yet)");
  });
});

describe("the results' size button", () => {
  afterEach(() => document.body.classList.remove("results-enlarged"));

  it("gives the results the whole workspace and gives the editor back", () => {
    const button = resultsSizeButton();
    expect(button.getAttribute("aria-pressed")).toBe("false");
    button.click();
    expect(document.body.classList.contains("results-enlarged")).toBe(true);
    expect(button.getAttribute("aria-pressed")).toBe("true");
    expect(button.getAttribute("aria-label")).toBe("Show the editor again");
    button.click();
    expect(document.body.classList.contains("results-enlarged")).toBe(false);
    expect(button.getAttribute("aria-label")).toBe("Enlarge the results");
  });
});

describe("the Output tab at a run's end", () => {
  it("holds the run's whole output when its done arrives, not a frame later", async () => {
    const { outputPanel } = await import("../src/output/output");
    const ctx = {
      editor: { clearLineMarks() {}, setLineMarks() {}, goToLine() {} },
      setBadge() {}, activate() {}, showPanel() {}, isActive: () => true,
      boot: {}, request: () => () => {}, runChoices: () => ({ runtimes: [], fields: {} }),
    } as unknown as Parameters<typeof outputPanel>[0];
    const panel = outputPanel(ctx);
    panel.onRunStart("r1");
    panel.onEvent({ type: "stdout", id: "r1", text: "hello from a phone\n" } as never);
    panel.onRunDone?.({ type: "done", id: "r1", status: "ok", elapsed_ms: 12, message: null } as never);
    // No animation frame has run: the text is there in the same task as the done.
    expect(panel.element.textContent).toContain("hello from a phone");
  });
});
