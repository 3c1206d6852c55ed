"""The seccomp filter every sandboxed child runs under: no Unix-domain sockets, no keyrings.

A socket file is reachable through any directory the sandbox leaves readable (the user's
ssh-agent, gpg-agent, the session D-Bus, `docker.sock`, journald's `/dev/log`), and
bubblewrap's mounts can only hide the places Parley knows of; `--unshare-net` closes the
abstract ones only. So, as openai/codex's Linux sandbox does, a filter decides by the
socket's family: `socket(AF_UNIX, …)` fails with EACCES, whatever the path it would reach.
`socketpair` still works for the types that connect only the pair's two ends (stream and
seqpacket: pipes for asyncio, multiprocessing); a datagram pair could `sendto` any socket
file, so it is refused too. Internet sockets are left to the network namespace (none but
loopback unless the network is allowed).

Also refused: the kernel's keyrings (`add_key`, `request_key`, `keyctl`: the server's session
keyring may hold a Kerberos ticket or a key, as container runtimes refuse them) and
`io_uring_setup` (io_uring can create a socket without the `socket` system call). A call
from another architecture's ABI (32-bit `int 0x80`, x32) ends the process: there,
`socketcall` could do what `socket` does.

The program is classic BPF, written here (a few dozen instructions; no library offers a
stable way to build one from Python), handed to bwrap's `--seccomp FD` from a file that no
child can reach (`filter_file`).
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

import attrs

# <linux/filter.h>, <linux/seccomp.h>, <linux/audit.h>
BPF_LD_W_ABS = 0x20  # BPF_LD | BPF_W | BPF_ABS
BPF_JEQ_K = 0x15  # BPF_JMP | BPF_JEQ | BPF_K
BPF_JSET_K = 0x45  # BPF_JMP | BPF_JSET | BPF_K
BPF_AND_K = 0x54  # BPF_ALU | BPF_AND | BPF_K
BPF_RET_K = 0x06  # BPF_RET | BPF_K
SECCOMP_RET_ALLOW = 0x7FFF0000
SECCOMP_RET_ERRNO = 0x00050000
SECCOMP_RET_KILL_PROCESS = 0x80000000
EPERM, EACCES, ENOSYS = 1, 13, 38
AF_UNIX = 1
SOCK_STREAM, SOCK_SEQPACKET, SOCK_TYPE_MASK = 1, 5, 0xF
X32_SYSCALL_BIT = 0x40000000
# struct seccomp_data: int nr; __u32 arch; __u64 instruction_pointer; __u64 args[6].
NR_OFFSET, ARCH_OFFSET = 0, 4
ARGUMENT_OFFSETS = (16, 24)  # args[0]'s and args[1]'s low words (little-endian)


@attrs.frozen
class Architecture:
    """The numbers Parley's filter needs of one architecture."""

    audit_arch: int  # AUDIT_ARCH_*
    socket: int
    socketpair: int
    refused: tuple[tuple[int, int], ...]  # (system call, errno)
    refuse_x32: bool = False


ARCHITECTURES = {
    # add_key 248, request_key 249, keyctl 250, io_uring_setup 425
    "x86_64": Architecture(
        0xC000003E, 41, 53, ((248, EPERM), (249, EPERM), (250, EPERM), (425, ENOSYS)), True
    ),
    # add_key 217, request_key 218, keyctl 219, io_uring_setup 425
    "aarch64": Architecture(
        0xC00000B7, 198, 199, ((217, EPERM), (218, EPERM), (219, EPERM), (425, ENOSYS))
    ),
}


def _instruction(code: int, jump_true: int, jump_false: int, value: int) -> bytes:
    return struct.pack("<HBBI", code, jump_true, jump_false, value)


def _load(offset: int) -> bytes:
    return _instruction(BPF_LD_W_ABS, 0, 0, offset)


def _returns(action: int) -> bytes:
    return _instruction(BPF_RET_K, 0, 0, action)


def _refusing(number: int, errno: int) -> list[bytes]:
    """The call `number` fails with `errno` (the call's number is loaded)."""
    return [_instruction(BPF_JEQ_K, 0, 1, number), _returns(SECCOMP_RET_ERRNO | errno)]


def program(machine: str) -> bytes | None:
    """The filter for `machine` (as `platform.machine()` says), or None for one Parley does
    not know the system call numbers of. Each jump counts the instructions it skips."""
    known = ARCHITECTURES.get(machine)
    if known is None:
        return None
    kill, allow = _returns(SECCOMP_RET_KILL_PROCESS), _returns(SECCOMP_RET_ALLOW)
    refuse_socket = _returns(SECCOMP_RET_ERRNO | EACCES)
    checks = [_load(ARCH_OFFSET), _instruction(BPF_JEQ_K, 1, 0, known.audit_arch), kill]
    checks.append(_load(NR_OFFSET))
    if known.refuse_x32:
        checks += [_instruction(BPF_JSET_K, 0, 1, X32_SYSCALL_BIT), kill]
    for number, errno in known.refused:
        checks += _refusing(number, errno)
    checks += [
        # socket(AF_UNIX, …): refused
        _instruction(BPF_JEQ_K, 0, 4, known.socket),
        _load(ARGUMENT_OFFSETS[0]),
        _instruction(BPF_JEQ_K, 0, 1, AF_UNIX),
        refuse_socket,
        allow,
        # socketpair(…, type, …): only stream and seqpacket pairs
        _instruction(BPF_JEQ_K, 0, 5, known.socketpair),
        _load(ARGUMENT_OFFSETS[1]),
        _instruction(BPF_AND_K, 0, 0, SOCK_TYPE_MASK),  # without SOCK_NONBLOCK, SOCK_CLOEXEC
        _instruction(BPF_JEQ_K, 2, 0, SOCK_STREAM),
        _instruction(BPF_JEQ_K, 1, 0, SOCK_SEQPACKET),
        refuse_socket,
        allow,
    ]
    return b"".join(checks)


@functools.cache
def filter_file() -> Path | None:
    """A file holding this machine's filter (written once per process, removed at exit), or
    None where there is none. It lies where no child can reach it, so none can put another
    filter in its place for the next child: the user's runtime directory (hidden in the
    sandbox), else `/dev/shm` (the sandbox's `/dev` is its own), else `/tmp` (private; and
    no root may be `/tmp` itself) — never `TMPDIR`, which may lie in a root."""
    compiled = program(platform.machine())
    if compiled is None:
        return None
    directory = Path(tempfile.mkdtemp(prefix="parley-seccomp-", dir=_unreachable_directory()))
    atexit.register(shutil.rmtree, directory, True)
    path = directory / "filter.bpf"
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o444)
    with os.fdopen(descriptor, "wb") as file:
        file.write(compiled)
    # Readable by all (nothing in it is secret), writable by none, in a directory only its
    # owner may change.
    directory.chmod(0o755)
    return path


def _unreachable_directory() -> str:
    runtime = os.environ.get("XDG_RUNTIME_DIR", "")
    for candidate in (runtime, "/dev/shm", "/tmp"):
        if candidate and os.path.isabs(candidate) and os.access(candidate, os.W_OK | os.X_OK):
            return candidate
    return tempfile.gettempdir()
