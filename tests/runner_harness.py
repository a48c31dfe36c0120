"""Running the in-sandbox runner in a plain subprocess, for unit and fidelity tests.

The runner writes its events to fd 3; ``events_on_fd3`` puts a file there in the child.
"""

from __future__ import annotations

import os
from collections.abc import Callable


def events_on_fd3(fd: int) -> Callable[[], None]:
    """A preexec_fn putting ``fd`` on fd 3 for the child (inheritable even if it already is fd 3)."""
    def move() -> None:
        if fd == 3:
            os.set_inheritable(3, True)
        else:
            os.dup2(fd, 3)
    return move
