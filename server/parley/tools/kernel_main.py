"""The Python kernel's own process: a persistent namespace the agent can run and inspect code in.

Parley starts this file by path under the *workspace's* interpreter (see `kernel.py`), so it
uses the standard library only and stays compatible with older Pythons (3.8+).

Wire protocol (one JSON object per line):
  parent -> kernel, on stdin:  {"id": 7, "op": "eval", "args": {"code": "1 + 1"}}
  kernel -> parent, on stdout: {"id": 7, "ok": true, "result": {...}, "stdout": "", "stderr": ""}
                               or {"id": 7, "ok": false, "error": {...}, ...}
Before the first request the kernel sends {"ready": true, ...}. After startup, file descriptors
0 and 1 no longer belong to user code: stdin reads /dev/null, and fd 1 is joined to fd 2 (the
parent's stderr pipe), where output written below `sys.stdout` (subprocesses, C code) lands.
After each request the kernel writes an end marker to fd 2 so the parent knows it has seen all
of that request's fd-level output. The kernel exits when its stdin closes or its parent dies.

The parent starts the kernel as the leader of a process group of its own. On Linux the kernel
asks to be SIGKILLed when its parent dies (PR_SET_PDEATHSIG), and forks a small watcher that
SIGKILLs the whole group when the kernel dies, however it dies, so nothing the user's code
started outlives it. In Parley's sandbox (`--sandboxed`: bubblewrap, a PID namespace whose
first process after bwrap's init is the kernel) the server is not visible; bwrap ends the
namespace when the server goes, and the watcher ends every process of the namespace, `setsid`
or not, when the kernel goes.

Each request runs under a CPU-time cap (RLIMIT_CPU relative to the time used so far); at the
cap SIGXCPU raises CPUTimeLimitExceeded in the user's code.
"""

from __future__ import annotations

import argparse
import ast
import builtins
import contextlib
import faulthandler
import inspect
import io
import json
import linecache
import math
import os
import re
import signal
import sys
import threading
import time
import traceback
import types
from collections.abc import Callable
from typing import Any

try:
    import resource
except ImportError:  # not on Windows
    resource = None  # type: ignore[assignment]

THIS_FILE = os.path.abspath(__file__)
END_MARKER = b"\x00parley-kernel-done-%d\x00"
PR_SET_PDEATHSIG = 1  # from <linux/prctl.h>

MAX_MEMBERS = 300
MAX_APROPOS_HITS = 200
MAX_APROPOS_MODULES = 2000
DOC_LIMIT = 4000
REPR_LIMIT_SHORT = 300


class CPUTimeLimitExceeded(BaseException):
    """Raised in the user's code at the CPU-time cap; like KeyboardInterrupt, `except
    Exception` does not catch it."""


class IntrospectionFailure(Exception):
    """An expected failure worth one sentence to the model, not a traceback (a name not found)."""


class NotLoaded(IntrospectionFailure):
    """The target's module is not loaded here. The introspection operations never import
    (importing runs a module's code, and only `eval` has the user's permission to run code),
    so the server answers such a target from the source instead."""


class CappedText(io.TextIOBase):
    """A stand-in for sys.stdout/sys.stderr that keeps the first `limit` characters.

    The rest is only counted, so a megabyte print costs nothing and never reaches the pipe.
    """

    def __init__(self, limit: int) -> None:
        super().__init__()
        self.limit = limit
        self.parts: list[str] = []
        self.kept = 0
        self.cut = 0

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return "utf-8"

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        if not isinstance(text, str):
            raise TypeError("write() argument must be str, not " + type(text).__name__)
        room = self.limit - self.kept
        if room > 0:
            piece = text[:room]
            self.parts.append(piece)
            self.kept += len(piece)
        self.cut += len(text) - max(0, min(room, len(text)))
        return len(text)

    def text(self) -> str:
        return cut_note("".join(self.parts), self.cut)


def cut_note(text: str, cut: int) -> str:
    if cut <= 0:
        return text
    return f"{text}\n[… {cut:,} more characters cut]"


def cap(text: str, limit: int) -> str:
    return cut_note(text[:limit], len(text) - limit) if len(text) > limit else text


def clean(value: Any) -> Any:
    """Make every string in a reply valid UTF-8 (lone surrogates would break the parent)."""
    if isinstance(value, str):
        return value.encode("utf-8", "replace").decode("utf-8")
    if isinstance(value, dict):
        return {key: clean(item) for key, item in value.items()}
    if isinstance(value, list):
        return [clean(item) for item in value]
    return value


def drop_kernel_frames(report: traceback.TracebackException, seen: set[int]) -> None:
    """Remove the kernel's frames (the SIGINT handler, say) from a traceback and its causes."""
    seen.add(id(report))
    kept = [frame for frame in report.stack if frame.filename != THIS_FILE]
    report.stack = traceback.StackSummary.from_list(kept)
    for inner in (report.__cause__, report.__context__):
        if inner is not None and id(inner) not in seen:
            drop_kernel_frames(inner, seen)


def kind_of(obj: Any) -> str:
    if inspect.ismodule(obj):
        return "module"
    if inspect.isclass(obj):
        return "class"
    if inspect.ismethod(obj) or inspect.ismethoddescriptor(obj):
        return "method"
    if inspect.isfunction(obj) or inspect.isbuiltin(obj):
        return "function"
    if isinstance(obj, property):
        return "property"
    if callable(obj):
        return "callable"
    return "data"


def signature_of(obj: Any) -> str | None:
    target = obj.fget if isinstance(obj, property) else obj
    if not callable(target):
        return None
    try:
        return str(inspect.signature(target))
    except (TypeError, ValueError):
        return None


def first_line(text: str | None) -> str:
    return text.strip().splitlines()[0] if text and text.strip() else ""


def short_repr(obj: Any, limit: int = REPR_LIMIT_SHORT) -> str:
    try:
        return cap(repr(obj), limit)
    except Exception as exc:
        return f"<repr failed: {type(exc).__name__}: {exc}>"


class Kernel:
    def __init__(self, root: str, output_limit: int, cpu_seconds: float = 0) -> None:
        self.root = root
        self.output_limit = output_limit
        self.cpu_seconds = cpu_seconds  # per request; 0: no cap
        self.last_error: dict[str, Any] | None = None
        self.eval_count = 0
        self.interruptible = False
        self.event_loop: Any = None
        # A fresh __main__ module holds the user's namespace, so classes defined in it pickle
        # and `if __name__ == "__main__":` behaves as at a REPL.
        main_module = types.ModuleType("__main__")
        main_module.__dict__["__builtins__"] = builtins
        sys.modules["__main__"] = main_module
        self.namespace = main_module.__dict__

    # --- running user code, interruptibly ------------------------------------------------

    def on_sigint(self, signum: int, frame: Any) -> None:
        # Only user code is interrupted; a SIGINT that races with the kernel's own work
        # (writing a reply, waiting for the next request) is ignored.
        if self.interruptible:
            raise KeyboardInterrupt

    def on_cpu_limit(self, signum: int, frame: Any) -> None:
        # The OS repeats SIGXCPU every CPU second past the cap until the next request
        # raises it; only user code hears about it.
        if self.interruptible:
            raise CPUTimeLimitExceeded(
                f"the call used more than its {self.cpu_seconds:g} s of CPU time"
            )

    def cap_cpu_time(self) -> None:
        """Let the coming request use `cpu_seconds` of CPU time from now (RLIMIT_CPU counts
        the process's total, so the soft limit moves with each request)."""
        if not self.cpu_seconds or resource is None:
            return
        usage = resource.getrusage(resource.RUSAGE_SELF)
        soft = math.ceil(usage.ru_utime + usage.ru_stime + self.cpu_seconds)
        _, hard = resource.getrlimit(resource.RLIMIT_CPU)
        if hard != resource.RLIM_INFINITY:
            soft = min(soft, hard)
        with contextlib.suppress(ValueError, OSError):  # then the previous cap holds
            resource.setrlimit(resource.RLIMIT_CPU, (soft, hard))

    def guarded(self, work: Callable[[], Any]) -> Any:
        self.cap_cpu_time()
        self.interruptible = True
        try:
            return work()
        finally:
            self.interruptible = False

    def handle(self, request: dict[str, Any]) -> dict[str, Any]:
        op = request.get("op")
        args = request.get("args") or {}
        handler = getattr(self, "op_" + str(op), None)
        stdout, stderr = CappedText(self.output_limit), CappedText(self.output_limit)
        reply: dict[str, Any] = {"id": request.get("id")}
        saved = sys.stdout, sys.stderr
        sys.stdout, sys.stderr = stdout, stderr
        try:
            if handler is None:
                raise IntrospectionFailure(f"unknown kernel operation {op!r}")
            reply["result"] = self.guarded(lambda: handler(**args))
            reply["ok"] = True
        except IntrospectionFailure as exc:
            reply["ok"] = False
            reply["error"] = {"type": type(exc).__name__, "message": str(exc)}
        except BaseException as exc:  # user code may raise anything, SystemExit included
            reply["ok"] = False
            reply["error"] = self.record_error(exc, self.describe_request(op, args))
        finally:
            sys.stdout, sys.stderr = saved
        reply["stdout"] = stdout.text()
        reply["stderr"] = stderr.text()
        return reply

    def describe_request(self, op: Any, args: dict[str, Any]) -> str:
        if op == "eval":
            return f"python_eval #{self.eval_count}"
        shown = ", ".join(repr(value) for value in args.values())
        return f"python_{op}({shown})"

    def record_error(self, exc: BaseException, during: str) -> dict[str, Any]:
        tb = exc.__traceback__
        # Drop the kernel's own frames: the model should see its code, not ours.
        while tb is not None and tb.tb_frame.f_code.co_filename == THIS_FILE:
            tb = tb.tb_next
        if isinstance(exc, SyntaxError) and str(exc.filename).startswith("<python_eval"):
            tb = None  # the parser's frames say nothing; the caret under the code does
        report = traceback.TracebackException(type(exc), exc, tb)
        drop_kernel_frames(report, set())
        error = {
            "type": type(exc).__name__,
            "message": str(exc),
            "traceback": cap("".join(report.format()), self.output_limit),
            "interrupted": isinstance(exc, KeyboardInterrupt),
            "during": during,
            "time": time.strftime("%H:%M:%S"),
        }
        self.last_error = error
        sys.last_type, sys.last_value, sys.last_traceback = type(exc), exc, tb
        return error

    # --- operations ----------------------------------------------------------------------

    def op_ping(self) -> dict[str, Any]:
        return {"pid": os.getpid()}

    def op_eval(self, code: str) -> dict[str, Any]:
        self.eval_count += 1
        filename = f"<python_eval #{self.eval_count}>"
        # Register the source so tracebacks can show the lines of the model's code.
        linecache.cache[filename] = (len(code), None, code.splitlines(True), filename)
        flags = getattr(ast, "PyCF_ALLOW_TOP_LEVEL_AWAIT", 0)
        tree = ast.parse(code, filename, "exec")
        # Like the REPL: a final expression statement is evaluated for its value.
        last_expression = None
        if tree.body and isinstance(tree.body[-1], ast.Expr):
            last_expression = ast.Expression(tree.body.pop().value)
        self.run_code(compile(tree, filename, "exec", flags=flags))
        if last_expression is None:
            return {"value": None}
        value = self.run_code(compile(last_expression, filename, "eval", flags=flags))
        if value is None:
            return {"value": None}
        self.namespace["_"] = value
        return {"value": cap(repr(value), self.output_limit)}

    def run_code(self, code: types.CodeType) -> Any:
        result = eval(code, self.namespace)
        if code.co_flags & inspect.CO_COROUTINE:  # top-level await
            if self.event_loop is None:
                import asyncio

                self.event_loop = asyncio.new_event_loop()
            result = self.event_loop.run_until_complete(result)
        return result

    def op_describe(self, target: str) -> dict[str, Any]:
        obj = self.resolve(target)
        file, line = self.location(obj)
        return {
            "target": target,
            "kind": kind_of(obj),
            "type": f"{type(obj).__module__}.{type(obj).__qualname__}",
            "repr": short_repr(obj),
            "signature": signature_of(obj),
            "doc": cap(inspect.getdoc(obj) or "", DOC_LIMIT),
            "file": file,
            "line": line,
        }

    def op_source(self, target: str) -> dict[str, Any]:
        obj = self.resolve(target)
        note = ""
        if isinstance(obj, property):
            obj = obj.fget
        elif isinstance(obj, (classmethod, staticmethod)):
            obj = obj.__func__
        elif not (
            inspect.ismodule(obj)
            or inspect.isclass(obj)
            or inspect.isroutine(obj)
            or inspect.iscode(obj)
        ):
            note = f"{target} is an instance of {type(obj).__qualname__}; showing its class."
            obj = type(obj)
        try:
            lines, start = inspect.getsourcelines(obj)
        except (OSError, TypeError) as exc:
            raise IntrospectionFailure(
                f"no Python source for {target} ({kind_of(obj)}): {exc}"
            ) from None
        file, _ = self.location(obj)
        return {
            "target": target,
            "source": cap("".join(lines), self.output_limit),
            "file": file,
            "line": max(start, 1),
            "end_line": max(start, 1) + len(lines) - 1,
            "note": note,
        }

    def op_members(self, target: str) -> dict[str, Any]:
        obj = self.resolve(target)
        if inspect.ismodule(obj):
            members = self.module_members(obj)
            owner_kind = "module"
        elif inspect.isclass(obj):
            members = self.class_members(obj)
            owner_kind = "class"
        else:
            members = self.class_members(type(obj))
            instance_vars = getattr(obj, "__dict__", None)
            if isinstance(instance_vars, dict):
                for name, value in sorted(instance_vars.items()):
                    members.append(
                        {"name": name, "kind": "data (instance)", "repr": short_repr(value, 80)}
                    )
            owner_kind = f"instance of {type(obj).__qualname__}"
        return {
            "target": target,
            "owner_kind": owner_kind,
            "total": len(members),
            "members": members[:MAX_MEMBERS],
        }

    def module_members(self, module: types.ModuleType) -> list[dict[str, Any]]:
        members = []
        for name, value in sorted(vars(module).items()):
            if name.startswith("__"):
                continue
            member = self.member_entry(name, value)
            origin = getattr(value, "__module__", None)
            if (inspect.isclass(value) or inspect.isroutine(value)) and origin not in (
                None,
                module.__name__,
            ):
                member["from"] = origin
            members.append(member)
        return members

    def class_members(self, cls: type) -> list[dict[str, Any]]:
        members = []
        for attribute in inspect.classify_class_attrs(cls):
            if attribute.defining_class in (object, type):
                continue
            value = attribute.object
            is_dunder = attribute.name.startswith("__") and attribute.name.endswith("__")
            if is_dunder and not inspect.isroutine(value):
                continue  # __dict__, __module__, __weakref__, ...
            kind = attribute.kind  # method, class method, static method, property, data
            if kind == "data" and inspect.isclass(value):
                kind = "class"
            member = self.member_entry(attribute.name, value, kind)
            if attribute.defining_class is not cls:
                member["from"] = attribute.defining_class.__qualname__
            members.append(member)
        return members

    def member_entry(self, name: str, value: Any, kind: str | None = None) -> dict[str, Any]:
        if isinstance(value, (classmethod, staticmethod)):
            value = value.__func__
        kind = kind or kind_of(value)
        entry: dict[str, Any] = {"name": name, "kind": kind}
        signature = signature_of(value) if kind != "data" else None
        if signature is not None:
            entry["signature"] = signature
        if kind == "data":
            entry["repr"] = short_repr(value, 80)
        elif not inspect.ismodule(value):
            # The member's own docstring only: getdoc would fall back to a base class's
            # (object.__init__'s "Initialize self." says nothing about this class).
            doc = first_line(getattr(value, "__doc__", None))
            if doc:
                entry["doc"] = doc[:160]
        return entry

    def op_apropos(self, pattern: str) -> dict[str, Any]:
        """Names matching `pattern` in the modules already loaded (a package's other modules
        are searched by the server, from their source)."""
        try:
            regex = re.compile(pattern, re.IGNORECASE)
        except re.error as exc:
            message = f"{pattern!r} is not a valid regular expression: {exc}"
            raise IntrospectionFailure(message) from None
        modules = [m for m in list(sys.modules.values()) if isinstance(m, types.ModuleType)]
        hits = []
        for module in modules:
            module_name = getattr(module, "__name__", None)
            if not isinstance(module_name, str):
                continue
            if regex.search(module_name.rsplit(".", 1)[-1]):
                hits.append({"name": module_name, "kind": "module"})
            for name, value in list(vars(module).items()):
                if name.startswith("__") or inspect.ismodule(value):
                    continue
                defined_here = getattr(value, "__module__", module_name) == module_name
                if (inspect.isclass(value) or inspect.isroutine(value)) and not defined_here:
                    continue  # a re-export: it is listed where it is defined
                if regex.search(name):
                    hits.append(self.apropos_hit(f"{module_name}.{name}", value))
                if inspect.isclass(value) and defined_here:
                    for attribute, member in list(vars(value).items()):
                        if not attribute.startswith("__") and regex.search(attribute):
                            qualified = f"{module_name}.{name}.{attribute}"
                            hits.append(self.apropos_hit(qualified, member, in_class=True))
        hits.sort(key=lambda hit: hit["name"])
        return {
            "pattern": pattern,
            "modules_searched": len(modules),
            "total": len(hits),
            "hits": hits[:MAX_APROPOS_HITS],
        }

    def apropos_hit(self, name: str, value: Any, in_class: bool = False) -> dict[str, Any]:
        kind = kind_of(value)
        if isinstance(value, classmethod):
            value, kind = value.__func__, "class method"
        elif isinstance(value, staticmethod):
            value, kind = value.__func__, "static method"
        elif in_class and kind == "function":
            kind = "method"
        hit = {"name": name, "kind": kind}
        signature = signature_of(value)
        if signature is not None and not inspect.isclass(value):
            hit["signature"] = signature
        return hit

    def op_last_error(self) -> dict[str, Any]:
        return {"error": self.last_error}

    # --- finding things ------------------------------------------------------------------

    def resolve(self, target: str) -> Any:
        """A name in the namespace, a loaded module, a builtin, or an attribute path under
        one of them. Nothing is imported: a module that is not in `sys.modules` raises
        NotLoaded."""
        target = (target or "").strip()
        parts = target.split(".")
        if not target or not all(part.isidentifier() for part in parts):
            raise IntrospectionFailure(f"{target!r} is not a name or a dotted path")
        if parts[0] in self.namespace:
            obj, rest, reached = self.namespace[parts[0]], parts[1:], parts[0]
        else:
            found = self.loaded_longest_prefix(parts)
            if found is not None:
                obj, rest = found
                reached = ".".join(parts[: len(parts) - len(rest)])
            elif hasattr(builtins, parts[0]):
                obj, rest, reached = getattr(builtins, parts[0]), parts[1:], parts[0]
            else:
                raise NotLoaded(f"{parts[0]!r} is not in the kernel's namespace or loaded")
        for attribute in rest:
            try:
                obj = getattr(obj, attribute)
            except AttributeError:
                submodule = self.loaded_submodule(obj, attribute)
                if submodule is not None:
                    obj = submodule
                elif inspect.ismodule(obj):
                    # Perhaps a submodule not imported yet: the source may say.
                    raise NotLoaded(f"{reached}.{attribute} is not loaded") from None
                else:
                    raise IntrospectionFailure(
                        f"{reached} ({kind_of(obj)}) has no attribute {attribute!r}"
                    ) from None
            reached += "." + attribute
        return obj

    def loaded_longest_prefix(self, parts: list[str]) -> tuple[Any, list[str]] | None:
        for length in range(len(parts), 0, -1):
            module = sys.modules.get(".".join(parts[:length]))
            if isinstance(module, types.ModuleType):
                return module, parts[length:]
        return None

    def loaded_submodule(self, obj: Any, attribute: str) -> Any:
        if not inspect.ismodule(obj):
            return None
        module = sys.modules.get(f"{obj.__name__}.{attribute}")
        return module if isinstance(module, types.ModuleType) else None

    def location(self, obj: Any) -> tuple[str | None, int | None]:
        target = obj
        if isinstance(target, property):
            target = target.fget
        elif isinstance(target, (classmethod, staticmethod)):
            target = target.__func__
        try:
            file = inspect.getsourcefile(target) or inspect.getfile(target)
        except TypeError:
            return None, None
        line = None
        if not inspect.ismodule(target):
            try:
                line = inspect.getsourcelines(target)[1] or 1
            except (OSError, TypeError):
                line = None
        return self.shown_path(file), line

    def shown_path(self, file: str) -> str:
        absolute = os.path.abspath(file)
        if absolute.startswith(self.root + os.sep):
            return os.path.relpath(absolute, self.root)
        return file


# --- process setup ------------------------------------------------------------------------


def take_protocol_fds() -> tuple[io.BufferedReader, io.BufferedWriter]:
    """Keep the pipes to the parent for the protocol, and give user code harmless fds 0 and 1."""
    protocol_in = os.fdopen(os.dup(0), "rb")  # os.dup makes non-inheritable fds (PEP 446)
    protocol_out = os.fdopen(os.dup(1), "wb")
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)
    os.dup2(2, 1)
    sys.stdin = open(0, closefd=False)  # noqa: SIM115 - lives as long as the process
    sys.stdout = open(1, "w", buffering=1, closefd=False)  # noqa: SIM115
    sys.stdout.reconfigure(errors="backslashreplace")
    sys.__stdin__, sys.__stdout__ = sys.stdin, sys.stdout
    return protocol_in, protocol_out


def set_memory_limit(limit_bytes: int) -> None:
    if limit_bytes <= 0 or resource is None:
        return
    try:
        resource.setrlimit(resource.RLIMIT_AS, (limit_bytes, limit_bytes))
    except (ValueError, OSError) as exc:  # the hard limit is lower
        print(f"parley kernel: could not set the memory limit: {exc}", file=sys.stderr)


def end_process_group() -> None:
    """SIGKILL the kernel's process group: the kernel and everything it started."""
    os.killpg(os.getpgrp(), signal.SIGKILL)


def end_namespace() -> None:
    """SIGKILL every process of the sandbox's PID namespace but its init (which then exits)."""
    os.kill(-1, signal.SIGKILL)


def in_own_pid_namespace() -> bool:
    """Whether this is the first process bwrap's init started in a new PID namespace: only
    there may the watcher signal every process it can (-1 means the namespace's, not the
    machine's)."""
    return os.getpid() == 2 and os.getppid() == 1


def set_parent_death_signal(signum: int) -> bool:
    """Have Linux send `signum` to this process when its parent dies; False elsewhere."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(PR_SET_PDEATHSIG, signum, 0, 0, 0) == 0
    except (ImportError, OSError, AttributeError):
        return False


def fork_group_watcher(end: Callable[[], None] = end_process_group) -> None:
    """Fork a process that ends the kernel's group (or `end`s otherwise) when the kernel dies.

    The watcher waits, idle, for the death signal Linux sends it when the kernel exits (any
    way: closed, crashed, SIGKILLed), then SIGKILLs the group, itself included. Being a process
    of its own, it acts even when the kernel is stuck in C code or already gone.
    """
    kernel_pid = os.getpid()
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})  # until sigwait takes it
    if os.fork():
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM})
        return
    try:  # the watcher
        devnull = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):  # hold none of the pipes to the server open
            os.dup2(devnull, fd)
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        if not set_parent_death_signal(signal.SIGTERM):
            return
        if os.getppid() == kernel_pid:  # else the kernel is already gone
            signal.sigwait({signal.SIGTERM})
        end()
    finally:
        os._exit(0)


def end_with_parent(parent_pid: int) -> None:
    """End the kernel, and with it its process group, when the server is gone."""
    # Never kill a group the server is in (nor try where there are no process groups).
    leads_group = hasattr(os, "getpgrp") and os.getpgrp() == os.getpid()
    if set_parent_death_signal(signal.SIGKILL):
        if leads_group:
            fork_group_watcher()
    else:  # no PR_SET_PDEATHSIG: poll (this thread cannot run while C code holds the GIL)
        watchdog = threading.Thread(
            target=exit_when_orphaned, args=(parent_pid, leads_group), daemon=True
        )
        watchdog.start()
    if os.getppid() != parent_pid:  # the server died before we could ask to be told
        if leads_group:
            end_process_group()
        os._exit(0)


def end_with_sandbox() -> None:
    """In the sandbox: the kernel's death ends the namespace (its parent, bwrap's init, dies
    only with the namespace, which bwrap ends when the server goes). Started through a
    wrapper that did not exec (so not the namespace's first process), it ends its group."""
    if set_parent_death_signal(signal.SIGKILL):
        fork_group_watcher(end_namespace if in_own_pid_namespace() else end_process_group)


def exit_when_orphaned(parent_pid: int, leads_group: bool) -> None:
    """A busy kernel never reads its stdin's EOF; this notices a vanished server instead."""
    while True:
        time.sleep(1.0)
        if os.getppid() != parent_pid:
            if leads_group:
                end_process_group()
            os._exit(0)


def main() -> None:
    parser = argparse.ArgumentParser(description="Parley's Python kernel (talks JSON lines).")
    parser.add_argument("--root", required=True)
    parser.add_argument("--output-limit", type=int, default=20_000)
    parser.add_argument("--memory-limit", type=int, default=0, help="bytes; 0 for none")
    parser.add_argument("--cpu-limit", type=float, default=0, help="seconds per call; 0: none")
    parser.add_argument("--parent-pid", type=int, default=os.getppid())
    parser.add_argument("--sandboxed", action="store_true", help="in Parley's bwrap sandbox")
    options = parser.parse_args()

    # First: before the server could miss our start.
    if options.sandboxed:
        end_with_sandbox()
    else:
        end_with_parent(options.parent_pid)
    root = os.path.abspath(options.root)
    set_memory_limit(options.memory_limit)
    protocol_in, protocol_out = take_protocol_fds()
    # sys.path[0] is this file's directory; the workspace root replaces it.
    here = os.path.dirname(THIS_FILE)
    sys.path[:] = [root] + [entry for entry in sys.path if os.path.abspath(entry or ".") != here]
    os.chdir(root)
    faulthandler.enable(
        all_threads=False
    )  # a segfault's Python traceback goes to fd 2, where the parent reads it
    kernel = Kernel(root, options.output_limit, options.cpu_limit)
    signal.signal(signal.SIGINT, kernel.on_sigint)
    if hasattr(signal, "SIGXCPU"):
        signal.signal(signal.SIGXCPU, kernel.on_cpu_limit)

    def send(message: dict[str, Any]) -> None:
        protocol_out.write(json.dumps(clean(message)).encode("utf-8") + b"\n")
        protocol_out.flush()

    send({"ready": True, "pid": os.getpid(), "python": sys.version, "executable": sys.executable})
    while True:
        line = protocol_in.readline()
        if not line:
            break  # the parent closed our stdin: time to go
        try:
            request = json.loads(line)
        except ValueError:
            continue
        reply = kernel.handle(request)
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):
                stream.flush()
        os.write(2, END_MARKER % int(request.get("id") or 0))
        send(reply)


if __name__ == "__main__":
    main()
