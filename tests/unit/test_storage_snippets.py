"""Snippets in storage (SQLite and a real PostgreSQL): content-derived ids, collisions, forks, validation,
immutability."""

from __future__ import annotations

import asyncio
import json

import pytest

from jaxplay.server.sharing.snippets import MIN_ID_CHARS, SnippetError, SnippetStore, parse_content
from jaxplay.server.storage.factory import open_storage
from jaxplay.server.storage.postgres import PostgresStorage
from jaxplay.settings import Settings

SETTINGS = Settings()
RUN = [{"type": "started", "id": "r1", "backend": "cpu", "devices": {"kind": "cpu", "count": 8}},
       {"type": "stdout", "id": "r1", "text": "2\n"},
       {"type": "done", "id": "r1", "status": "ok", "elapsed_ms": 12.5}]


def content(**fields):
    return parse_content(json.dumps({"code": "print(1 + 1)", **fields}).encode(), SETTINGS)


def with_snippets(database_url, tmp_path, scenario, **options):
    """Run ``scenario(snippets)`` against a freshly opened store, in one event loop."""
    async def main():
        storage = open_storage(database_url, tmp_path)
        await storage.open()
        try:
            return await scenario(SnippetStore(storage, **options))
        finally:
            await storage.close()

    return asyncio.run(main())


def test_same_content_same_id_and_different_content_different_id(database_url, tmp_path):
    async def scenario(snippets):
        first, created = await snippets.create(content(backend="cpu"))
        again, created_again = await snippets.create(content(backend="cpu"))
        assert created and not created_again and first == again
        assert len(first) == MIN_ID_CHARS and first.isalnum() and first == first.lower()
        others = {(await snippets.create(content(code=f"print({i})")))[0] for i in range(50)}
        for variant in (content(backend="gpu"), content(settings={"inspect": False}), content(recorded_run=RUN)):
            others.add((await snippets.create(variant))[0])
        assert len(others) == 53 and first not in others
        assert snippets.created == 54

    with_snippets(database_url, tmp_path, scenario)


def test_colliding_prefixes_are_lengthened_never_reused(database_url, tmp_path):
    # One-character ids collide after a few dozen snippets: every content must still get its own id.
    async def scenario(snippets):
        ids = {}
        for i in range(200):
            snippet_id, created = await snippets.create(content(code=f"x = {i}"))
            assert created and snippet_id not in ids.values()
            ids[i] = snippet_id
        assert max(len(i) for i in ids.values()) >= 2
        for i, snippet_id in ids.items():
            assert (await snippets.load(snippet_id))["code"] == f"x = {i}"
            assert content(code=f"x = {i}").content_hash().startswith(snippet_id)
            assert await snippets.create(content(code=f"x = {i}")) == (snippet_id, False)

    with_snippets(database_url, tmp_path, scenario, min_id_chars=1)


def test_the_stored_document_is_what_was_shared_and_never_changes(database_url, tmp_path):
    async def share(snippets):
        snippet_id, _ = await snippets.create(content(backend="cpu", settings={"inspect": True}, recorded_run=RUN,
                                                      recorded_at="2025-05-01T14:00:00+02:00"))
        return snippet_id, await snippets.document(snippet_id)

    snippet_id, document = with_snippets(database_url, tmp_path, share)
    loaded = json.loads(document)
    assert list(loaded) == ["id", "created_at", "code", "backend", "settings", "recorded_run", "recorded_at",
                            "forked_from"]
    assert loaded["code"] == "print(1 + 1)" and loaded["settings"] == {"inspect": True}
    assert loaded["recorded_at"] == "2025-05-01T12:00:00Z"
    # The recording browser's run id is dropped; everything else is kept as sent.
    assert loaded["recorded_run"] == [{k: v for k, v in e.items() if k != "id"} for e in RUN]

    async def reread(snippets):
        return await snippets.document(snippet_id)

    assert with_snippets(database_url, tmp_path, reread) == document  # after closing and opening again


def test_a_fork_remembers_its_parent_and_an_unedited_fork_is_the_parent(database_url, tmp_path):
    async def scenario(snippets):
        parent, _ = await snippets.create(content(backend="cpu"))
        child, created = await snippets.create(content(code="print(3)", backend="cpu", forked_from=parent))
        assert created and child != parent and (await snippets.load(child))["forked_from"] == parent
        assert await snippets.create(content(backend="cpu", forked_from=parent)) == (parent, False)
        with pytest.raises(SnippetError, match="no snippet") as missing:
            await snippets.create(content(code="print(4)", forked_from="aaaaaaaa"))
        assert missing.value.status == 400

    with_snippets(database_url, tmp_path, scenario)


def test_unknown_and_malformed_ids_load_nothing(database_url, tmp_path):
    async def scenario(snippets):
        assert await snippets.load("abcdefgh") is None
        for bad in ("../../etc", "ABCDEFGH", ""):
            assert await snippets.load(bad) is None

    with_snippets(database_url, tmp_path, scenario)


def test_two_replicas_sharing_the_same_content_at_once_make_one_link(postgres):
    url = postgres.new_database()

    async def scenario():
        replicas = [PostgresStorage(url) for _ in range(2)]
        await asyncio.gather(*(r.open() for r in replicas))
        try:
            results = await asyncio.gather(*(SnippetStore(r).create(content(code=f"print({i % 5})"))
                                             for i in range(20) for r in replicas))
        finally:
            await asyncio.gather(*(r.close() for r in replicas))
        return results

    results = asyncio.run(scenario())
    assert len({snippet_id for snippet_id, _ in results}) == 5
    assert sum(created for _, created in results) == 5


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
    # Times that exist but have no UTC equivalent inside the calendar: a 500 (OverflowError) before.
    (b'{"code": "1", "recorded_run": [{"type": "done"}], "recorded_at": "9999-12-31T23:59:59-23:59"}', 400,
     "ISO 8601"),
    (b'{"code": "1", "recorded_run": [{"type": "done"}], "recorded_at": "0001-01-01T00:00:00+23:59"}', 400,
     "ISO 8601"),
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
    # A page writes < as \u003c: two MiB of it is twelve in the page (a 60 MiB page from 10 MiB of "<").
    angled = [{"type": "stdout", "text": "<" * (2 << 20)}, {"type": "done"}]
    with pytest.raises(SnippetError, match="as a page shows it"):
        parse_content(json.dumps({"code": "1", "recorded_run": angled}).encode(), SETTINGS)
