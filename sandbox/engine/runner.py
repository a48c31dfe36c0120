"""Execute one user program in this (fresh, sandboxed) process.

Called in a child forked from the zygote, after its output pipes are on fds
1 and 2 and its event pipe is open. The program is compiled as
``<playground>`` and registered in ``linecache`` so tracebacks show the
user's lines; JAX's traceback filtering then keeps exactly those frames.
An exception in user code is a result (an ``error`` event), not a failure.
"""

from __future__ import annotations

import ast
import io
import linecache
import os
import sys
import tokenize
import traceback
import types
from typing import Any

from jaxplay import worker_protocol as wp
from jaxplay.sandbox import capture
from jaxplay.sandbox.capture import jit_capture
from jaxplay.sandbox.engine import libraries
from jaxplay.sandbox.isolation.limits import format_bytes
from jaxplay.sandbox.learning import error_hints, oom_message
from jaxplay.sandbox.output import events
from jaxplay.sandbox.output.ordering import ordered_text_streams

USER_FILENAME = "<playground>"
QUIET_TOKENS = frozenset({tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT,
                          tokenize.ENDMARKER})
USERLIB = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "userlib")  # sandbox/userlib


def reopen_std_streams() -> None:
    """Line-buffered text streams over fds 1 and 2: each line reaches the browser as it is printed,
    and the two streams in the order they were written (jaxplay.sandbox.output.ordering; only a reader that
    splits the frames, the worker's relay, may get them)."""
    sys.stdout, sys.stderr = ordered_text_streams(1, 2)
    sys.__stdout__, sys.__stderr__ = sys.stdout, sys.stderr  # type: ignore[misc]


def ends_with_semicolon(code: str) -> bool:
    """IPython's rule: the last token that is not a comment or whitespace is ``;`` (``x;  # note`` too)."""
    last = None
    try:
        for token in tokenize.generate_tokens(io.StringIO(code).readline):
            if token.type not in QUIET_TOKENS:
                last = token
    except (tokenize.TokenError, SyntaxError):
        return code.rstrip().endswith(";")
    return last is not None and last.type == tokenize.OP and last.string == ";"


def split_last_expression(tree: ast.Module, code: str) -> tuple[ast.Module, ast.Expression | None]:
    """Like a notebook cell: a final bare expression is evaluated for display (a trailing ';' hides it)."""
    if tree.body and isinstance(tree.body[-1], ast.Expr) and not ends_with_semicolon(code):
        last = tree.body.pop()
        return tree, ast.Expression(body=last.value)  # type: ignore[attr-defined]
    return tree, None


def user_frames(tb: types.TracebackType | None) -> list[traceback.FrameSummary]:
    return [frame for frame in traceback.extract_tb(tb) if frame.filename == USER_FILENAME]


# An error's text is cut to fit the run's budget for errors (sandbox/output/event_channel.py) even when
# escaped six times over in JSON: a line of control characters, or an exception holding a huge string,
# would otherwise be dropped whole, and the run reported as crashed.
MAX_ERROR_LINE_CHARS = 2000
MAX_ERROR_TEXT_CHARS = 32 << 10


def cut(text: str, limit: int) -> str:
    """``text``, or its head and tail around a note of what was cut, within about ``limit`` characters."""
    if len(text) <= limit:
        return text
    keep = limit // 2
    return f"{text[:keep]}… ({len(text) - 2 * keep} characters cut) …{text[-keep:]}"


def error_event(exc: BaseException, memory_limit: str) -> dict[str, Any]:
    frames = user_frames(exc.__traceback__)
    line: int | None = frames[-1].lineno if frames else None
    if frames and error_hints.full_traceback_wanted():
        frames = error_hints.frames_from_program(exc.__traceback__)
    if isinstance(exc, SyntaxError) and exc.filename == USER_FILENAME:
        line = exc.lineno
        frames = []
    message = str(exc)
    ename = type(exc).__name__
    if isinstance(exc, ModuleNotFoundError):  # not installed on this worker: say so and list what is
        message = libraries.missing_module_message(exc) or message
    out_of_memory = None
    if oom_message.is_out_of_memory(exc, message):
        ename = "MemoryError"
        message = oom_message.out_of_memory_text(message, memory_limit)
        out_of_memory = jit_capture.out_of_memory_of(exc)
    tb_text = "".join(traceback.format_list(frames)) if frames else ""
    tb_text = ("Traceback (most recent call last):\n" + tb_text if tb_text else "")
    tb_text += "".join(traceback.format_exception_only(type(exc), exc))
    tb_text = "".join(cut(row, MAX_ERROR_LINE_CHARS) for row in tb_text.splitlines(keepends=True))
    event = {"type": "error", "ename": ename, "message": cut(message, MAX_ERROR_TEXT_CHARS), "line": line,
             "traceback": cut(tb_text, MAX_ERROR_TEXT_CHARS)}
    if out_of_memory is not None:
        event["out_of_memory"] = out_of_memory
    return error_hints.refine(event, exc)


def execute(code: str, run: wp.SandboxRun) -> int:
    """Run ``code`` as ``run`` says (what it captures, its limits); return the exit status the worker reads
    (0 ok, 1 error)."""
    linecache.cache[USER_FILENAME] = (len(code), None, code.splitlines(True), USER_FILENAME)
    jit_capture.leave_our_frames_out_of_locations()
    if USERLIB not in sys.path:
        sys.path.insert(0, USERLIB)
    namespace: dict[str, Any] = {"__name__": "__main__", "__builtins__": __builtins__, "__file__": USER_FILENAME}
    main_module = types.ModuleType("__main__")
    main_module.__dict__.update(namespace)
    sys.modules["__main__"] = main_module
    namespace = main_module.__dict__
    memory_limit = format_bytes(run.memory_limit_bytes) if run.memory_limit_bytes else "the configured limit"
    capture.install(run)
    error_hints.install()
    status = 0
    try:
        tree = ast.parse(code, USER_FILENAME)
        body, last = split_last_expression(tree, code)
        # dont_inherit: this module's `from __future__ import annotations` must not reach the program.
        exec(compile(body, USER_FILENAME, "exec", dont_inherit=True), namespace)
        if last is not None:
            value = eval(compile(last, USER_FILENAME, "eval", dont_inherit=True), namespace)
            from jaxplay.sandbox.capture import display

            display.show_result(value)
    except SystemExit as exc:
        if exc.code not in (None, 0):
            # The program's own way to fail, not a crash: an error (status 1 with an error event) naming it.
            event = error_event(exc, memory_limit)
            event["message"] = f"The program called sys.exit({exc.code!r}) and ended with that status."
            events.emit(event)
            status = 1
    except BaseException as exc:  # noqa: BLE001 - user code may raise anything
        events.emit(error_event(exc, memory_limit))
        status = 1
    finally:
        capture.finish()
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except Exception:
                pass
    return status


def main() -> None:
    """Development harness: ``python -m jaxplay.sandbox.engine.runner FILE`` with events on fd 3 if open."""
    path = sys.argv[1]
    try:
        os.fstat(3)
        events.open_channel(3)
    except OSError:
        pass
    with open(path, encoding="utf-8") as f:
        code = f.read()
    sys.exit(execute(code, wp.SandboxRun()))


if __name__ == "__main__":
    main()
