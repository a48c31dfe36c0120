"""A run's events made into each tool's answer (protocol.py), and the short text form beside it.

An assistant reads every byte it is given into its context, so each answer
is bounded more tightly than the page's views: ``TEXT_LIMIT`` characters of
stdout and of stderr, ``IR_LIMIT`` of each jaxpr, StableHLO and HLO, and
``DIFF_LIMIT`` of each difference between runtimes. What is cut is said in
the answer's ``cut``, with the full size, and the link to the recorded run
holds the whole (as the worker bounded it).

What a program wrote reaches its person too: assistants show tool answers
in a terminal. So a program's text is made ``visible``: colour codes are
dropped and every other control character (an escape sequence that clears
the screen or writes the clipboard, a carriage return over earlier text, a
right-to-left override) is written out as ``\x1b``. In the text form each
of its lines is indented under its heading, so no line a program prints
reads as one of the answer's own (``link: ...``).
"""

from __future__ import annotations

import base64
import difflib
import html
import re
import zlib
from typing import Any

from jaxplay.server.agents.agent_runs import AgentRun
from jaxplay.server.agents.protocol import (
    ArrayLayout,
    CompiledFunction,
    ErrorAnswer,
    IRDifference,
    RunAnswer,
    RuntimeRun,
)

TEXT_LIMIT = 64_000
IR_LIMIT = 64_000
VALUE_LIMIT = 16_000
DIFF_LIMIT = 16_000
IR_ARTIFACTS = ("jaxpr", "stablehlo", "hlo")
TAG = re.compile(r"<[^>]*>")
PACKED = re.compile(r'<script type="application/octet-stream"\s*>\s*([A-Za-z0-9+/=\s]+?)\s*</script>')
SPACES = re.compile(r"\s+")
UNPACKED_LIMIT = 1 << 20
SCRIPT = re.compile(r"<(script|style)\b.*?</\1\s*>", re.DOTALL | re.IGNORECASE)
COLOUR = re.compile(r"\x1b\[[0-9;]*m")
CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069]")
INDENT = "  "


def visible(text: str) -> str:
    """``text`` without colour codes, each other control character written out (tab and newline kept)."""
    text = COLOUR.sub("", text.replace("\r\n", "\n"))
    return CONTROL.sub(lambda found: found.group().encode("unicode_escape").decode("ascii"), text)


def indented(text: str) -> str:
    return "\n".join(INDENT + line for line in text.split("\n"))


def bounded(text: str, limit: int, what: str, cut: list[str]) -> str:
    if len(text) <= limit:
        return text
    cut.append(f"{what}: the first {limit} of {len(text)} characters are shown")
    return text[:limit]


def value_text(event: dict[str, Any]) -> str:
    """A displayed value as text: plain text as it is, HTML without its tags, anything else by its kind."""
    mime, data = str(event.get("mime", "")), str(event.get("data", ""))
    if mime == "text/plain":
        return data
    if mime == "text/html":
        text = html_text(data)
        if text:
            return text
        return "(an explorable view: open the link to see it, or print(...) the value for text)"
    return f"({mime}, {len(data)} bytes: open the link to see it)"


def html_text(data: str) -> str:
    """The text of an HTML rendering. A tree view (treescope) keeps its content zlib-compressed in a script
    for the page to unpack; it is unpacked here, bounded, the same way."""
    parts = []
    for match in PACKED.finditer(data):
        try:
            unpacker = zlib.decompressobj()
            parts.append(unpacker.decompress(base64.b64decode(match.group(1)), UNPACKED_LIMIT).decode("utf-8", "replace"))
        except (ValueError, zlib.error):
            continue
    text = " ".join(html.unescape(TAG.sub(" ", SCRIPT.sub("", part))) for part in parts or [data])
    return SPACES.sub(" ", text).strip()


def error_of(events: list[dict[str, Any]]) -> ErrorAnswer | None:
    error = next((e for e in events if e.get("type") == "error"), None)
    if error is None:
        return None
    hint = error.get("hint")
    return ErrorAnswer(ename=visible(str(error.get("ename", "Error"))), message=visible(str(error.get("message", ""))),
                       line=error.get("line"), hint=None if hint is None else visible(str(hint)))


def run_answer(run: AgentRun, link: str | None = None, link_note: str | None = None) -> RunAnswer:
    events, done = run.events, run.done
    started = next((e for e in events if e.get("type") == "started"), {})
    devices = started.get("devices") or {}
    cut: list[str] = []
    stdout = bounded(visible("".join(str(e.get("text", "")) for e in events if e.get("type") == "stdout")),
                     TEXT_LIMIT, "stdout", cut)
    stderr = bounded(visible("".join(str(e.get("text", "")) for e in events if e.get("type") == "stderr")),
                     TEXT_LIMIT, "stderr", cut)
    result = next((e for e in events if e.get("type") == "display" and e.get("role") == "result"), None)
    value = None if result is None else bounded(visible(value_text(result)), VALUE_LIMIT, "value", cut)
    notices = [str(e.get("message", "")) for e in events if e.get("type") == "notice"]
    if run.dropped:
        cut.append(f"{run.dropped} events were left out: the run sent more than this server keeps for one answer")
    return RunAnswer(
        status=str(done.get("status", "crashed")), message=done.get("message"), elapsed_ms=done.get("elapsed_ms"),
        cached=bool(done.get("cached")), backend=started.get("backend"),
        runtime=started.get("runtime") or started.get("jax_version"),
        devices=f"{devices.get('count')} x {devices.get('kind')}" if devices else None,
        flags=run.request.options.flags.summary() or None,
        stdout=stdout, stderr=stderr, error=error_of(events), value=value, cut=cut, notices=notices,
        link=link, link_note=link_note)


def run_text(answer: RunAnswer) -> str:
    """The short text form: status, where it ran, output, the error with its line, the value, the link."""
    where = ", ".join(x for x in (answer["backend"], answer["devices"], answer["runtime"] and
                                  f"JAX {answer['runtime']}") if x)
    lines = [f"status: {answer['status']}" + (f" ({where})" if where else "") + (" [cached]" if answer["cached"]
                                                                                  else "")]
    if answer["flags"]:
        lines.append(f"flags: {answer['flags']}")
    if answer["message"] and answer["status"] != "ok":
        lines.append(f"message: {answer['message']}")
    if answer["stdout"]:
        lines += ["stdout:", indented(answer["stdout"].rstrip("\n"))]
    if answer["stderr"]:
        lines += ["stderr:", indented(answer["stderr"].rstrip("\n"))]
    error = answer["error"]
    if error is not None:
        where_line = f" (line {error['line']})" if error["line"] else ""
        lines += [f"error{where_line}: {error['ename']}:", indented(error["message"])]
        if error["hint"]:
            lines += ["hint:", indented(error["hint"])]
    if answer["value"] is not None:
        lines += ["value:", indented(answer["value"])]
    lines += [f"cut: {note}" for note in answer["cut"]]
    if answer["link"]:
        lines.append(f"link: {answer['link']}")
    elif answer["link_note"]:
        lines.append(f"no link: {answer['link_note']}")
    return "\n".join(lines)


def compiled_functions(run: AgentRun, function: str | None, cut: list[str]) -> list[CompiledFunction]:
    found = []
    for event in run.events:
        if event.get("type") != "compiled":
            continue
        name = visible(str(event.get("fn", "")))
        if function is not None and function not in (name, name.rsplit(".", 1)[-1]):
            continue
        truncated = event.get("truncated") or {}
        for artifact, size in truncated.items():
            cut.append(f"{name} {artifact}: the worker kept the first {event.get('artifact_limit_bytes')} of "
                       f"{size} bytes")
        irs = {a: bounded(visible(str(event.get(a) or "")), IR_LIMIT, f"{name} {a}", cut) for a in IR_ARTIFACTS}
        found.append(CompiledFunction(
            function=name, key=str(event.get("key", "")), line=event.get("line"), signature=event.get("signature"),
            jaxpr=irs["jaxpr"], stablehlo=irs["stablehlo"], hlo=irs["hlo"], cost=event.get("cost"),
            memory=event.get("memory"), recompile_reason=event.get("cache_miss_reason")))
    return found


def functions_text(functions: list[CompiledFunction]) -> str:
    lines = []
    for fn in functions:
        cost = fn["cost"] or {}
        summary = ", ".join(f"{k} {cost[k]}" for k in ("flops", "bytes accessed") if k in cost)
        lines.append(f"{fn['function']} [{fn['key']}] line {fn['line']}: {fn['signature'] or ''}"
                     + (f"; cost: {summary}" if summary else "")
                     + (f"; recompiled because: {fn['recompile_reason']}" if fn["recompile_reason"] else ""))
        lines += ["hlo:", fn["hlo"]]
    return "\n".join(lines) if lines else "No function was compiled (jax.jit, or a jitted call, compiles one)."


def layout_text(event: dict[str, Any]) -> str:
    """Each shard's block of the array and the device that holds it, one line each."""
    lines = []
    for shard in event.get("shards") or []:
        index = shard.get("index") or []
        blocks = ", ".join(f"{start}:{stop}" for start, stop in index) or "scalar"
        lines.append(f"device {shard.get('device')}: [{blocks}]")
    return "\n".join(lines)


def array_layouts(run: AgentRun) -> list[ArrayLayout]:
    return [ArrayLayout(line=(e.get("source") or {}).get("line"), shape=list(e.get("shape") or []),
                        dtype=e.get("dtype"), sharding=str(e.get("sharding_type", "")), spec=str(e.get("spec", "")),
                        mesh=e.get("mesh"), layout=layout_text(e))
            for e in run.events if e.get("type") == "sharding"]


def runtime_run(runtime: str, run: AgentRun, link: str | None) -> RuntimeRun:
    answer = run_answer(run, link)
    return RuntimeRun(runtime=runtime, status=answer["status"], stdout=answer["stdout"], error=answer["error"],
                      value=answer["value"], link=link)


def ir_differences(by_runtime: dict[str, list[CompiledFunction]]) -> tuple[list[IRDifference], list[str]]:
    """Each function's IR on the first runtime against each other runtime: (differences, what is alike)."""
    names = list(by_runtime)
    differences: list[IRDifference] = []
    alike: list[str] = []
    if len(names) < 2:
        return differences, alike
    first = {fn["key"]: fn for fn in by_runtime[names[0]]}
    for other in names[1:]:
        theirs = {fn["key"]: fn for fn in by_runtime[other]}
        for key in first.keys() | theirs.keys():
            mine, their = first.get(key), theirs.get(key)
            label = (mine or their)["function"]  # type: ignore[index]
            for artifact in IR_ARTIFACTS:
                a = mine[artifact] if mine else ""  # type: ignore[literal-required]
                b = their[artifact] if their else ""  # type: ignore[literal-required]
                if a == b:
                    alike.append(f"{label}: {artifact}")
                    continue
                diff = "\n".join(difflib.unified_diff(a.splitlines(), b.splitlines(), names[0], other, lineterm=""))
                if len(diff) > DIFF_LIMIT:
                    diff = diff[:DIFF_LIMIT] + f"\n... ({len(diff) - DIFF_LIMIT} more characters of the diff)"
                differences.append(IRDifference(function=label, artifact=artifact, runtimes=[names[0], other],
                                                diff=diff))
    return differences, sorted(set(alike))
