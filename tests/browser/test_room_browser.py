"""A workshop room in three real Chromium contexts: a presenter types and runs, two attendees follow, one forks."""

from __future__ import annotations

import json
import re

from playwright.sync_api import Page, expect

from tests.browser.helpers import output_text, replace_code, run_ok, wait_for_status

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


def test_deck_controls_move_every_follower(page_at, base_url):
    presenter = page_at("/")
    ids = []
    for slide in ("print('slide one')", "print('slide two')"):
        answer = presenter.request.post(base_url + "/api/snippets", data=json.dumps({"code": slide}),
                                        headers={"content-type": "application/json"})
        ids.append(answer.json()["id"])
    presenter.click("[data-testid=room-menu]")
    presenter.click("[data-testid=room-start]")
    presenter.wait_for_url(re.compile(r"/r/jax-"))
    presenter.wait_for_selector("[data-testid=room-bar]")
    attendee = page_at(f"/r/{presenter.inner_text('[data-testid=room-code]')}")

    presenter.once("dialog", lambda dialog: dialog.accept(f"{base_url}/s/{ids[0]}, {ids[1]}"))
    presenter.click("[data-testid=room-deck-set]")
    for page in (presenter, attendee):
        wait_for_code(page, "print('slide one')")
    expect(presenter.locator("[data-testid=room-deck-position]")).to_have_text("1 / 2")
    presenter.click("[data-testid=room-next]")
    for page in (presenter, attendee):
        wait_for_code(page, "print('slide two')")
    expect(attendee.locator("[data-testid=room-deck-position]")).to_have_text("2 / 2")


def test_a_presenter_link_with_a_wrong_secret_follows_instead(page_at):
    presenter = page_at("/")
    presenter.click("[data-testid=room-menu]")
    presenter.click("[data-testid=room-start]")
    presenter.wait_for_url(re.compile(r"/r/jax-"))
    presenter.wait_for_selector("[data-testid=room-bar]")
    code = presenter.inner_text("[data-testid=room-code]")
    replace_code(presenter, "print('only the presenter edits')")

    forger = page_at(f"/r/{code}#presenter=not-the-secret")
    expect(forger.locator("[data-testid=output-log]")).to_contain_text("not the presenter secret")
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
