"""One backend's waiting runs, served fairly between networks and clients, and an honest estimate of each wait.

Order of service::

    priority lane (room presenters: one run per network at a time, server/rooms/room_runs.py),
    first come first served
    then every network in turn: one run from each network that has runs
    waiting, in the order the networks first queued, then round again;
    within a network, its clients in turn the same way

A client is a browser session, or the address client of a network's
connections without one (``Run.session_id``, server/clients/identity.py);
a network is its IPv4 address or IPv6 /48 (``Run.network``). A client that
queues a hundred runs therefore gets one in turn like everyone else, and so
does a network whatever number of sessions a script there has minted: a run
queued behind such a flood waits for at most one more run of the flooding
network to start first (and, from inside that network, one of each of its
other clients). A classroom behind one NAT shares its network's turns among
its browsers. The order is a pure function of what is queued, so the
position each run is told is exactly the order in which it will start,
unless something is cancelled or a presenter's run arrives.

The wait estimate replays that order on the backend's slots, using the mean
of recently finished runs' durations (measured from start to done), and the
time the runs now running have already used.
"""

from __future__ import annotations

import heapq
from collections import OrderedDict, deque
from collections.abc import Iterator
from typing import Generic, Protocol, TypeVar, runtime_checkable

# How many finished runs the wait estimate averages over.
RECENT_RUNS = 20


@runtime_checkable
class Queued(Protocol):
    session_id: str
    network: str
    priority: bool


R = TypeVar("R", bound=Queued)


def _in_turns(sequences: list[list[R]]) -> Iterator[R]:
    """Round robin: the first of each sequence, then the second of each, and so on."""
    depth = max((len(items) for items in sequences), default=0)
    for turn in range(depth):
        for items in sequences:
            if turn < len(items):
                yield items[turn]


class FairQueue(Generic[R]):
    def __init__(self) -> None:
        self.priority: deque[R] = deque()
        # Networks with runs waiting, in service order, each with its clients in service order; heads go next.
        self.networks: OrderedDict[str, OrderedDict[str, deque[R]]] = OrderedDict()
        self._length = 0

    def __len__(self) -> int:
        return self._length

    def __bool__(self) -> bool:
        return self._length > 0

    def __iter__(self) -> Iterator[R]:
        """Every waiting run, in the order it will be served."""
        yield from self.priority
        yield from _in_turns([list(_in_turns([list(runs) for runs in clients.values()]))
                              for clients in self.networks.values()])

    def __contains__(self, run: object) -> bool:
        if not isinstance(run, Queued):
            return False
        lane = self.priority if run.priority else self.networks.get(run.network, {}).get(run.session_id, ())
        return any(waiting is run for waiting in lane)

    def append(self, run: R) -> None:
        if run.priority:
            self.priority.append(run)
        else:
            # A network (or a client within one) new to the queue joins the end of the round: it is
            # served after everyone already waiting has had one more turn, never before.
            self.networks.setdefault(run.network, OrderedDict()).setdefault(run.session_id, deque()).append(run)
        self._length += 1

    def popleft(self) -> R:
        if self.priority:
            self._length -= 1
            return self.priority.popleft()
        if not self.networks:
            raise IndexError("pop from an empty FairQueue")
        network, clients = next(iter(self.networks.items()))
        session_id, runs = next(iter(clients.items()))
        run = runs.popleft()
        if runs:
            clients.move_to_end(session_id)  # its turn is used: back of its network's round
        else:
            del clients[session_id]
        if clients:
            self.networks.move_to_end(network)
        else:
            del self.networks[network]
        self._length -= 1
        return run

    def remove(self, run: R) -> None:
        if run.priority:
            self.priority.remove(run)
        else:
            clients = self.networks[run.network]
            runs = clients[run.session_id]
            runs.remove(run)
            if not runs:
                del clients[run.session_id]
            if not clients:
                del self.networks[run.network]
        self._length -= 1

    def heaviest(self) -> R | None:
        """The newest waiting run of the busiest client of the network with the most runs waiting
        (never a presenter's)."""
        clients = max(self.networks.values(), key=lambda c: sum(map(len, c.values())), default=None)
        if clients is None:
            return None
        return max(clients.values(), key=len)[-1]

    def count_for(self, session_id: str, network: str) -> int:
        """Runs waiting of this client, presenters' lane included."""
        waiting = self.networks.get(network, {}).get(session_id, ())
        return len(waiting) + sum(1 for r in self.priority if r.session_id == session_id)

    def count_for_network(self, network: str) -> int:
        return sum(map(len, self.networks.get(network, {}).values()))


class RunDurations:
    """Recent run durations of one backend, and what they predict for the queue."""

    def __init__(self, keep: int = RECENT_RUNS) -> None:
        self.recent: deque[float] = deque(maxlen=keep)

    def record(self, seconds: float) -> None:
        self.recent.append(max(seconds, 0.0))

    @property
    def mean_s(self) -> float | None:
        return sum(self.recent) / len(self.recent) if self.recent else None

    def waits(self, queued: int, slots: int, running_for_s: list[float]) -> list[float | None]:
        """Estimated seconds until each of ``queued`` runs starts, in queue order (None: no history yet).

        List scheduling: each slot is free when its current run should end
        (the mean duration less the time already used, at least 0); each
        queued run takes the slot that frees first.
        """
        mean = self.mean_s
        if mean is None or slots <= 0:
            return [None] * queued
        free_at = [max(mean - used, 0.0) for used in running_for_s[:slots]]
        free_at += [0.0] * (slots - len(free_at))
        heapq.heapify(free_at)
        waits: list[float | None] = []
        for _ in range(queued):
            start = heapq.heappop(free_at)
            waits.append(start)
            heapq.heappush(free_at, start + mean)
        return waits
