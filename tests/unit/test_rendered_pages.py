"""A snippet's page is rendered once however many ask for it at once, and kept within a bound.

Any site may frame ``/e/<id>``, so a page of a large recorded run (most of a second of the event loop
to render) could be asked for twenty times at once by one hostile page.
"""

from __future__ import annotations

import asyncio

import pytest

from jaxplay.server.sharing.serve import RenderedPages


def test_pages_asked_for_at_once_are_rendered_once_and_then_kept():
    async def scenario() -> None:
        pages = RenderedPages(max_bytes=1000)
        renders: list[str] = []

        async def render() -> str:
            renders.append("page")
            await asyncio.sleep(0.05)
            return "x" * 100

        answers = await asyncio.gather(*(pages.get(("a", "embed"), render) for _ in range(20)))
        assert answers == ["x" * 100] * 20 and renders == ["page"]
        assert await pages.get(("a", "embed"), render) == "x" * 100 and renders == ["page"]
    asyncio.run(scenario())


def test_the_kept_pages_stay_within_their_bytes_and_the_least_recently_served_goes_first():
    async def scenario() -> None:
        pages = RenderedPages(max_bytes=1000)

        def page(text: str):
            async def render() -> str:
                return text
            return render

        for key in "abcd":
            await pages.get((key,), page(key * 240))
        await pages.get(("a",), page("never"))  # served from the kept pages: now the most recent
        await pages.get(("e",), page("e" * 240))
        assert list(pages.pages) == [("c",), ("d",), ("a",), ("e",)] and pages.bytes <= 1000
        assert await pages.get(("big",), page("b" * 251)) == "b" * 251  # over a quarter: served, not kept
        assert ("big",) not in pages.pages
    asyncio.run(scenario())


def test_a_missing_page_or_a_failed_render_is_not_kept():
    async def scenario() -> None:
        pages = RenderedPages()

        async def missing() -> None:
            return None

        async def failing() -> str:
            raise RuntimeError("the database is away")

        assert await pages.get(("gone",), missing) is None
        with pytest.raises(RuntimeError):
            await pages.get(("x",), failing)
        assert not pages.pages and not pages.rendering
    asyncio.run(scenario())
