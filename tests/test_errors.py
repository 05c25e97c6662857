"""One root for every error tool-index raises, and the tree its docstring draws kept true."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import re
import textwrap

import discovery
import store
from discovery.errors import SemanticSignalOff, UnknownToolNames
from store.errors import ToolIndexError

BOX = re.compile(r"^(?P<indent>[│├└─ ]*)(?P<name>[A-Z]\w+)(?:\s+(?P<module>[a-z_.]+))?")


def our_modules() -> list[str]:
    names = []
    for package in (store, discovery):
        names.append(package.__name__)
        for found in pkgutil.walk_packages(package.__path__, package.__name__ + "."):
            if not found.name.endswith("__main__"):  # runs the program when imported
                names.append(found.name)
    return names


def exception_classes() -> dict[str, type[BaseException]]:
    """Every exception class defined in ``store`` and ``discovery``, by name."""
    found: dict[str, type[BaseException]] = {}
    for name in our_modules():
        module = importlib.import_module(name)
        for _, value in inspect.getmembers(module, inspect.isclass):
            if issubclass(value, BaseException) and value.__module__ == name:
                assert found.setdefault(value.__name__, value) is value, f"two classes named {value.__name__}"
    return found


def drawn_tree() -> dict[str, tuple[str | None, str | None]]:
    """Each class in the root's docstring: the class drawn above it, and the module it names."""
    block = (inspect.getdoc(ToolIndexError) or "").split("::", 1)[1].split("\n\n")[1]
    drawn: dict[str, tuple[str | None, str | None]] = {}
    stack: list[str] = []
    for line in textwrap.dedent(block).splitlines():
        match = BOX.match(line)
        assert match is not None, line
        del stack[len(match["indent"]) // 4 :]
        module = (match["module"] or "").rstrip(":") or None
        drawn[match["name"]] = (stack[-1] if stack else None, module)
        stack.append(match["name"])
    return drawn


def test_every_error_derives_from_the_one_root() -> None:
    classes = exception_classes()
    assert len(classes) == 43
    outside = [name for name, cls in classes.items() if not issubclass(cls, ToolIndexError)]
    assert outside == ["SemanticSignalOff", "UnknownToolNames"]  # warnings: the call goes on
    assert issubclass(UnknownToolNames, UserWarning)
    assert issubclass(SemanticSignalOff, UserWarning)


def test_the_root_is_one_class_under_both_names() -> None:
    import discovery.errors

    assert discovery.ToolIndexError is discovery.errors.ToolIndexError is ToolIndexError
    assert issubclass(store.errors.StoreError, ToolIndexError)


def test_the_docstring_draws_the_whole_tree() -> None:
    classes = exception_classes()
    drawn = drawn_tree()
    assert set(drawn) == set(classes) - {"SemanticSignalOff", "UnknownToolNames"}
    for name, (parent, module) in drawn.items():
        cls = classes[name]
        ours = [base.__name__ for base in cls.__bases__ if base.__name__ in classes]
        assert ours == ([parent] if parent else []), name
        if module is not None:
            assert cls.__module__ == module, name
