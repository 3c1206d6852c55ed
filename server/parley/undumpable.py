"""`make_undumpable`: a process whose environment holds the user's keys hides it from the
user's other processes. Its own module, standard library only, so that `parley serve`'s thin
client (`warm_start`) can call it without importing the launcher."""

from __future__ import annotations

import ctypes

PR_SET_DUMPABLE = 4  # from <linux/prctl.h>


def make_undumpable() -> bool:
    """PR_SET_DUMPABLE=0 on this process: its /proc/<pid>/environ and memory become root's
    and need CAP_SYS_PTRACE to read, so a child without it cannot read the server's keys."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return bool(libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) == 0)
    except (OSError, AttributeError):  # not Linux
        return False
