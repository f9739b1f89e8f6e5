"""No function outside an op's own definition and the engines' kernel registries branches on op class (issue
20): consumers read the facts an op states (``networks/_ops.py`` ``_Facts``) or dispatch through a registry keyed
by the op protocol's keys. Walking a :class:`Residual`'s body is structure, not a decision about what an op
computes, and is allowed (``op.body_ops`` says the same without naming the class)."""

import ast
import pathlib
import typing

from regioncount.networks import _ops

ROOT = pathlib.Path(__file__).resolve().parents[1] / "regioncount"
#: the op classes a branch may not name (Residual is a block of ops: walking it is structure)
LEAF_OPS = {c.__name__ for c in typing.get_args(_ops.Op)} - {"Residual"}
#: where naming an op class is the op's own definition
DEFINITIONS = {"networks/_ops.py"}
#: engine-internal dispatch written as a chain of class tests, kept until their engines move it into a kernel
#: registry (their owners' work); each entry is (file, function) and the test fails once the branch is gone,
#: so the list cannot go stale
PENDING = {
    ("engines/_curved_exact.py", "op"),  # the certified curved engine's op step (straight and conic walls)
    ("engines/_curved_exact.py", "_pop"),  # and its op step on polynomial maps (walls of degree >= 3)
    ("engines/_space/_predicates.py", "_exact_pieces"),  # GroupMax vs hardmax pieces of an argmax family
}


def _names(node) -> set[str]:
    if isinstance(node, ast.Name):
        return {node.id}
    if isinstance(node, ast.Attribute):
        return {node.attr}
    if isinstance(node, ast.Tuple):
        return set().union(*(_names(e) for e in node.elts)) if node.elts else set()
    return set()


def _class_tests(tree: ast.AST):
    """``(function, line, what)`` for each ``isinstance(x, Op)``, ``type(x) is/== Op``, ``type(x).__name__ ==
    "Op"`` and ``{Op: ...}`` keyed by op class, outside functions registered as kernels."""
    out = []

    def registered(fn) -> bool:
        return any(
            isinstance(d, ast.Call) and isinstance(d.func, ast.Attribute) and d.func.attr == "register"
            for d in fn.decorator_list
        )

    def visit(node, fn: str):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            if registered(node):
                return
            fn = node.name
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "isinstance":
            hit = _names(node.args[1]) & LEAF_OPS if len(node.args) == 2 else set()
            if hit:
                out.append((fn, node.lineno, f"isinstance(..., {sorted(hit)})"))
        if isinstance(node, ast.Compare):
            sides = [node.left, *node.comparators]
            typed = any(isinstance(s, ast.Call) and isinstance(s.func, ast.Name) and s.func.id == "type" for s in sides)
            named = any(isinstance(s, ast.Attribute) and s.attr == "__name__" for s in sides)
            consts = {s.value for s in sides if isinstance(s, ast.Constant)}
            hit = set().union(*(_names(s) for s in sides)) & LEAF_OPS
            if (typed and hit) or (named and consts & LEAF_OPS):
                out.append((fn, node.lineno, "type comparison"))
        if isinstance(node, ast.Dict) and set().union(*(_names(k) for k in node.keys if k is not None)) & LEAF_OPS:
            out.append((fn, node.lineno, "dict keyed by op class"))
        for child in ast.iter_child_nodes(node):
            visit(child, fn)

    visit(tree, "<module>")
    return out


def _scan():
    found = {}
    for path in sorted(ROOT.rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        if rel in DEFINITIONS:
            continue
        for fn, line, what in _class_tests(ast.parse(path.read_text(), str(path))):
            found.setdefault((rel, fn), []).append(f"{rel}:{line} in {fn}: {what}")
    return found


def test_no_branch_on_op_class_outside_definitions_and_registries():
    found = _scan()
    bad = [hit for key, hits in found.items() if key not in PENDING for hit in hits]
    assert not bad, "branches on op class (read the op's facts or register a kernel):\n" + "\n".join(bad)
    gone = PENDING - set(found)
    assert not gone, f"no longer branching (drop them from PENDING): {sorted(gone)}"


def test_the_scan_sees_a_branch():
    src = "def f(op):\n    if isinstance(op, (ReLU, Foo)):\n        return 1\n    return type(op).__name__ == 'GroupMax'\n"
    hits = _class_tests(ast.parse(src))
    assert [(fn, line) for fn, line, _ in hits] == [("f", 2), ("f", 4)]
    reg = "@K.register('relu')\ndef k(op):\n    return isinstance(op, ReLU)\n"
    assert _class_tests(ast.parse(reg)) == []
    assert _class_tests(ast.parse("x = {Attention: 1}"))[0][2] == "dict keyed by op class"
