"""How fast room codes may be tried: per socket and client at a person's pace, per network at a classroom's.

Every lookup of a code (a ``room_join`` over /ws, a room's page) tells whether that code is live: each is a
guess, right codes included. So each is paid for before the lookup, and one over a bound is refused before
it, with the same answer whatever the code: a refusal tells nothing. In order (``admit``):

    client    none while its unknown codes are spent (``room_code_misses_per_client_per_hour``, 30)
    network   once its unknown codes are spent (``room_code_misses_per_address_per_hour``, 300: a
              classroom's pace, each of 100 people mistyping thrice), only its clients that missed none
              this hour, at the same pace, each once: such a client's miss spends its whole budget, so a
              guesser's fresh sessions get one try each
    socket    5 tries at once, then 2 a minute: a script on one socket is slowed first
    client    a browser session ``room_joins_per_client_per_hour`` (60; 10 at once). An address
              client (sockets without the session cookie: perhaps many people behind one address, at
              most 8 sockets at once) is bounded by its sockets and its misses

Until a network's unknown codes are spent, a right code is never refused by its bound: what the network
pays for is codes that miss, and a guesser's tries refused by its own bounds spend nothing. A presenter's
join (with its secret) is bounded by its misses alone, so no pace keeps a presenter from its room; a wrong
secret or code is answered exactly as an unknown code, and counted as a miss. The arithmetic (codes, rates, years) is in
docs/security.md. Budgets live in each replica's memory, as every per-address budget does
(server/clients/budgets.py).
"""

from __future__ import annotations

import uuid
import weakref
from typing import Any

from jaxplay.server.clients.budgets import Budgets
from jaxplay.server.clients.identity import is_browser_session
from jaxplay.settings import Settings

SOCKET_BURST = 5
SOCKET_TRIES_PER_HOUR = 120
CLIENT_BURST = 10


class TooManyTries(ValueError):
    """Room codes tried faster than a bound allows: refused before any lookup; the message says how long."""


def network_spent() -> TooManyTries:
    return TooManyTries("Too many unknown room codes were tried from your network in the last hour. Check the code "
                        "with whoever is presenting (or open their link), and try again in a few minutes.")


class JoinLimits:
    def __init__(self, settings: Settings) -> None:
        self.socket_tries = Budgets(per_hour=SOCKET_TRIES_PER_HOUR, capacity=SOCKET_BURST)
        self.client_tries = Budgets(per_hour=settings.room_joins_per_client_per_hour,
                                    capacity=min(CLIENT_BURST, settings.room_joins_per_client_per_hour))
        self.client_misses = Budgets(per_hour=settings.room_code_misses_per_client_per_hour)
        self.network_misses = Budgets(per_hour=settings.room_code_misses_per_address_per_hour)
        # Once a network's misses are spent: the tries of its clients that missed none, at the same pace.
        self.first_tries = Budgets(per_hour=settings.room_code_misses_per_address_per_hour)
        # A key per socket for as long as it lives (an id() may be reused by the next socket).
        self._sockets: weakref.WeakKeyDictionary[Any, str] = weakref.WeakKeyDictionary()

    def admit(self, client: str, network: str, socket: object | None = None, *, presenting: bool = False) -> None:
        """Pay for one lookup of a code by ``client`` of ``network`` over ``socket`` (None: a page); raise
        ``TooManyTries`` instead, spending nothing, when a bound is reached. A presenter's lookup (with its
        secret) answers the same whether the code is live or not, unless the secret is right: only its
        misses bound it."""
        if not self.client_misses.allows(client):
            raise TooManyTries("Too many unknown room codes were tried from this browser in the last hour. Check "
                               "the code with whoever is presenting (or open their link), and try again in a few "
                               "minutes.")
        misses_spent = not self.network_misses.allows(network)
        if misses_spent and self.client_misses.left(client) < self.client_misses.capacity:
            raise network_spent()
        if presenting:
            return
        socket_key = self._socket_key(socket)
        if socket_key is not None and not self.socket_tries.allows(socket_key):
            raise TooManyTries("Room codes were tried too fast on this page: wait a minute, then join again.")
        session = is_browser_session(client)
        if session and not self.client_tries.allows(client):
            raise TooManyTries("This browser tried room codes too often: wait a few minutes, then join again.")
        if misses_spent and not self.first_tries.spend(network):
            raise network_spent()
        if session:
            self.client_tries.spend(client)
        if socket_key is not None:
            self.socket_tries.spend(socket_key)

    def missed(self, client: str, network: str) -> None:
        """A lookup found no room (or the secret did not match): spend the client's and its network's misses.
        Once the network's are spent, the client's whole budget goes with its miss: it tries no more for a
        while, and a guesser's fresh clients get one try each."""
        self.client_misses.spend(client)
        if not self.network_misses.spend(network):
            self.client_misses.spend(client, self.client_misses.left(client))

    def _socket_key(self, socket: object | None) -> str | None:
        if socket is None:
            return None
        key = self._sockets.get(socket)
        if key is None:
            key = self._sockets[socket] = uuid.uuid4().hex
        return key
