"""A workshop room in three real Chromium contexts: a presenter types and runs, two attendees follow, one forks."""

from __future__ import annotations

import json
import re
import sqlite3
import tempfile
import time
from pathlib import Path

from playwright.sync_api import Page, expect

from jaxplay.server.rooms.codes import secret_digest
from tests.browser.conftest import ensure_frontend_built, pages_of
from tests.browser.helpers import output_text, replace_code, run_ok, wait_for_status
from tests.live_server import LiveServer

PRESENTER_CODE = ("import jax\n\n@jax.jit\ndef double(x):\n    return x * 2\n\n"
                  "message = 'from the presenter'\nprint(message, double(21))")
FORKED_CODE = "print('my own copy', 6 * 7)"


def editor_code(page: Page) -> str:
    return page.evaluate("window.jaxplay.editor.getCode()")


def wait_for_code(page: Page, code: str) -> None:
    page.wait_for_function("code => window.jaxplay.editor.getCode() === code", arg=code, timeout=15_000)


def test_presenter_types_and_runs_two_attendees_follow_one_forks(page_at):
    presenter = page_at("/")
    presenter.click("[data-testid=room-menu]")
    presenter.click("[data-testid=room-start]")
    presenter.wait_for_url(re.compile(r"/r/jax-[2-9A-Z]{5}-[2-9A-Z]{5}#presenter="))
    presenter.wait_for_selector("[data-testid=room-bar]")
    code = presenter.inner_text("[data-testid=room-code]")

    first = page_at(f"/r/{code}")
    second = page_at(f"/r/{code.lower()}")  # a code typed in lower case finds the same room
    expect(presenter.locator("[data-testid=room-counts]")).to_contain_text("2 here", timeout=15_000)

    replace_code(presenter, PRESENTER_CODE)
    for attendee in (first, second):
        wait_for_code(attendee, PRESENTER_CODE)
        attendee.wait_for_selector("[data-testid=presenter-caret]")
        expect(attendee.locator(".cm-content")).to_have_attribute("contenteditable", "false")

    presenter.click("[data-testid=run]")
    assert wait_for_status(presenter, "ok", "error") == "ok", output_text(presenter)
    for attendee in (first, second):
        expect(attendee.locator("[data-testid=output-log]")).to_contain_text("from the presenter 42", timeout=15_000)
        assert wait_for_status(attendee, "ok") == "ok"
    # Inspect arrives with the presenter's run too: it is the same run's events.
    first.click("#tab-inspect")
    first.wait_for_selector(".inspect-fn[data-fn=double]")

    second.click("[data-testid=room-fork]")
    run_ok(second, FORKED_CODE)
    assert "my own copy 42" in output_text(second)
    expect(presenter.locator("[data-testid=room-counts]")).to_contain_text("1 ran · 0 errors", timeout=15_000)
    # The fork is the attendee's alone: the presenter and the other attendee still have the presenter's code.
    assert editor_code(first) == editor_code(presenter) == PRESENTER_CODE
    assert "my own copy" not in output_text(first)

    presenter.click(".cm-content")
    presenter.keyboard.press("ControlOrMeta+End")
    presenter.keyboard.insert_text("\nprint('more')")
    wait_for_code(first, PRESENTER_CODE + "\nprint('more')")
    assert editor_code(second) == FORKED_CODE  # forked: the presenter's typing does not overwrite it

    second.click("[data-testid=room-follow]")
    wait_for_code(second, PRESENTER_CODE + "\nprint('more')")
    expect(second.locator("[data-testid=output-log]")).to_contain_text("from the presenter")


def test_a_late_joiner_sees_the_current_state_and_the_projector_shows_a_qr_code(page_at):
    presenter = page_at("/")
    replace_code(presenter, "print('before the room')")
    presenter.click("[data-testid=room-menu]")
    presenter.click("[data-testid=room-start]")
    presenter.wait_for_url(re.compile(r"/r/jax-"))
    presenter.wait_for_selector("[data-testid=room-bar]")
    wait_for_code(presenter, "print('before the room')")
    run_ok(presenter, "print('ran before you came')")
    code = presenter.inner_text("[data-testid=room-code]")

    late = page_at(f"/r/{code}")
    wait_for_code(late, "print('ran before you came')")
    expect(late.locator("[data-testid=output-log]")).to_contain_text("ran before you came", timeout=15_000)
    embed = page_at(f"/e/r/{code}")  # the embed view of slides follows the room too
    wait_for_code(embed, "print('ran before you came')")
    expect(embed.locator("[data-testid=output-log]")).to_contain_text("ran before you came", timeout=15_000)
    replace_code(presenter, "print('next example')")
    wait_for_code(embed, "print('next example')")

    presenter.click("[data-testid=room-show]")
    projector = presenter.locator("[data-testid=room-projector]")
    expect(projector).to_contain_text(code)
    assert projector.locator("svg.room-qr path").get_attribute("d").count("h1v1h-1z") > 100
    presenter.keyboard.press("Escape")
    expect(projector).to_have_count(0)


def test_join_by_code_on_the_home_page_and_an_unknown_code(page_at, base_url):
    home = page_at("/")
    home.click("[data-testid=room-menu]")
    home.fill("[data-testid=room-code-input]", "not a code")
    home.click("[data-testid=room-join]")
    expect(home.locator("[data-testid=room-menu-message]")).to_contain_text("looks like jax-")
    home.fill("[data-testid=room-code-input]", "zzzzz zzzzz")  # typed in lower case, with a space
    home.click("[data-testid=room-join]")
    home.wait_for_url(re.compile(r"/r/jax-ZZZZZ-ZZZZZ"))
    expect(home.locator("h1")).to_have_text("No room jax-ZZZZZ-ZZZZZ")


def share(page: Page, base_url: str, code: str, recorded_output: str | None = None) -> str:
    body: dict = {"code": code}
    if recorded_output is not None:
        body["recorded_run"] = [{"type": "stdout", "text": recorded_output},
                                {"type": "done", "status": "ok", "elapsed_ms": 12.0}]
    answer = page.request.post(base_url + "/api/snippets", data=json.dumps(body),
                               headers={"content-type": "application/json"})
    return answer.json()["id"]


def start_room(page: Page) -> str:
    page.click("[data-testid=room-menu]")
    page.click("[data-testid=room-start]")
    page.wait_for_url(re.compile(r"/r/jax-"))
    page.wait_for_selector("[data-testid=room-bar]")
    return page.inner_text("[data-testid=room-code]")


def test_the_deck_editor_builds_the_deck_and_every_member_shows_the_same_slide(page_at, base_url):
    presenter = page_at("/")
    presenter.on("dialog", lambda dialog: (_ for _ in ()).throw(AssertionError(f"a browser dialog: {dialog.message}")))
    first = share(presenter, base_url, "# Slide one\nprint('slide one')", recorded_output="recorded on slide one\n")
    second = share(presenter, base_url, "# Slide two\nprint('slide two')")
    attendee = page_at(f"/r/{start_room(presenter)}")
    run_ok(presenter, "print('before the deck')")
    expect(attendee.locator("[data-testid=output-log]")).to_contain_text("before the deck", timeout=15_000)

    presenter.click("[data-testid=room-deck-set]")
    editor = presenter.locator("[data-testid=room-deck-editor]")
    presenter.fill("[data-testid=room-deck-input]", f"{base_url}/s/{first}, {second}")
    presenter.keyboard.press("Enter")
    presenter.click("[data-testid=room-deck-add-current]")
    slides = editor.locator(".room-deck-slide")
    expect(slides).to_have_count(3)
    expect(slides.nth(0)).to_contain_text("Slide one")
    expect(slides.nth(0)).to_contain_text("with a recorded run")
    expect(slides.nth(2)).to_contain_text("print('before the deck')")
    slides.nth(1).locator("[data-action=preview]").click()
    expect(editor.locator("[data-testid=room-deck-preview]")).to_have_text("# Slide two\nprint('slide two')")
    slides.nth(2).locator("[data-action=up]").click()  # the current code becomes the second slide...
    expect(slides.nth(1)).to_contain_text("before the deck")
    slides.nth(1).locator("[data-action=remove]").click()  # ...and is removed again
    expect(slides).to_have_count(2)
    presenter.click("[data-testid=room-deck-save]")
    expect(editor).to_have_count(0)

    # Slide one, with its recorded run, everywhere; the earlier run's output is gone everywhere.
    for page in (presenter, attendee):
        wait_for_code(page, "# Slide one\nprint('slide one')")
        expect(page.locator("[data-testid=output-log]")).to_have_text("recorded on slide one", timeout=15_000)
        assert wait_for_status(page, "ok") == "ok"
    expect(presenter.locator("[data-testid=room-deck-position]")).to_have_text("1 / 2")
    expect(presenter.locator("[data-testid=room-prev]")).to_be_disabled()
    expect(presenter.locator("[data-testid=room-next]")).to_be_enabled()

    # Slide two has no recorded run: everyone shows an empty output, not the previous program's.
    presenter.click("[data-testid=room-next]")
    for page in (presenter, attendee):
        wait_for_code(page, "# Slide two\nprint('slide two')")
        expect(page.locator("[data-testid=output-log]")).not_to_contain_text("slide one", timeout=15_000)
        expect(page.locator("[data-testid=output-log]")).to_contain_text("Output appears here")
        assert wait_for_status(page, "idle") == "idle"
    expect(attendee.locator("[data-testid=room-deck-position]")).to_have_text("2 / 2")
    expect(presenter.locator("[data-testid=room-next]")).to_be_disabled()
    expect(presenter.locator("[data-testid=room-prev]")).to_be_enabled()


def test_the_deck_editor_says_why_it_rejects_each_entry_and_keeps_them_to_fix(page_at, base_url):
    presenter = page_at("/")
    known = share(presenter, base_url, "# A known slide\nprint(1)")
    start_room(presenter)
    presenter.click("[data-testid=room-deck-set]")
    editor = presenter.locator("[data-testid=room-deck-editor]")
    presenter.fill("[data-testid=room-deck-input]",
                   f"zzz nonexistent123 http://example.com/s/zzz {base_url}/about {base_url}/s/{known}")
    presenter.keyboard.press("Enter")
    slides = editor.locator(".room-deck-slide")
    expect(slides).to_have_count(2)  # zzz (an id of the right form) and the known link
    expect(slides.nth(1)).to_contain_text("A known slide")
    rejected = editor.locator("[data-testid=room-deck-rejected] li")
    expect(rejected).to_have_count(3)
    expect(rejected.nth(0)).to_have_text(re.compile(r"^nonexistent123: malformed: a snippet id has only"))
    expect(rejected.nth(1)).to_have_text(
        "http://example.com/s/zzz: not a link of this server (http://example.com): share it here first")
    expect(rejected.nth(2)).to_have_text(re.compile(r"/about: malformed: a share link ends in /s/"))
    # zzz has the form of an id, but this server has no such snippet: said, and Save waits for a fix.
    expect(editor.locator("[data-testid=room-deck-message]")).to_have_text(re.compile(r"^Unknown link: no snippet zzz"))
    expect(slides.nth(0)).to_contain_text("unknown link")
    expect(editor.locator("[data-testid=room-deck-save]")).to_be_disabled()
    # What was not added stays in the input, to be fixed.
    assert presenter.input_value("[data-testid=room-deck-input]") == \
        f"nonexistent123 http://example.com/s/zzz {base_url}/about"
    presenter.screenshot(path="/tmp/shots-b/deck-rejected-1440.png")
    slides.nth(0).locator("[data-action=remove]").click()
    expect(editor.locator("[data-testid=room-deck-save]")).to_be_enabled()


def test_a_presenter_who_reloads_gets_the_rooms_last_run_back(page_at):
    presenter = page_at("/")
    attendee = page_at(f"/r/{start_room(presenter)}")
    run_ok(presenter, "print('shown to everyone')")
    expect(attendee.locator("[data-testid=output-log]")).to_contain_text("shown to everyone", timeout=15_000)
    presenter.reload()
    presenter.wait_for_selector("[data-testid=room-bar]")
    expect(presenter.locator("[data-testid=output-log]")).to_contain_text("shown to everyone", timeout=15_000)
    assert wait_for_status(presenter, "ok") == "ok"
    assert editor_code(presenter) == "print('shown to everyone')"
    # Still the presenter: the next run goes to the room from the reloaded page.
    run_ok(presenter, "print('after the reload')")
    expect(attendee.locator("[data-testid=output-log]")).to_contain_text("after the reload", timeout=15_000)


def test_a_presenter_link_with_a_wrong_secret_follows_instead(page_at):
    presenter = page_at("/")
    presenter.click("[data-testid=room-menu]")
    presenter.click("[data-testid=room-start]")
    presenter.wait_for_url(re.compile(r"/r/jax-"))
    presenter.wait_for_selector("[data-testid=room-bar]")
    code = presenter.inner_text("[data-testid=room-code]")
    replace_code(presenter, "print('only the presenter edits')")

    forger = page_at(f"/r/{code}#presenter=not-the-secret")
    expect(forger.locator("[data-testid=output-log]")).to_contain_text("has that presenter secret")
    forger.wait_for_selector("[data-testid=room-fork]")
    wait_for_code(forger, "print('only the presenter edits')")
    expect(forger.locator(".cm-content")).to_have_attribute("contenteditable", "false")


def test_an_attendee_whose_connection_drops_comes_back_to_the_same_place(page_at):
    presenter = page_at("/")
    presenter.click("[data-testid=room-menu]")
    presenter.click("[data-testid=room-start]")
    presenter.wait_for_url(re.compile(r"/r/jax-"))
    presenter.wait_for_selector("[data-testid=room-bar]")
    attendee = page_at(f"/r/{presenter.inner_text('[data-testid=room-code]')}")
    replace_code(presenter, "print('before the drop')")
    wait_for_code(attendee, "print('before the drop')")

    # Drop the attendee's socket as a flaky network would; the page reconnects on its own.
    attendee.evaluate("window.jaxplay.connection.socket.close()")
    replace_code(presenter, "print('typed while you were away')")
    attendee.wait_for_selector(".conn[data-state=open]")
    wait_for_code(attendee, "print('typed while you were away')")
    expect(attendee.locator(".cm-content")).to_have_attribute("contenteditable", "false")


def test_a_rooms_short_code_ends_and_its_presenter_moves_it_to_a_new_code(browser):
    """A room of the earlier six-character kind, past --room-short-codes-until: an attendee's page by that code
    is told it ended; its presenter's link moves the room to a new 10-character code, which the address bar
    and the room bar then show, and which an attendee follows."""
    ensure_frontend_built()
    secret, short = "the-old-rooms-presenter-secret", "jax-7Q4KM2"
    with tempfile.TemporaryDirectory(prefix="jaxplay-short-codes-") as data_dir:
        server = LiveServer(Path(data_dir), ["--local-workers", "0", "--room-short-codes-until", "2000-01-01"])
        try:
            server.wait_ready(workers=0)
            with sqlite3.connect(Path(data_dir) / "jaxplay.sqlite3") as db:  # as a room of an earlier version
                db.execute("INSERT INTO rooms (code, secret_digest, created_at, last_active, program, deck, position, "
                           "attendee_timeout_s) VALUES (?, ?, '2026-01-01T00:00:00Z', ?, ?, '[]', 0, 10.0)",
                           (short, secret_digest(secret), time.time(), "print('the old room')"))
            opened = pages_of(browser, server.http_url)
            page_at = next(opened)
            ended = page_at(f"/r/{short}")
            expect(ended.locator("[data-testid=output-log]")).to_contain_text("ended on 2000-01-01")
            presenter = page_at(f"/r/{short}#presenter={secret}")
            presenter.wait_for_url(re.compile(r"/r/jax-[2-9A-Z]{5}-[2-9A-Z]{5}#presenter="))
            code = presenter.evaluate("location.pathname").removeprefix("/r/")
            expect(presenter.locator("[data-testid=room-code]")).to_have_text(code)
            wait_for_code(presenter, "print('the old room')")
            attendee = page_at(f"/r/{code}")
            wait_for_code(attendee, "print('the old room')")
            replace_code(presenter, "print('in the new room')")
            wait_for_code(attendee, "print('in the new room')")
            presenter.reload()  # its kept secret moved with the room
            presenter.wait_for_selector("[data-testid=room-bar]")
            expect(presenter.locator(".cm-content")).to_have_attribute("contenteditable", "true")
            next(opened, None)
        finally:
            server.stop()
