"""One backend's waiting runs, served fairly between clients, and an honest estimate of each wait.

Order of service::

    priority lane (room presenters), first come first served
    then every other client in turn: one run from each client that has runs
    waiting, in the order the clients first queued, then round again

A client is a browser session (``Run.session_id``). A client that queues a
hundred runs therefore gets one in turn like everyone else: a run another
client queues behind that flood waits for at most one more run to start
first. The order is a pure function of what is queued, so the position each
run is told is exactly the order in which it will start, unless something
is cancelled or a presenter's run arrives.

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
    priority: bool


R = TypeVar("R", bound=Queued)


class FairQueue(Generic[R]):
    def __init__(self) -> None:
        self.priority: deque[R] = deque()
        # Clients with runs waiting, in service order; the head is served next.
        self.clients: OrderedDict[str, deque[R]] = OrderedDict()
        self._length = 0

    def __len__(self) -> int:
        return self._length

    def __bool__(self) -> bool:
        return self._length > 0

    def __iter__(self) -> Iterator[R]:
        """Every waiting run, in the order it will be served."""
        yield from self.priority
        depth = max((len(runs) for runs in self.clients.values()), default=0)
        for turn in range(depth):
            for runs in self.clients.values():
                if turn < len(runs):
                    yield runs[turn]

    def __contains__(self, run: object) -> bool:
        if not isinstance(run, Queued):
            return False
        lane = self.priority if run.priority else self.clients.get(run.session_id, ())
        return any(waiting is run for waiting in lane)

    def append(self, run: R) -> None:
        if run.priority:
            self.priority.append(run)
        else:
            # A client new to the queue joins the end of the round: it is served after
            # everyone already waiting has had one more turn, never before.
            self.clients.setdefault(run.session_id, deque()).append(run)
        self._length += 1

    def popleft(self) -> R:
        if self.priority:
            self._length -= 1
            return self.priority.popleft()
        if not self.clients:
            raise IndexError("pop from an empty FairQueue")
        session_id, runs = next(iter(self.clients.items()))
        run = runs.popleft()
        if runs:
            self.clients.move_to_end(session_id)  # its turn is used: back of the round
        else:
            del self.clients[session_id]
        self._length -= 1
        return run

    def remove(self, run: R) -> None:
        if run.priority:
            self.priority.remove(run)
        else:
            runs = self.clients[run.session_id]
            runs.remove(run)
            if not runs:
                del self.clients[run.session_id]
        self._length -= 1

    def heaviest(self) -> R | None:
        """The newest waiting run of the client with the most runs waiting (never a presenter's)."""
        runs = max(self.clients.values(), key=len, default=None)
        return runs[-1] if runs else None

    def count_for(self, session_id: str) -> int:
        return len(self.clients.get(session_id, ())) + sum(1 for r in self.priority if r.session_id == session_id)


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
