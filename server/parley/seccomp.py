"""The seccomp filter every sandboxed child runs under: no Unix-domain sockets.

A socket file is reachable through any directory the sandbox leaves readable (the user's
ssh-agent, gpg-agent, the session D-Bus, `docker.sock`, an editor's server), and bubblewrap's
mounts can only hide the places Parley knows of; `--unshare-net` closes the abstract ones
only. So, as openai/codex's Linux sandbox does, a filter decides by the socket's family:
`socket(AF_UNIX, …)` fails with EACCES, whatever the path it would connect to. Internet
sockets are left to the network namespace (none but loopback unless the network is
allowed); `socketpair` (an unnamed pair, connected to nothing outside) still works, and so
do pipes. `io_uring_setup` fails too (ENOSYS): io_uring can create a socket without the
`socket` system call. A call from another architecture's ABI (32-bit `int 0x80`, x32) ends
the process: there, `socketcall` could do what `socket` does.

The program is classic BPF, written here (a dozen instructions; no library offers a stable
way to build one from Python), handed to bwrap's `--seccomp FD` from a file.
"""

from __future__ import annotations

import atexit
import functools
import os
import platform
import shutil
import struct
import tempfile
from pathlib import Path

# <linux/filter.h>, <linux/seccomp.h>, <linux/audit.h>
BPF_LD_W_ABS = 0x20  # BPF_LD | BPF_W | BPF_ABS
BPF_JEQ_K = 0x15  # BPF_JMP | BPF_JEQ | BPF_K
BPF_JSET_K = 0x45  # BPF_JMP | BPF_JSET | BPF_K
BPF_RET_K = 0x06  # BPF_RET | BPF_K
SECCOMP_RET_ALLOW = 0x7FFF0000
SECCOMP_RET_ERRNO = 0x00050000
SECCOMP_RET_KILL_PROCESS = 0x80000000
EACCES = 13
ENOSYS = 38
AF_UNIX = 1
X32_SYSCALL_BIT = 0x40000000
# struct seccomp_data: int nr; __u32 arch; __u64 instruction_pointer; __u64 args[6].
NR_OFFSET, ARCH_OFFSET, FIRST_ARGUMENT_OFFSET = 0, 4, 16  # args[0]'s low word (little-endian)


# The architectures Parley knows the numbers of: (AUDIT_ARCH_*, socket, io_uring_setup,
# whether x32's bit must be refused).
ARCHITECTURES = {
    "x86_64": (0xC000003E, 41, 425, True),
    "aarch64": (0xC00000B7, 198, 425, False),
}


def _instruction(code: int, jump_true: int, jump_false: int, value: int) -> bytes:
    return struct.pack("<HBBI", code, jump_true, jump_false, value)


def program(machine: str) -> bytes | None:
    """The filter for `machine` (as `platform.machine()` says), or None for one Parley does
    not know the system call numbers of."""
    known = ARCHITECTURES.get(machine)
    if known is None:
        return None
    audit_arch, socket_nr, io_uring_setup_nr, refuse_x32 = known
    kill = _instruction(BPF_RET_K, 0, 0, SECCOMP_RET_KILL_PROCESS)
    allow = _instruction(BPF_RET_K, 0, 0, SECCOMP_RET_ALLOW)
    refuse_socket = _instruction(BPF_RET_K, 0, 0, SECCOMP_RET_ERRNO | EACCES)
    no_io_uring = _instruction(BPF_RET_K, 0, 0, SECCOMP_RET_ERRNO | ENOSYS)
    # Laid out top to bottom; each jump counts the instructions it skips.
    checks = [
        _instruction(BPF_LD_W_ABS, 0, 0, ARCH_OFFSET),
        _instruction(BPF_JEQ_K, 1, 0, audit_arch),  # this architecture: go on
        kill,
        _instruction(BPF_LD_W_ABS, 0, 0, NR_OFFSET),
    ]
    if refuse_x32:
        checks += [_instruction(BPF_JSET_K, 0, 1, X32_SYSCALL_BIT), kill]
    checks += [
        _instruction(BPF_JEQ_K, 0, 1, io_uring_setup_nr),
        no_io_uring,
        _instruction(BPF_JEQ_K, 0, 3, socket_nr),  # not socket(): allow
        _instruction(BPF_LD_W_ABS, 0, 0, FIRST_ARGUMENT_OFFSET),
        _instruction(BPF_JEQ_K, 0, 1, AF_UNIX),
        refuse_socket,
        allow,
    ]
    return b"".join(checks)


@functools.cache
def filter_file() -> Path | None:
    """A file holding this machine's filter (written once per process, in a directory of
    its own, removed at exit), or None where there is none."""
    compiled = program(platform.machine())
    if compiled is None:
        return None
    directory = Path(tempfile.mkdtemp(prefix="parley-seccomp-"))
    atexit.register(shutil.rmtree, directory, True)
    path = directory / "no-unix-sockets.bpf"
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o444)
    with os.fdopen(descriptor, "wb") as file:
        file.write(compiled)
    # Readable by all (nothing in it is secret), writable by none, in a directory only its
    # owner may change: no one else can put another filter in its place.
    directory.chmod(0o755)
    return path
