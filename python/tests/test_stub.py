"""``strata/_strata.pyi`` is written by hand: this checks it against the compiled module, so a
method added, renamed or given another parameter in the binding cannot leave the types behind.
Each class of the stub has exactly the compiled class's public members (properties as
properties), and each method the compiled method's parameters: names, order, keyword-only
markers and which have defaults."""

from __future__ import annotations

import ast
import inspect
from pathlib import Path
from typing import Dict, List, Tuple

import pytest

from strata import _strata

STUB = Path(_strata.__file__).with_name("_strata.pyi")

#: A parameter as compared: its name, whether it is keyword-only, whether it has a default.
Parameter = Tuple[str, bool, bool]


def stub_classes() -> Dict[str, Dict[str, object]]:
    """Each class of the stub: its members, a method as its parameter list, a property as
    ``"property"``."""
    tree = ast.parse(STUB.read_text())
    classes: Dict[str, Dict[str, object]] = {}
    for node in tree.body:
        if not isinstance(node, ast.ClassDef):
            continue
        members: Dict[str, object] = {}
        for item in node.body:
            if not isinstance(item, ast.FunctionDef):
                continue
            if any(isinstance(d, ast.Name) and d.id == "property" for d in item.decorator_list):
                members[item.name] = "property"
                continue
            args = item.args
            positional = args.args[1:]  # self
            defaults = [False] * (len(positional) - len(args.defaults)) + [True] * len(args.defaults)
            params: List[Parameter] = [(a.arg, False, d) for a, d in zip(positional, defaults)]
            params += [(a.arg, True, d is not None) for a, d in zip(args.kwonlyargs, args.kw_defaults)]
            members[item.name] = params
        classes[node.name] = members
    return classes


def compiled_parameters(signature: inspect.Signature) -> List[Parameter]:
    return [
        (p.name, p.kind is inspect.Parameter.KEYWORD_ONLY, p.default is not inspect.Parameter.empty)
        for p in signature.parameters.values()
        if p.name != "self"
    ]


def compiled_members(cls: type) -> Dict[str, object]:
    members: Dict[str, object] = {}
    for name, value in vars(cls).items():
        if name.startswith("__") and name != "__init__":
            continue
        if inspect.isgetsetdescriptor(value) or isinstance(value, property):
            members[name] = "property"
        elif callable(value):
            members[name] = compiled_parameters(inspect.signature(value))
    # The constructor's parameters are the class's text signature (a class built only by the
    # module, as a session is, has none).
    if cls.__text_signature__:
        members["__init__"] = compiled_parameters(inspect.signature(cls))
    return members


@pytest.mark.parametrize("name", sorted(stub_classes()))
def test_the_stub_matches_the_compiled_class(name: str) -> None:
    stub = stub_classes()[name]
    compiled = compiled_members(getattr(_strata, name))
    assert sorted(stub) == sorted(compiled), f"{name}: members differ"
    for member, params in compiled.items():
        assert stub[member] == params, f"{name}.{member}: the stub says {stub[member]}, the module {params}"


def test_every_compiled_class_is_in_the_stub() -> None:
    compiled = {name for name, value in vars(_strata).items() if isinstance(value, type) and not name.startswith("_")}
    assert compiled <= set(stub_classes()), compiled - set(stub_classes())
