"""Static answers for the read-only Python tools: griffe reads the files, nothing is imported.

Importing a module runs its top-level code, so `python_describe` and its siblings must not
import the workspace's modules without an approved `python_eval` (a workspace `decimal.py`
would run; `antigravity` would open a browser). What the kernel has already loaded is answered
live there (see `python_tools.py`); everything else is answered here, from the source:
signatures, docstrings, kinds, locations, members and source lines.

Where modules are looked for, in this order (as the kernel would import them): the workspace
root, the workspace's `.venv`/`venv` site-packages (found by globbing, never by running that
interpreter), and the server's own standard library. Only regular files inside those places
are read, so a symlink or a FIFO planted in the repository cannot lead the tools elsewhere or
block them.

The answers are dicts with the same fields as the kernel's introspection replies, so the
tools render both the same way.
"""

from __future__ import annotations

import builtins
import inspect
import os
import re
import stat
import sysconfig
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from parley.tools.griffe_adapter import griffe

MAX_MEMBERS = 300
MAX_APROPOS_HITS = 200
MAX_APROPOS_MODULES = 2000
DOC_LIMIT = 4000
VALUE_LIMIT = 300
SOURCE_SUFFIXES = (".py", ".pyi")
# Top-level directories of a workspace that hold no module of the project's own.
NOT_PROJECT_DIRS = {"venv", "node_modules", "__pycache__", "site-packages", "build", "dist"}

Obj = griffe.Object | griffe.Alias


class StaticLookupError(Exception):
    """A target that cannot be answered from the source, in one sentence for the model."""


def site_packages_dirs(workspace: Path) -> list[Path]:
    """The workspace virtualenv's site-packages, found by globbing: running that interpreter
    to ask would run a file of the repository."""
    found: list[Path] = []
    for venv in (".venv", "venv"):
        found += sorted((workspace / venv).glob("lib/python3*/site-packages"))
        found += sorted((workspace / venv).glob("Lib/site-packages"))
    return found


def is_inside(path: Path, roots: list[Path]) -> bool:
    return any(path == root or path.is_relative_to(root) for root in roots)


def _kind_of(obj: griffe.Object) -> str:
    """The kernel's vocabulary: module, class, function, method, class method, static
    method, property, data, data (instance)."""
    labels = obj.labels
    if obj.is_module:
        return "module"
    if obj.is_class:
        return "class"
    if "property" in labels:
        return "property"
    if obj.is_function:
        if "classmethod" in labels:
            return "class method"
        if "staticmethod" in labels:
            return "static method"
        return "method" if obj.parent is not None and obj.parent.is_class else "function"
    if "instance-attribute" in labels:
        return "data (instance)"
    return "data"


# What `type(obj)` would be at run time, as far as the source tells without running it.
_TYPE_OF_KIND = {
    "module": "builtins.module",
    "class": "builtins.type",
    "function": "builtins.function",
    "method": "builtins.function",
    "class method": "builtins.classmethod",
    "static method": "builtins.staticmethod",
    "property": "builtins.property",
}


def _format_parameters(parameters: griffe.Parameters, returns: Any = None) -> str:
    """Like `str(inspect.signature(f))`: `(a, b=1, /, c: int = 2, *args, d, **kw) -> R`."""
    kinds = griffe.ParameterKind
    parts: list[str] = []
    listed = list(parameters)
    star_written = False
    for index, parameter in enumerate(listed):
        kind = parameter.kind
        if kind is kinds.keyword_only and not star_written:
            parts.append("*")
        if kind in (kinds.var_positional, kinds.keyword_only):
            star_written = True
        prefix = {kinds.var_positional: "*", kinds.var_keyword: "**"}.get(kind, "")
        text = prefix + parameter.name
        if parameter.annotation is not None:
            text += f": {parameter.annotation}"
        if parameter.default is not None and not prefix:  # griffe gives `*args` a "()"
            text += f" = {parameter.default}" if parameter.annotation else f"={parameter.default}"
        parts.append(text)
        following = listed[index + 1].kind if index + 1 < len(listed) else None
        if kind is kinds.positional_only and following is not kinds.positional_only:
            parts.append("/")
    signature = f"({', '.join(parts)})"
    return f"{signature} -> {returns}" if returns is not None else signature


def _signature_of(obj: griffe.Object, kind: str) -> str | None:
    if kind == "property":
        annotation = getattr(obj, "annotation", None) or getattr(obj, "returns", None)
        return "(self)" + (f" -> {annotation}" if annotation else "")
    if obj.is_function:
        return _format_parameters(obj.parameters, obj.returns)
    if obj.is_class:
        # The call signature: __init__'s parameters without `self`.
        parameters = list(obj.parameters)
        if parameters and parameters[0].name in ("self", "cls"):
            parameters = parameters[1:]
        return _format_parameters(griffe.Parameters(*parameters))
    return None


def _doc_of(obj: griffe.Object) -> str:
    return obj.docstring.value if obj.docstring else ""


def _first_line(text: str) -> str:
    return text.strip().splitlines()[0] if text.strip() else ""


def _cap(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    return f"{text[:limit]}\n[… {len(text) - limit:,} more characters cut]"


class StaticIntrospector:
    """One per session: griffe's loaded modules are kept between calls (a warm call only
    re-checks the files' sizes and times), and reloaded when a file changes."""

    def __init__(self, workspace: Path, output_limit: int = 20_000) -> None:
        self.workspace = Path(workspace).resolve()
        self.output_limit = output_limit
        self.stdlib = Path(sysconfig.get_paths()["stdlib"]).resolve()
        site_packages = [
            path.resolve()
            for path in site_packages_dirs(self.workspace)
            if is_inside(path.resolve(), [self.workspace]) and self._pth_files_are_safe(path)
        ]
        self.site_packages = site_packages
        self.search_paths = [self.workspace, *site_packages, self.stdlib]
        self._lock = threading.Lock()  # griffe's loader is not thread-safe
        self._loader = self._new_loader()
        self._fingerprints: dict[str, tuple[tuple[str, int, int], ...]] = {}

    # --- the operations (called in a worker thread) --------------------------------------

    def describe(self, target: str) -> dict[str, Any]:
        with self._lock:
            found = self._resolve(target)
            if isinstance(found, _Builtin):
                return found.describe(target)
            obj = self._final(found, target)
            kind = _kind_of(obj)
            file, line = self._location(obj)
            answer = {
                "target": target,
                "kind": kind,
                "type": _TYPE_OF_KIND.get(kind) or self._data_type(obj),
                "signature": _signature_of(obj, kind),
                "doc": _cap(_doc_of(obj), DOC_LIMIT),
                "file": file,
                "line": line,
            }
            if kind.startswith("data") and obj.is_attribute and obj.value is not None:
                answer["value_source"] = _cap(str(obj.value), VALUE_LIMIT)
            if found.is_alias:
                answer["imported_from"] = found.target_path
            return answer

    def source(self, target: str) -> dict[str, Any]:
        with self._lock:
            found = self._resolve(target)
            if isinstance(found, _Builtin):
                raise StaticLookupError(
                    f"no Python source for {target} (a builtin of the interpreter, written in C)"
                )
            obj = self._final(found, target)
            try:
                lines = obj.lines_collection[obj.filepath]
            except (KeyError, TypeError):  # TypeError: a namespace package has no one file
                lines = []
            if obj.is_module:
                start, end = 1, len(lines)
            else:
                if obj.lineno is None or obj.endlineno is None:
                    raise StaticLookupError(f"no source lines are known for {target}")
                start, end = self._first_line_with_decorators(obj, lines), obj.endlineno
            file, _ = self._location(obj)
            text = "".join(line + "\n" for line in lines[start - 1 : end])
            return {
                "target": target,
                "source": _cap(text, self.output_limit),
                "file": file,
                "line": start,
                "end_line": end,
                "note": "",
            }

    def members(self, target: str) -> dict[str, Any]:
        with self._lock:
            found = self._resolve(target)
            if isinstance(found, _Builtin):
                raise StaticLookupError(
                    f"{target} is a builtin of the interpreter, without Python source; its "
                    "members can be listed live after an approved python_eval (dir())"
                )
            obj = self._final(found, target)
            if obj.is_module:
                members = self._module_members(obj)
            elif obj.is_class:
                members = self._class_members(obj)
            else:
                raise StaticLookupError(
                    f"{target} is a {_kind_of(obj)}; members are listed for modules and classes "
                    "(read from the source: instances exist only in a running program)"
                )
            return {
                "target": target,
                "owner_kind": _kind_of(obj),
                "total": len(members),
                "members": members[:MAX_MEMBERS],
            }

    def apropos(self, pattern: str, package: str | None = None) -> dict[str, Any]:
        """Names matching `pattern` in `package` and its submodules, or, without a package,
        in the workspace's own top-level modules and packages."""
        regex = _compile_pattern(pattern)
        with self._lock:
            unreadable: list[str] = []
            if package:
                found = self._final(self._resolve_module(package), package)
                if not found.is_module:
                    raise StaticLookupError(f"{package} is a {_kind_of(found)}, not a module")
                roots: list[griffe.Module] = [found]
            else:
                roots = list(self._workspace_modules(unreadable))
            modules = list(_walk_modules(roots))[:MAX_APROPOS_MODULES]
            hits = [hit for module in modules for hit in _module_hits(module, regex)]
        hits.sort(key=lambda hit: hit["name"])
        return {
            "pattern": pattern,
            "package": package,
            "modules_searched": len(modules),
            "total": len(hits),
            "hits": hits[:MAX_APROPOS_HITS],
            "unreadable": unreadable[:20],
        }

    # --- finding things ------------------------------------------------------------------

    def _resolve(self, target: str) -> Obj | _Builtin:
        """The object a dotted path names, following modules, classes and their members."""
        parts = _dotted_parts(target)
        try:
            top: Obj = self._load(parts[0])
        except StaticLookupError:
            if hasattr(builtins, parts[0]):
                return _Builtin.resolve(parts)
            raise
        obj, reached = top, parts[0]
        for part in parts[1:]:
            owner = self._final(obj, reached)
            member = owner.members.get(part)
            if member is None and owner.is_class:
                member = owner.all_members.get(part)  # inherited
            if member is None:
                raise StaticLookupError(
                    f"{reached} ({_kind_of(owner)}) has no attribute {part!r} in its source"
                )
            obj, reached = member, f"{reached}.{part}"
        return obj

    def _resolve_module(self, target: str) -> Obj:
        found = self._resolve(target)
        if isinstance(found, _Builtin):
            raise StaticLookupError(f"{target} is a builtin, not a module")
        return found

    def _final(self, obj: Obj, target: str) -> griffe.Object:
        """What an alias (an import, a re-export, an inherited member) stands for; the module
        it comes from is loaded from its source when needed."""
        if not obj.is_alias:
            return obj  # type: ignore[return-value]
        for _attempt in range(2):
            try:
                return obj.final_target  # type: ignore[union-attr]
            except griffe.AliasResolutionError as exc:
                with_module = exc.alias.target_path.split(".", 1)[0]
                if with_module in self._loader.modules_collection.members:
                    break
                try:
                    self._load(with_module)
                except StaticLookupError:
                    break
            except griffe.CyclicAliasError:
                break
        raise StaticLookupError(
            f"{target} is imported from {obj.target_path}, "  # type: ignore[union-attr]
            "which cannot be found as Python source"
        )

    def _load(self, top_name: str) -> griffe.Module:
        """The top-level module or package `top_name`, loaded from the source with all its
        submodules; reloaded when one of its files changed since."""
        try:
            _, package = self._loader.finder.find_spec(top_name, try_relative_path=False)
        except ModuleNotFoundError:
            raise StaticLookupError(self._not_found(top_name)) from None
        fingerprint = self._fingerprint(top_name, package)
        loaded = self._loader.modules_collection.members.get(top_name)
        if loaded is not None and self._fingerprints.get(top_name) == fingerprint:
            return loaded
        if loaded is not None:
            # A file changed: start over, since other modules' aliases may point into it.
            self._loader = self._new_loader()
            self._fingerprints.clear()
        try:
            module = self._loader.load(top_name, try_relative_path=False)
        except (griffe.LoadingError, ModuleNotFoundError, OSError, SyntaxError) as exc:
            raise StaticLookupError(f"{top_name} could not be read: {exc}") from None
        self._fingerprints[top_name] = fingerprint
        return module  # type: ignore[return-value]

    def _not_found(self, name: str) -> str:
        return (
            f"{name!r} was not found as Python source in the workspace, its virtualenv or the "
            "standard library, and is not a builtin (a compiled module can be inspected live "
            "after an approved python_eval imports it)"
        )

    def _fingerprint(
        self, name: str, package: griffe.Package | griffe.NamespacePackage
    ) -> tuple[tuple[str, int, int], ...]:
        """Every source file of the module or package with its size and time, to notice
        edits; a file that is not a regular file inside the search paths is refused first,
        before griffe opens it (a FIFO would block, a symlink could lead out)."""
        if isinstance(package, griffe.NamespacePackage):
            places = list(package.path)
        elif package.path.name.startswith("__init__."):
            places = [package.path.parent]
        else:
            places = [package.path]
        for place in places:  # the package's own directory may be a symlink
            if not is_inside(place.resolve(), self.search_paths):
                raise StaticLookupError(self._refusal(name, place))
        entries = []
        for file in _source_files(places):
            try:
                status = os.lstat(file)
                if stat.S_ISLNK(status.st_mode):  # resolved only then: a warm call stays quick
                    if not is_inside(file.resolve(), self.search_paths):
                        raise StaticLookupError(self._refusal(name, file))
                    status = file.stat()
            except OSError as exc:
                raise StaticLookupError(f"{name} could not be read: {exc}") from None
            if not stat.S_ISREG(status.st_mode):
                raise StaticLookupError(self._refusal(name, file))
            entries.append((str(file), status.st_mtime_ns, status.st_size))
        return tuple(sorted(entries))

    def _refusal(self, name: str, path: Path) -> str:
        return (
            f"{name} is not read: {self._shown_path(path)} is not a regular file inside the "
            "workspace, its virtualenv or the standard library"
        )

    def _workspace_modules(self, unreadable: list[str]) -> Iterator[griffe.Module]:
        """The workspace's own top-level modules and packages (not its virtualenv's)."""
        for entry in sorted(self.workspace.iterdir()):
            name = entry.name.removesuffix(".py")
            if entry.name.startswith(".") or entry.name in NOT_PROJECT_DIRS:
                continue
            is_module = entry.name.endswith(".py") and name.isidentifier()
            is_package = entry.is_dir() and (entry / "__init__.py").exists()
            if not (is_module or (is_package and entry.name.isidentifier())):
                continue
            try:
                yield self._load(name)
            except StaticLookupError as exc:
                unreadable.append(str(exc))

    # --- describing what was found -------------------------------------------------------

    def _location(self, obj: griffe.Object) -> tuple[str | None, int | None]:
        try:
            file = obj.filepath
        except griffe.BuiltinModuleError:
            return None, None
        if isinstance(file, list):  # a namespace package: several directories
            return ", ".join(self._shown_path(path) for path in file), None
        return self._shown_path(file), None if obj.is_module else obj.lineno

    def _shown_path(self, path: Path) -> str:
        return (
            str(path.relative_to(self.workspace))
            if path.is_relative_to(self.workspace)
            else (str(path))
        )

    @staticmethod
    def _data_type(obj: griffe.Object) -> str:
        annotation = getattr(obj, "annotation", None)
        return str(annotation) if annotation is not None else "type unknown without running it"

    @staticmethod
    def _first_line_with_decorators(obj: griffe.Object, lines: list[str]) -> int:
        decorators = getattr(obj, "decorators", None) or []
        if decorators:
            return min(decorator.lineno for decorator in decorators)
        start = obj.lineno or 1
        # A property is an attribute to griffe, without its decorators: take the `@` lines.
        while start > 1 and lines[start - 2].lstrip().startswith("@"):
            start -= 1
        return start

    def _member_entry(self, name: str, member: Obj, owner: griffe.Object) -> dict[str, Any]:
        if member.is_alias:
            try:
                target = member.final_target  # type: ignore[union-attr]
            except (griffe.AliasResolutionError, griffe.CyclicAliasError):
                # Not loaded, and not worth loading a whole package for one line.
                return {"name": name, "kind": "imported", "from": member.target_path}
        else:
            target = member  # type: ignore[assignment]
        kind = _kind_of(target)
        entry: dict[str, Any] = {"name": name, "kind": kind}
        signature = _signature_of(target, kind)
        if signature is not None:
            entry["signature"] = signature
        if kind.startswith("data"):
            if target.is_attribute and target.value is not None:
                entry["repr"] = _cap(str(target.value), 80)
        elif not target.is_module:
            doc = _first_line(_doc_of(target))
            if doc:
                entry["doc"] = doc[:160]
        if member.is_alias and not target.is_module and target.parent is not None:
            source_owner = target.parent
            if source_owner is not owner:
                shown = source_owner.name if owner.is_class else source_owner.path
                entry["from"] = shown
        return entry

    def _module_members(self, module: griffe.Object) -> list[dict[str, Any]]:
        return [
            self._member_entry(name, member, module)
            for name, member in sorted(module.members.items())
            if not name.startswith("__")
        ]

    def _class_members(self, cls: griffe.Object) -> list[dict[str, Any]]:
        members = []
        for name, member in sorted(cls.all_members.items()):
            is_dunder = name.startswith("__") and name.endswith("__")
            entry = self._member_entry(name, member, cls)
            if is_dunder and not entry["kind"].endswith(("method", "function")):
                continue  # __slots__, __match_args__, ...
            members.append(entry)
        return members

    # --- set-up --------------------------------------------------------------------------

    def _new_loader(self) -> griffe.GriffeLoader:
        loader = griffe.GriffeLoader(
            search_paths=[*self.site_packages, self.stdlib],
            allow_inspection=False,  # never import: inspection is running the module
            store_source=True,
        )
        # The site-packages' `.pth` files (editable installs) add directories; keep only
        # those inside the workspace or the standard library.
        finder = loader.finder
        finder.search_paths[:] = [
            path for path in finder.search_paths if is_inside(path.resolve(), self.search_paths)
        ]
        # The root comes first, as on the kernel's sys.path. It is added only now because
        # griffe reads the `.pth` files of the paths it is given (Python reads those of site
        # directories only), and one planted in the root could be a FIFO.
        finder.insert_search_path(0, self.workspace)
        return loader

    def _pth_files_are_safe(self, site_packages: Path) -> bool:
        """griffe reads a site-packages' `.pth` files: all must be regular files (a FIFO
        would block the reading thread)."""
        try:
            return all(stat.S_ISREG(path.stat().st_mode) for path in site_packages.glob("*.pth"))
        except OSError:
            return False


class _Builtin:
    """A builtin (`len`, `dict.get`): no source to read, so its signature and doc come from
    the server's own interpreter, where builtins are already loaded (nothing is imported)."""

    def __init__(self, obj: Any) -> None:
        self.obj = obj

    @classmethod
    def resolve(cls, parts: list[str]) -> _Builtin:
        obj: Any = builtins
        for index, part in enumerate(parts):
            try:
                obj = inspect.getattr_static(obj, part)
            except AttributeError:
                reached = ".".join(parts[:index]) or "builtins"
                raise StaticLookupError(
                    f"{reached} (a builtin) has no attribute {part!r}"
                ) from None
        return cls(obj)

    def describe(self, target: str) -> dict[str, Any]:
        obj = self.obj
        if inspect.isclass(obj):
            kind = "class"
        elif callable(obj):
            kind = "function"
        else:
            kind = "data"
        try:
            signature: str | None = str(inspect.signature(obj)) if callable(obj) else None
        except (TypeError, ValueError):
            signature = None
        return {
            "target": target,
            "kind": kind,
            "type": f"{type(obj).__module__}.{type(obj).__qualname__}",
            "signature": signature,
            "doc": _cap(inspect.getdoc(obj) or "", DOC_LIMIT),
            "file": None,
            "line": None,
        }


def _dotted_parts(target: str) -> list[str]:
    target = (target or "").strip()
    parts = target.split(".")
    if not target or not all(part.isidentifier() for part in parts):
        raise StaticLookupError(f"{target!r} is not a name or a dotted path")
    return parts


def _compile_pattern(pattern: str) -> re.Pattern[str]:
    try:
        return re.compile(pattern, re.IGNORECASE)
    except re.error as exc:
        raise StaticLookupError(f"{pattern!r} is not a valid regular expression: {exc}") from None


def _source_files(places: list[Path]) -> Iterator[Path]:
    for place in places:
        if place.is_dir():
            for root, dirs, files in os.walk(place):  # symlinked directories are not followed
                dirs[:] = [name for name in dirs if name != "__pycache__"]
                yield from (Path(root, name) for name in files if name.endswith(SOURCE_SUFFIXES))
        else:
            yield place


def _walk_modules(roots: list[griffe.Module]) -> Iterator[griffe.Module]:
    for module in roots:
        yield module
        yield from _walk_modules(
            [sub for sub in module.modules.values() if not sub.is_alias]  # type: ignore[misc]
        )


def _module_hits(module: griffe.Module, regex: re.Pattern[str]) -> Iterator[dict[str, Any]]:
    """Hits in one module: its name, what it defines, and its classes' own members. Imports
    and re-exports are aliases, listed only where they are defined."""
    if regex.search(module.name):
        yield {"name": module.path, "kind": "module"}
    for name, member in module.members.items():
        if name.startswith("__") or member.is_alias or member.is_module:
            continue
        if regex.search(name):
            yield _hit(member)  # type: ignore[arg-type]
        if member.is_class:
            for attribute, inner in member.members.items():
                own = not attribute.startswith("__") and not inner.is_alias
                if own and regex.search(attribute):
                    yield _hit(inner)  # type: ignore[arg-type]


def _hit(obj: griffe.Object) -> dict[str, Any]:
    kind = _kind_of(obj)
    hit: dict[str, Any] = {"name": obj.path, "kind": kind}
    signature = _signature_of(obj, kind) if not obj.is_class else None
    if signature is not None:
        hit["signature"] = signature
    return hit
