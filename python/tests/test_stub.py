"""``strata/_strata.pyi`` is written by hand: this checks it against the compiled module, so a
method added, renamed or given another parameter in the binding cannot leave the types behind.
Each class of the stub has exactly the compiled class's public members (properties as
properties), and each method the compiled method's parameters: names, order, keyword-only
markers and which have defaults; the module's functions and constants are the stub's; and the
dicts the methods return have the keys of the stub's TypedDicts (the shapes of ``strata::edge``),
each value of the type the stub gives it."""

from __future__ import annotations

import ast
import inspect
from pathlib import Path
from typing import Dict, List, Tuple

import pytest

from conftest import SMALL_WINDOW, transcript
from strata import _strata

STUB = Path(_strata.__file__).with_name("_strata.pyi")

#: A parameter as compared: its name, whether it is keyword-only, whether it has a default.
Parameter = Tuple[str, bool, bool]


def stub_tree() -> ast.Module:
    return ast.parse(STUB.read_text())


def is_typed_dict(node: ast.stmt) -> bool:
    return isinstance(node, ast.ClassDef) and any(isinstance(b, ast.Name) and b.id == "TypedDict" for b in node.bases)


def stub_classes() -> Dict[str, Dict[str, object]]:
    """Each class of the stub: its members, a method as its parameter list, a property as
    ``"property"``."""
    classes: Dict[str, Dict[str, object]] = {}
    for node in stub_tree().body:
        if not isinstance(node, ast.ClassDef) or is_typed_dict(node):
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


def parameters_of(function: ast.FunctionDef) -> List[Parameter]:
    args = function.args
    defaults = [False] * (len(args.args) - len(args.defaults)) + [True] * len(args.defaults)
    params: List[Parameter] = [(a.arg, False, d) for a, d in zip(args.args, defaults)]
    return params + [(a.arg, True, d is not None) for a, d in zip(args.kwonlyargs, args.kw_defaults)]


def test_the_stub_has_the_module_functions_and_constants() -> None:
    tree = stub_tree()
    functions = {node.name: parameters_of(node) for node in tree.body if isinstance(node, ast.FunctionDef)}
    compiled = {
        name: compiled_parameters(inspect.signature(value))
        for name, value in vars(_strata).items()
        if inspect.isbuiltin(value) and not name.startswith("__")
    }
    assert functions == compiled, f"module functions: the stub says {functions}, the module {compiled}"
    constants = {
        node.target.id: ast.unparse(node.annotation)
        for node in tree.body
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)
    }
    compiled_constants = {
        name: type(value).__name__
        for name, value in vars(_strata).items()
        if isinstance(value, (int, str)) and (name.isupper() or name == "__version__")
    }
    assert constants == compiled_constants, f"constants: the stub says {constants}, the module {compiled_constants}"


# The dicts' shapes: each TypedDict of the stub, its keys with their annotations.


def typed_dicts() -> Dict[str, Dict[str, ast.expr]]:
    return {
        node.name: {item.target.id: item.annotation for item in node.body if isinstance(item, ast.AnnAssign)}
        for node in stub_tree().body
        if is_typed_dict(node)
    }


def mismatch(value: object, annotation: ast.expr, where: str) -> List[str]:
    """How ``value`` fails the stub's ``annotation``, in words (nothing when it fits)."""
    if isinstance(annotation, ast.Subscript):
        outer = ast.unparse(annotation.value)
        inner = annotation.slice
        args = list(inner.elts) if isinstance(inner, ast.Tuple) else [inner]
        if outer == "NotRequired":
            return mismatch(value, args[0], where)
        if outer == "Optional":
            return [] if value is None else mismatch(value, args[0], where)
        if outer == "Union":
            failures = [mismatch(value, arg, where) for arg in args]
            return [] if any(not f for f in failures) else [f"{where}: fits none of {ast.unparse(annotation)}"]
        if outer == "Literal":
            allowed = [ast.literal_eval(arg) for arg in args]
            return [] if value in allowed else [f"{where}: {value!r} is not one of {allowed}"]
        if outer == "List":
            if not isinstance(value, list):
                return [f"{where}: {value!r} is not a list"]
            return [problem for i, item in enumerate(value) for problem in mismatch(item, args[0], f"{where}[{i}]")]
        raise AssertionError(f"the check does not know {ast.unparse(annotation)}")
    name = ast.unparse(annotation)
    shapes = typed_dicts()
    if name in shapes:
        if not isinstance(value, dict):
            return [f"{where}: {value!r} is not a {name}"]
        keys = shapes[name]
        required = {k for k, a in keys.items() if not (isinstance(a, ast.Subscript) and ast.unparse(a.value) == "NotRequired")}
        problems = [f"{where}: {name} has no key {key!r} (the stub is behind)" for key in sorted(set(value) - set(keys))]
        problems += [f"{where}: key {key!r} of {name} is missing" for key in sorted(required - set(value))]
        for key in set(value) & set(keys):
            problems += mismatch(value[key], keys[key], f"{where}.{key}")
        return problems
    types = {"int": int, "str": str, "bool": bool, "float": (int, float), "_Json": dict}
    if name not in types:
        raise AssertionError(f"the check does not know {name}")
    # bool is an int in Python: an int annotation takes no bool.
    fits = isinstance(value, types[name]) and not (name == "int" and isinstance(value, bool))
    return [] if fits else [f"{where}: {value!r} is not {name}"]


def returns(cls: str, method: str) -> ast.expr:
    for node in stub_tree().body:
        if isinstance(node, ast.ClassDef) and node.name == cls:
            for item in node.body:
                if isinstance(item, ast.FunctionDef) and item.name == method and item.returns is not None:
                    return item.returns
    raise AssertionError(f"the stub has no {cls}.{method} with a return type")


def test_the_dicts_have_the_shapes_of_the_stub(db_path) -> None:
    engine = _strata.Engine(str(db_path), SMALL_WINDOW)
    session = engine.session("shapes", "coder")
    messages = transcript(400)
    messages.insert(5, {"role": "user", "content": "From now on, answer in British English."})
    messages.insert(9, {"role": "user", "content": "From now on, indent with tabs."})
    session.append_many(messages)
    session.append({"role": "assistant", "content": "Done.", "reasoning_content": "The user asked twice."})
    session.compact()
    engine.save_memory("coder", "memo", "deploys", "Deploys run on Fridays.")
    assert any("as_sent" in message for message in session.messages(0, None)), "a message keeps more than its keys"
    proposals = engine.proposals("coder")
    assert len(proposals) >= 2, "the extractive summarizer proposes what is said in so many words"
    calls = [
        ("Engine", "sessions", lambda: engine.sessions(None)),
        ("Engine", "save_memory", lambda: engine.save_memory("coder", "progress", "migration", "Invoices moved.")),
        ("Engine", "memory", lambda: engine.memory("coder", "memo", "deploys")),
        ("Engine", "memories", lambda: engine.memories("coder")),
        ("Engine", "proposals", lambda: engine.proposals("coder")),
        ("Engine", "accept_proposal", lambda: engine.accept_proposal("coder", proposals[0]["key"])),
        ("Engine", "reject_proposal", lambda: engine.reject_proposal("coder", proposals[1]["key"])),
        ("Engine", "stats", engine.stats),
        ("Engine", "doctor", lambda: engine.doctor(False)),
        ("Session", "messages", lambda: session.messages(0, None)),
        ("Engine", "forget", lambda: engine.forget(session="shapes", before=1.8e9, dry_run=True)),
        ("Engine", "forget", lambda: engine.forget(session="shapes", dry_run=False)),
    ]
    problems: List[str] = []
    for cls, method, call in calls:
        answer = call()
        assert answer, f"{cls}.{method} answered {answer!r}: nothing to check"
        problems += mismatch(answer, returns(cls, method), f"{cls}.{method}()")
    engine.close()
    assert not problems, "the dicts differ from the stub:\n" + "\n".join(problems)
