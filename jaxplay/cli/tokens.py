"""``jaxplay tokens add|list|remove``: the tokens coding assistants present at /mcp.

Each works on the store ``--data-dir`` / ``--database-url`` name, beside a
running server (which looks tokens up on every request, so a removal takes
effect at once). ``add`` prints the token as its last line, once: only its
hash is kept (server/agents/tokens.py).
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Callable

from jaxplay.settings import TOKENS, Settings


def add_parser(commands: argparse._SubParsersAction, add_setting_flags: Callable[..., None]) -> None:
    tokens = commands.add_parser(TOKENS, help="Issue, list and revoke the tokens coding assistants use at /mcp.")
    actions = tokens.add_subparsers(dest="action", required=True)
    add = actions.add_parser("add", help="Issue a token and print it (its last line); only its hash is stored.")
    add.add_argument("name", metavar="NAME", help="Who the token is for, e.g. alice-laptop.")
    add_setting_flags(add, TOKENS)
    listing = actions.add_parser("list", help="The names tokens were issued to, and when.")
    add_setting_flags(listing, TOKENS)
    remove = actions.add_parser("remove", help="Revoke a token: the next request that presents it is refused.")
    remove.add_argument("name", metavar="NAME")
    add_setting_flags(remove, TOKENS)


def run(args: argparse.Namespace, settings: Settings) -> None:
    from jaxplay.server.agents.tokens import TokenError, TokenStore
    from jaxplay.server.storage.factory import open_storage
    from jaxplay.server.storage.interface import StorageError

    async def main() -> int:
        storage = open_storage(settings.database_url, settings.data_dir)
        await storage.open()
        try:
            store = TokenStore(storage)
            if args.action == "add":
                token = await store.add(args.name)
                print(f"Token for {args.name!r} (shown once; send it as 'Authorization: Bearer <token>' to /mcp):")
                print(token)
            elif args.action == "list":
                issued = await store.listing()
                if not issued:
                    print("No tokens issued. Issue one with: jaxplay tokens add NAME")
                for entry in issued:
                    print(f"{entry.name}\tissued {entry.created_at}")
            elif not await store.remove(args.name):
                print(f"No token is named {args.name!r}; `jaxplay tokens list` shows the names.", file=sys.stderr)
                return 1
            else:
                print(f"Removed the token {args.name!r}: it is refused from its next request on.")
            return 0
        finally:
            await storage.close()

    try:
        sys.exit(asyncio.run(main()))
    except (TokenError, StorageError, ValueError, OSError) as exc:
        print(f"jaxplay tokens: {exc}", file=sys.stderr)
        sys.exit(2)
