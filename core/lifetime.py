"""Processes that end with their parent: Linux's ``PR_SET_PDEATHSIG`` (prctl(2)).

``mmc serve`` starts each child in its own session, so that a Ctrl-C reaches the supervisor
alone and it stops the children in order; a signal to the supervisor's process group, or a
SIGKILL of the supervisor, then reaches none of them. With a parent-death signal each child
is signalled when its parent ends, however it ends. An RQ work horse gets one too: a worker
that is killed takes its running job with it, as RQ's own cold shutdown does.
"""

from __future__ import annotations

import ctypes
import os
import sys
from collections.abc import Callable

PR_SET_PDEATHSIG = 1


def _prctl() -> Callable[..., int] | None:
    if not sys.platform.startswith("linux"):
        return None
    return ctypes.CDLL(None, use_errno=True).prctl


def die_with_parent(sig: int) -> None:
    """Have the kernel send ``sig`` to this process when its parent ends (nothing where prctl
    does not exist); at once if the parent has already ended."""
    when_parent_ends(sig, os.getppid())()


def when_parent_ends(sig: int, parent_pid: int | None = None) -> Callable[[], None]:
    """A function that asks for ``sig`` when the parent ends, for :class:`subprocess.Popen`'s
    ``preexec_fn`` (prctl is looked up here, before the fork, so the child only calls it).
    ``parent_pid``: the parent meant (default: this process, the one about to fork); when the
    caller's parent is no longer it, the signal is sent at once."""
    prctl = _prctl()
    expected = os.getpid() if parent_pid is None else parent_pid

    def ask() -> None:
        if prctl is None or prctl(PR_SET_PDEATHSIG, sig, 0, 0, 0) != 0:
            return
        if os.getppid() != expected:  # adopted before the call: the parent is gone
            os.kill(os.getpid(), sig)

    return ask
