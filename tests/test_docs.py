"""Every public name of the package says what it is for: a reuser reads ``help(...)``, not
the source. Public = listed in ``ragbook.__all__`` or a public module's ``__all__``, plus the
public methods and properties a public class defines (itself or through a ragbook base
class). Dunders, and what a class inherits from builtins or other libraries (``str.join``,
``Exception.args``), are not ours to document."""
import importlib
import inspect
import pkgutil

import ragbook


def public_modules():
    """ragbook and every module under it whose dotted name has no part starting with ``_``."""
    yield ragbook
    for info in pkgutil.walk_packages(ragbook.__path__, "ragbook."):
        if not any(part.startswith("_") for part in info.name.split(".")):
            yield importlib.import_module(info.name)


def has_doc(obj) -> bool:
    """``obj`` carries a docstring of its own (a dataclass's generated ``Name(field, ...)``
    signature does not count, nor does a docstring inherited from a base class)."""
    doc = (obj.__doc__ or "").strip()
    if inspect.isclass(obj) and doc.startswith(f"{obj.__name__}("):
        return False
    return bool(doc)


def members(cls):
    """(qualified name, function or property) for each public method and property of ``cls``
    that a ragbook class defines."""
    for klass in cls.__mro__:
        if not klass.__module__.startswith("ragbook"):
            continue
        for name, member in vars(klass).items():
            if isinstance(member, (staticmethod, classmethod)):
                member = member.__func__
            if not name.startswith("_") and (isinstance(member, property)
                                             or inspect.isfunction(member)):
                yield f"{klass.__module__}.{klass.__qualname__}.{name}", member


def undocumented(named) -> list[str]:
    """The qualified names among ``named`` — (name, object) pairs — and their classes' public
    members that have no docstring. Data (strings, numbers, tuples, dicts) and modules are
    skipped: a docstring cannot be attached to them."""
    missing, seen = set(), set()
    for where, obj in named:
        if not (callable(obj) or isinstance(obj, property)) or id(obj) in seen:
            continue
        seen.add(id(obj))
        if not has_doc(obj):
            missing.add(where)
        if inspect.isclass(obj):
            missing.update(q for q, m in members(obj) if not has_doc(m))
    return sorted(missing)


def public_names():
    """(module.name, object) for every name in every public module's ``__all__``."""
    for module in public_modules():
        for name in getattr(module, "__all__", ()):
            obj = getattr(module, name)
            if not inspect.ismodule(obj):
                yield f"{getattr(obj, '__module__', None) or module.__name__}.{name}", obj


def test_every_public_name_has_a_docstring():
    missing = undocumented(public_names())
    assert not missing, (f"{len(missing)} public names have no docstring (say what it does "
                         f"and why, the arguments that are not obvious, what it raises):\n  "
                         + "\n  ".join(missing))


def test_the_check_finds_what_is_missing():
    def bare():
        pass

    class Bare:
        """Documented class, undocumented method and property."""

        def method(self):
            pass

        @property
        def size(self):
            return 1

        def _private(self):
            pass

    Bare.__module__ = "ragbook.example"          # members() only looks at ragbook classes
    found = undocumented([("bare", bare), ("Bare", Bare), ("a string", "no docstring needed")])
    assert found == ["bare", "ragbook.example.test_the_check_finds_what_is_missing.<locals>"
                             ".Bare.method", "ragbook.example.test_the_check_finds_what_is_"
                             "missing.<locals>.Bare.size"]


def test_docstring_examples_run():
    """The ``>>>`` examples in the package's docstrings (fusion on a tiny corpus, fit_budget,
    trying, ...) are claims a reader copies: run them all, so none can drift from the code."""
    import doctest

    failed, tried = 0, 0
    for module in public_modules():
        result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
        failed, tried = failed + result.failed, tried + result.attempted
    assert tried > 0, "no docstring examples found: the walk over the package is broken"
    assert failed == 0, f"{failed} of {tried} docstring examples fail (details printed above)"
