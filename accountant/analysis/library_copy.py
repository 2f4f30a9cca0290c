"""A library's own files run as a private package, some of their imports answered by stand-ins.

The accountants compute with opacus's and dp-accounting's code, but importing those packages
costs more than the computation: ``opacus/__init__.py`` imports torch, ``dp_accounting/__init__.py``
imports its every part and ``scipy.stats``, and both libraries import ``scipy.signal`` (which
imports ``scipy.stats``) for one function. :class:`LibraryCopy` executes the installed files of
one folder of a library (found without importing the library) as the modules of a private
package, ``accountant.analysis._<name>``, so that

- the library's imports of its own modules (relative, or absolute under the copied folder)
  resolve to the copy's modules, loaded on demand;
- a module may be replaced by a stand-in (opacus's base class module, which imports torch);
- an import of a named outside module (``scipy.stats``, ``scipy.signal``) is answered by a
  stand-in module (:mod:`accountant.analysis.light_stats`, :mod:`.light_signal`) that computes
  what the library calls from them as they do and takes everything else from the real module
  on first use;
- every other import is the ordinary one.

The copy's modules see these rules through their own ``__builtins__``, whose ``__import__`` is
the copy's: nothing global changes (no import hook, no entry of ``sys.modules`` but the private
package's), and the real library is left alone for a process that imports it as usual. The code
that computes is the library's own, read from its installed files.
"""

from __future__ import annotations

import builtins
import importlib
import importlib.machinery
import importlib.util
import sys
import threading
import types
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any


class LibraryCopy:
    """The files of ``source`` (a package of an installed library) as the private ``package``.

    Args:
        package: the private package's name (e.g. ``accountant.analysis._opacus``).
        source: the library's package whose folder is copied (e.g. ``opacus.accountants``);
            its ``__init__.py`` is not run (the private package starts empty), those of its
            subpackages are.
        replaced: modules of the copy given instead of the library's file, by name relative
            to ``source`` (``{"accountant": module}``).
        stand_ins: outside modules answered by stand-ins in the copy's imports, by absolute name
            (``{"scipy.signal": module}``), for ``from scipy import signal`` and
            ``from scipy.signal import name`` alike.
    """

    def __init__(
        self,
        package: str,
        source: str,
        *,
        replaced: Mapping[str, types.ModuleType] | None = None,
        stand_ins: Mapping[str, types.ModuleType] | None = None,
    ) -> None:
        self.package = package
        self.source = source
        self.replaced = dict(replaced or {})
        self.stand_ins = dict(stand_ins or {})
        self._lock = threading.RLock()
        self._folder: Path | None = None
        self._builtins = {**builtins.__dict__, "__import__": self._import}

    def load(self, name: str = "") -> types.ModuleType:
        """The copy's module ``name`` (relative to ``source``; ``""``: the package), loaded once.

        Args:
            name: a dotted name such as ``analysis.rdp``.

        Returns:
            The module, registered in ``sys.modules`` under the private package's name.

        Raises:
            ModuleNotFoundError: when the library is not installed or has no such module.
        """
        full = f"{self.package}.{name}" if name else self.package
        with self._lock:
            if full in sys.modules:
                return sys.modules[full]
            if not name:
                return self._register(full, self._empty_package())
            parent_name, _, last = name.rpartition(".")
            parent = self.load(parent_name)
            if name in self.replaced:
                module = self._register(full, self.replaced[name])
            else:
                module = self._execute(full, name)
            setattr(parent, last, module)
            return module

    def _empty_package(self) -> types.ModuleType:
        """The private package: the library's folder as its path, no ``__init__`` run."""
        spec = importlib.machinery.ModuleSpec(self.package, None, is_package=True)
        spec.submodule_search_locations = [str(self.folder())]
        return importlib.util.module_from_spec(spec)

    def _register(self, full: str, module: types.ModuleType) -> types.ModuleType:
        sys.modules[full] = module
        return module

    def folder(self) -> Path:
        """The installed folder of ``source``, found without importing the library.

        Raises:
            ModuleNotFoundError: when the library is not installed.
        """
        if self._folder is None:
            top, _, rest = self.source.partition(".")
            spec = importlib.util.find_spec(top)  # finds, does not import, a top-level package
            if spec is None or not spec.submodule_search_locations:
                raise ModuleNotFoundError(f"{top} is not installed", name=top)
            self._folder = Path(next(iter(spec.submodule_search_locations))).joinpath(
                *filter(None, rest.split("."))
            )
        return self._folder

    def _execute(self, full: str, name: str) -> types.ModuleType:
        """Run the library's file of ``name`` as the module ``full``, with the copy's imports."""
        base = self.folder().joinpath(*name.split("."))
        if (base / "__init__.py").is_file():
            location, search = base / "__init__.py", [str(base)]
        elif base.with_suffix(".py").is_file():
            location, search = base.with_suffix(".py"), None
        else:
            raise ModuleNotFoundError(f"No module named {full!r}", name=full)
        spec = importlib.util.spec_from_file_location(
            full, location, submodule_search_locations=search
        )
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        module.__dict__["__builtins__"] = self._builtins
        sys.modules[full] = module
        try:
            spec.loader.exec_module(module)
        except BaseException:
            sys.modules.pop(full, None)
            raise
        return module

    def _import(
        self,
        name: str,
        globals: Mapping[str, Any] | None = None,
        locals: Mapping[str, Any] | None = None,
        fromlist: Sequence[str] | None = (),
        level: int = 0,
    ) -> Any:
        """``__import__`` as the copy's modules see it."""
        absolute = name
        if level:
            package = (globals or {}).get("__package__") or ""
            absolute = importlib.util.resolve_name("." * level + name, package)
        own = self._own_name(absolute)
        if own is not None:
            if not fromlist:
                raise ImportError(
                    f"'import {absolute}' in a copy of {self.source}: the copy answers "
                    "'from ... import ...' only"
                )
            module = self.load(own)
            for item in fromlist:
                if item != "*" and not hasattr(module, item):
                    try:
                        self.load(f"{own}.{item}" if own else item)
                    except ModuleNotFoundError:
                        pass  # not a module either: the from-import raises its ImportError
            return module
        if fromlist and absolute in self.stand_ins:
            return self.stand_ins[absolute]
        if fromlist and any(f"{absolute}.{item}" in self.stand_ins for item in fromlist):
            return types.SimpleNamespace(
                **{item: self._attribute(absolute, item) for item in fromlist}
            )
        return builtins.__import__(name, globals, locals, fromlist, level)

    def _own_name(self, absolute: str) -> str | None:
        """``absolute`` relative to ``source`` or to the private package; None if outside both."""
        for prefix in (self.source, self.package):
            if absolute == prefix:
                return ""
            if absolute.startswith(prefix + "."):
                return absolute[len(prefix) + 1 :]
        return None

    def _attribute(self, parent: str, item: str) -> Any:
        """``from parent import item``, with the stand-ins."""
        stand_in = self.stand_ins.get(f"{parent}.{item}")
        if stand_in is not None:
            return stand_in
        module = importlib.import_module(parent)
        try:
            return getattr(module, item)
        except AttributeError:
            return importlib.import_module(f"{parent}.{item}")
