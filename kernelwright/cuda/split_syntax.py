"""Tree-sitter helpers of the split build: names, parameters and CUDA execution spaces of top-level items.

Reads nodes of a tree-sitter-cuda parse (`kernelwright.cuda.spans.cuda_parser`): the name a
declarator declares, the function of a (template) definition, a function's execution space, the
identifiers a node uses, a kernel's parameters and the type names a declaration introduces.
`NotSplittable` is what the split build's analysis raises when a source is out of its scope.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

import tree_sitter

IDENT = re.compile(r"[A-Za-z_]\w*")
DEVICE_SPACE = re.compile(r"\b(__device__|__host__|__global__|__CUDA_ARCH__)\b")


class NotSplittable(Exception):
    pass


def node_text(node: tree_sitter.Node | None) -> str:
    return node.text.decode("utf-8", "replace") if node is not None and node.text is not None else ""


def walk(node: tree_sitter.Node) -> Iterator[tree_sitter.Node]:
    stack = [node]
    while stack:
        n = stack.pop()
        yield n
        stack.extend(reversed(n.children))


def declared_name(decl: tree_sitter.Node | None) -> str | None:
    """The identifier a (function/pointer/array/init/reference) declarator declares."""
    while decl is not None:
        if decl.type in ("identifier", "field_identifier"):
            return node_text(decl)
        if decl.type in ("qualified_identifier", "operator_name", "destructor_name"):
            return None
        inner = decl.child_by_field_name("declarator")
        if inner is None:
            inner = next((c for c in decl.named_children if c.type.endswith("declarator") or c.type == "identifier"),
                         None)
        decl = inner
    return None


def fn_of(node: tree_sitter.Node) -> tree_sitter.Node | None:
    if node.type == "function_definition":
        return node
    if node.type == "template_declaration":
        return next((c for c in node.named_children if c.type in ("function_definition", "declaration")), None)
    return None


def device_body_error(node: tree_sitter.Node) -> bool:
    """The parse error of `node` lies only in the body of a `__global__`/`__device__` function."""
    fn = fn_of(node)
    if fn is None or fn.type != "function_definition" or space_of(fn) == "host":
        return False
    declarator = fn.child_by_field_name("declarator")
    return declarator is not None and not declarator.has_error and not any(
        c.has_error for c in node.children if c is not fn and c.type != "compound_statement") and not any(
        c.has_error for c in fn.children if c.type != "compound_statement")


def space_of(node: tree_sitter.Node) -> str:
    """'global', 'device' or 'host' for a function definition or declaration."""
    kinds = {c.type for c in node.children} | {node_text(c) for c in node.children if c.type == "type_qualifier"}
    if "__global__" in kinds:
        return "global"
    if "__device__" in kinds:
        return "device"
    return "host"


def identifiers(node: tree_sitter.Node, skip: set[int] | None = None) -> set[str]:
    out: set[str] = set()
    for n in walk(node):
        if skip and n.id in skip:
            continue
        if n.type in ("identifier", "type_identifier", "namespace_identifier"):
            out.add(node_text(n))
        elif n.type in ("preproc_arg", "ERROR"):
            out.update(IDENT.findall(node_text(n)))
    return out


def kernel_params(fn: tree_sitter.Node) -> tuple[str, list[str]]:
    """A kernel's parameter list as written (without parentheses; "" for none) and its parameter names."""
    decl = fn.child_by_field_name("declarator")
    while decl is not None and decl.type != "function_declarator":
        decl = decl.child_by_field_name("declarator")
    plist = decl.child_by_field_name("parameters") if decl is not None else None
    if plist is None:
        raise NotSplittable("kernel without a parameter list")
    names: list[str] = []
    for p in plist.named_children:
        if p.type == "comment":
            continue
        if p.type != "parameter_declaration":
            raise NotSplittable(f"kernel parameter of kind {p.type}")
        name = declared_name(p.child_by_field_name("declarator"))
        if not name:
            raise NotSplittable("unnamed kernel parameter")
        names.append(name)
    params = node_text(plist)[1:-1].strip()
    return ("" if params == "void" else params), names


def type_names(node: tree_sitter.Node) -> set[str]:
    out = set()
    for n in walk(node):
        if n.type in ("struct_specifier", "class_specifier", "union_specifier", "enum_specifier"):
            name = n.child_by_field_name("name")
            if name is not None:
                out.add(node_text(name))
        elif n.type in ("type_definition", "alias_declaration"):
            out.update(node_text(c) for c in n.children_by_field_name("declarator") if c.type == "type_identifier")
            name = n.child_by_field_name("name")
            if name is not None:
                out.add(node_text(name))
    return out
