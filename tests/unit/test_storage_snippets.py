"""Snippets in storage: content-derived ids, collisions, forks, validation, immutability."""

from __future__ import annotations

import json

import pytest

from jaxplay.settings import Settings
from server.snippets import MIN_ID_CHARS, SnippetError, SnippetStore, parse_content
from server.storage import Storage

SETTINGS = Settings()
RUN = [{"type": "started", "id": "r1", "backend": "cpu", "devices": {"kind": "cpu", "count": 8}},
       {"type": "stdout", "id": "r1", "text": "2\n"},
       {"type": "done", "id": "r1", "status": "ok", "elapsed_ms": 12.5}]


@pytest.fixture
def storage(tmp_path):
    store = Storage(tmp_path)
    store.open()
    yield store
    store.close()


def content(**fields):
    return parse_content(json.dumps({"code": "print(1 + 1)", **fields}).encode(), SETTINGS)


def test_same_content_same_id_and_different_content_different_id(storage):
    snippets = SnippetStore(storage)
    first, created = snippets.create_sync(content(backend="cpu"))
    again, created_again = snippets.create_sync(content(backend="cpu"))
    assert created and not created_again and first == again
    assert len(first) == MIN_ID_CHARS and first.isalnum() and first == first.lower()
    others = {snippets.create_sync(content(code=f"print({i})"))[0] for i in range(50)}
    others |= {snippets.create_sync(content(backend="gpu"))[0], snippets.create_sync(content(settings={"inspect": False}))[0],
               snippets.create_sync(content(recorded_run=RUN))[0]}
    assert len(others) == 53 and first not in others


def test_colliding_prefixes_are_lengthened_never_reused(storage):
    # One-character ids collide after a few dozen snippets: every content must still get its own id.
    snippets = SnippetStore(storage, min_id_chars=1)
    ids = {}
    for i in range(300):
        snippet_id, created = snippets.create_sync(content(code=f"x = {i}"))
        assert created and snippet_id not in ids.values()
        ids[i] = snippet_id
    assert max(len(i) for i in ids.values()) >= 2
    for i, snippet_id in ids.items():
        assert snippets.load(snippet_id)["code"] == f"x = {i}"
        assert content(code=f"x = {i}").content_hash().startswith(snippet_id)
        assert snippets.create_sync(content(code=f"x = {i}")) == (snippet_id, False)


def test_the_stored_document_is_what_was_shared_and_never_changes(storage, tmp_path):
    snippets = SnippetStore(storage)
    snippet_id, _ = snippets.create_sync(content(backend="cpu", settings={"inspect": True}, recorded_run=RUN,
                                                 recorded_at="2025-05-01T14:00:00+02:00"))
    document = snippets.document(snippet_id)
    loaded = json.loads(document)
    assert list(loaded) == ["id", "created_at", "code", "backend", "settings", "recorded_run", "recorded_at",
                            "forked_from"]
    assert loaded["code"] == "print(1 + 1)" and loaded["settings"] == {"inspect": True}
    assert loaded["recorded_at"] == "2025-05-01T12:00:00Z"
    # The recording browser's run id is dropped; everything else is kept as sent.
    assert loaded["recorded_run"] == [{k: v for k, v in e.items() if k != "id"} for e in RUN]
    storage.close()
    reopened = Storage(tmp_path)
    reopened.open()
    try:
        assert SnippetStore(reopened).document(snippet_id) == document
    finally:
        reopened.close()
        storage.open()


def test_a_fork_remembers_its_parent_and_an_unedited_fork_is_the_parent(storage):
    snippets = SnippetStore(storage)
    parent, _ = snippets.create_sync(content(backend="cpu"))
    child, created = snippets.create_sync(content(code="print(3)", backend="cpu", forked_from=parent))
    assert created and child != parent and snippets.load(child)["forked_from"] == parent
    assert snippets.create_sync(content(backend="cpu", forked_from=parent)) == (parent, False)
    with pytest.raises(SnippetError, match="no snippet") as missing:
        snippets.create_sync(content(code="print(4)", forked_from="aaaaaaaa"))
    assert missing.value.status == 400


def test_unknown_and_malformed_ids_load_nothing(storage):
    snippets = SnippetStore(storage)
    assert snippets.load("abcdefgh") is None
    assert snippets.load("../../etc") is None and snippets.load("ABCDEFGH") is None and snippets.load("") is None


@pytest.mark.parametrize(("body", "status", "words"), [
    (b"{not json", 400, "not valid JSON"),
    (b"[1, 2]", 400, "JSON object"),
    (b'{"code": "1", "title": "x"}', 400, "Unknown field(s) 'title'"),
    (b'{"backend": "cpu"}', 400, "'code' is required"),
    (b'{"code": 5}', 400, "'code' is required"),
    (b'{"code": "   "}', 400, "empty"),
    (b'{"code": "1", "backend": "CPU!"}', 400, "'backend'"),
    (b'{"code": "1", "settings": [1]}', 400, "'settings' must be a JSON object"),
    (b'{"code": "1", "recorded_run": {"type": "done"}}', 400, "list of a run's events"),
    (b'{"code": "1", "recorded_run": [{"type": "stdout", "text": "x"}]}', 400, "end with the run's 'done'"),
    (b'{"code": "1", "recorded_run": [{"text": "x"}, {"type": "done"}]}', 400, "recorded_run[0]"),
    (b'{"code": "1", "recorded_run": [{"type": "done"}, {"type": "done"}]}', 400, "more than one 'done'"),
    (b'{"code": "1", "recorded_at": "2025-01-01T00:00:00Z"}', 400, "only meaningful with"),
    (b'{"code": "1", "recorded_run": [{"type": "done"}], "recorded_at": "yesterday"}', 400, "ISO 8601"),
    (b'{"code": "1", "forked_from": "../x"}', 400, "'forked_from'"),
])
def test_bad_bodies_name_what_to_change(body, status, words):
    with pytest.raises(SnippetError) as error:
        parse_content(body, SETTINGS)
    assert error.value.status == status and words in str(error.value)


def test_limits_answer_413_with_the_limit():
    with pytest.raises(SnippetError, match="256 KiB") as error:
        parse_content(json.dumps({"code": "#" * (256 * 1024 + 1)}).encode(), SETTINGS)
    assert error.value.status == 413
    huge_run = [{"type": "stdout", "text": "x" * (1 << 20)} for _ in range(11)] + [{"type": "done"}]
    with pytest.raises(SnippetError, match="at most 10 MiB") as error:
        parse_content(json.dumps({"code": "1", "recorded_run": huge_run}).encode(), SETTINGS)
    assert error.value.status == 413
    # Just under the limits is fine.
    parse_content(json.dumps({"code": "#" * (256 * 1024), "recorded_run": huge_run[:9] + [{"type": "done"}]}).encode(),
                  SETTINGS)
