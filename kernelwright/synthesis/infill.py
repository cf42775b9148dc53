"""Infill tasks from verified solutions: hide one CUDA-critical region, keep the rest, ask for the region.

    from kernelwright.synthesis.infill import infill_tasks, write_infill
    tasks = infill_tasks(task.id, task.reference, task.solution, task.signature, task.family)
    write_infill(tasks, workdir / "synthesize" / "infill" / "heldout")

Regions are found in the CUDA string of the solution with the span parser (`cuda/spans.py`,
tree-sitter-cuda) and widened to whole statements of one block, so that the hidden text is a
well-formed run of statements:

- index_guard: in a kernel, the declarations computing the thread's index followed by the `if`
  bounds guard or the bounded (grid- or block-stride) loop that uses them; else such a loop alone;
- reduction_loop: the innermost loop holding a warp shuffle, or a barrier tree loop (`s >>= 1`),
  with the barrier statements right before and after it (and its `#pragma unroll`);
- smem_tiling: from the `__shared__` declarations to the loop that stores into them, with its barriers;
- launch_config: in host code, the declarations the `<<<...>>>` configuration reads (and an early
  return on them) through the launch statement.

At most one task per kind and solution: the first region of the kind, in the order above, that is
no longer than `MAX_LINES[kind]` lines (a longer one is most of a kernel, not one region of it) and
whose text does not recur elsewhere in the file (else it takes in up to `WIDEN` statements next to it,
as in two-pass kernels whose passes hold the same reduction loop). The prompt, the splice and the
folder layout are `kernelwright/infill_format.py`'s.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import tree_sitter

from kernelwright.cuda.spans import (
    BARRIERS,
    COMPARISONS,
    INDEX_BUILTINS,
    Span,
    SpanResult,
    cuda_parser,
    cuda_source_spans,
    cuda_string_literals,
    is_device_function,
    walk,
)
from kernelwright.infill_format import (
    MARKER_RE,
    REGION_KINDS,
    InfillTask,
    answer_text,
    load_infill,
    marker,
    splice,
    write_infill,
)

__all__ = ["MAX_LINES", "REGION_KINDS", "InfillTask", "Region", "find_regions", "infill_tasks", "load_infill",
           "region_candidates", "write_infill"]

MAX_LINES = {"index_guard": 15, "reduction_loop": 15, "smem_tiling": 30, "launch_config": 15}
WIDEN = 3  # statements a region may take in next to it, where the region alone recurs in the file
LOOPS = frozenset({"for_statement", "while_statement", "do_statement"})
_TREE_UPDATE = re.compile(r">>=|>>|/=|\*=\s*2\b|<<=")


@dataclass(frozen=True)
class Region:
    kind: str
    start: int  # character offset into the solution file, inclusive
    end: int  # exclusive


def _text(node: tree_sitter.Node) -> str:
    return node.text.decode("utf-8", "replace") if node.text is not None else ""


def _statement(node: tree_sitter.Node) -> tree_sitter.Node | None:
    """The statement of a block (`{ ... }`) that holds `node`; None outside any block."""
    while node.parent is not None and node.parent.type != "compound_statement":
        if node.type == "function_definition":
            return None
        node = node.parent
    return node if node.parent is not None else None


def _function(node: tree_sitter.Node) -> tree_sitter.Node | None:
    parent = node.parent
    while parent is not None and parent.type != "function_definition":
        parent = parent.parent
    return parent


def _is_kernel(fn: tree_sitter.Node | None) -> bool:
    return fn is not None and any(c.type == "__global__" for c in fn.children)


def _prev(node: tree_sitter.Node) -> tree_sitter.Node | None:
    p = node.prev_named_sibling
    while p is not None and p.type == "comment":
        p = p.prev_named_sibling
    return p


def _next(node: tree_sitter.Node) -> tree_sitter.Node | None:
    n = node.next_named_sibling
    while n is not None and n.type == "comment":
        n = n.next_named_sibling
    return n


def _identifiers(node: tree_sitter.Node) -> set[str]:
    return {_text(n) for n in walk(node) if n.type == "identifier"}


def _declared(decl: tree_sitter.Node) -> set[str]:
    names: set[str] = set()
    for top in decl.children_by_field_name("declarator"):
        d: tree_sitter.Node | None = top
        while d is not None and d.type != "identifier":
            d = d.child_by_field_name("declarator") or next((c for c in d.named_children if c.type == "identifier"),
                                                             None)
        if d is not None:
            names.add(_text(d))
    return names


def _uses_index(node: tree_sitter.Node) -> bool:
    return any(n.type == "field_expression" and (a := n.child_by_field_name("argument")) is not None
               and _text(a) in INDEX_BUILTINS for n in walk(node))


def _compares(node: tree_sitter.Node | None) -> bool:
    if node is None:
        return False
    return any(n.type == "binary_expression" and (op := n.child_by_field_name("operator")) is not None
               and op.type in COMPARISONS for n in walk(node))


def _is_barrier(stmt: tree_sitter.Node | None) -> bool:
    if stmt is None or stmt.type != "expression_statement" or not stmt.named_children:
        return False
    call = stmt.named_children[0]
    fn = call.child_by_field_name("function") if call.type == "call_expression" else None
    return fn is not None and BARRIERS.match(_text(fn)) is not None


def _with_pragma(first: tree_sitter.Node) -> tree_sitter.Node:
    p = first.prev_named_sibling
    return p if p is not None and p.type == "preproc_call" and _text(p).startswith("#pragma") else first


def _with_barriers(first: tree_sitter.Node, last: tree_sitter.Node) -> tuple[tree_sitter.Node, tree_sitter.Node]:
    before, after = _prev(first), _next(last)
    return (before if before is not None and _is_barrier(before) else first), \
        (after if after is not None and _is_barrier(after) else last)


Range = tuple[tree_sitter.Node, tree_sitter.Node]  # first and last statement of one block


def _header(loop: tree_sitter.Node) -> list[tree_sitter.Node]:
    return [n for f in ("initializer", "condition", "update") if (n := loop.child_by_field_name(f)) is not None]


def _index_guard(root: tree_sitter.Node, spans: list[Span]) -> Iterator[Range]:
    kernels = [n for n in walk(root) if n.type == "function_definition" and _is_kernel(n)]
    for fn in kernels:
        body = fn.child_by_field_name("body")
        stmts = [c for c in (body.named_children if body is not None else []) if c.type != "comment"]
        for i, stmt in enumerate(stmts):  # index declarations, then the guard or the loop that reads them
            if stmt.type != "declaration" or not _uses_index(stmt):
                continue
            names: set[str] = set()
            j = i
            while j < len(stmts) and stmts[j].type == "declaration":
                names |= _declared(stmts[j])
                j += 1
            guard = stmts[j] if j < len(stmts) else None
            if guard is not None and guard.type in ("if_statement", "for_statement"):
                cond = guard.child_by_field_name("condition")
                heads = [cond] if guard.type == "if_statement" else _header(guard)
                if _compares(cond) and any(_identifiers(h) & names or _uses_index(h) for h in heads if h):
                    yield stmt, guard
            break
        for loop in (n for n in walk(fn) if n.type == "for_statement"):  # a loop bounded on the thread's index
            heads = [n for n in _header(loop) if n != loop.child_by_field_name("condition")]
            if _compares(loop.child_by_field_name("condition")) and any(_uses_index(h) for h in heads):
                stmt = _statement(loop)
                if stmt is not None:
                    yield _with_pragma(stmt), stmt


def _reduction_loop(root: tree_sitter.Node, spans: list[Span]) -> Iterator[Range]:
    for span in spans:
        if span.kind not in ("warp_intrinsic", "barrier"):
            continue
        node: tree_sitter.Node | None = root.descendant_for_byte_range(span.start, span.end)
        while node is not None and node.type not in LOOPS and node.type != "function_definition":
            node = node.parent
        if node is None or node.type not in LOOPS:
            continue
        if span.kind == "barrier" and not _is_tree_loop(node):
            continue
        stmt = _statement(node)
        if stmt is not None:
            yield _with_barriers(_with_pragma(stmt), stmt)


def _stores_into(loop: tree_sitter.Node, names: set[str]) -> bool:
    for n in walk(loop):
        if n.type == "assignment_expression":
            left = n.child_by_field_name("left")
            while left is not None and left.type == "subscript_expression":
                left = left.child_by_field_name("argument")
            if left is not None and left.type == "identifier" and _text(left) in names:
                return True
    return False


def _has_barrier(node: tree_sitter.Node) -> bool:
    return any(n.type == "call_expression" and (f := n.child_by_field_name("function")) is not None
               and BARRIERS.match(_text(f)) is not None for n in walk(node))


def _is_tree_loop(loop: tree_sitter.Node) -> bool:
    update = loop.child_by_field_name("update")
    return update is not None and _TREE_UPDATE.search(_text(update)) is not None


def _fills(stmt: tree_sitter.Node, names: set[str]) -> bool:
    """A loop (not a halving tree loop) that stores into one of the shared arrays `names`."""
    return any(n.type in LOOPS and not _is_tree_loop(n) and _stores_into(n, names) for n in walk(stmt))


def _smem_tiling(root: tree_sitter.Node, spans: list[Span]) -> Iterator[Range]:
    decls = [d for s in spans if s.kind == "shared_decl"
             if (d := root.descendant_for_byte_range(s.start, s.end)) is not None and d.type == "declaration"]
    functions = [fn for fn in dict.fromkeys(_function(d) for d in decls) if fn is not None and is_device_function(fn)]
    for fn in functions:
        mine = [d for d in decls if _function(d) == fn]
        names = set().union(*(_declared(d) for d in mine))
        first = _statement(mine[0])
        top = _next(first) if first is not None else None  # the declarations through the first fill statement
        while top is not None and not _fills(top, names):
            top = _next(top)
        if first is not None and top is not None and (_has_barrier(top) or _is_barrier(_next(top))):
            after = _next(top)
            yield first, (after if after is not None and _is_barrier(after) else top)
        for barrier in (n for n in walk(fn) if n.type == "expression_statement" and _is_barrier(n)):
            run: list[tree_sitter.Node] = []  # the fill statements right before a barrier, with it
            prev = _prev(barrier)
            while prev is not None and _stores_into(prev, names):
                run.append(prev)
                prev = _prev(prev)
            if any(_fills(s, names) for s in run):
                yield _with_pragma(run[-1]), barrier


def _returns_on(stmt: tree_sitter.Node, names: set[str]) -> bool:
    """An `if (...) return ...;` whose condition reads one of `names`."""
    cond, then = stmt.child_by_field_name("condition"), stmt.child_by_field_name("consequence")
    return stmt.type == "if_statement" and cond is not None and then is not None \
        and bool(_identifiers(cond) & names) and any(n.type == "return_statement" for n in walk(then))


def _launch_config(root: tree_sitter.Node, spans: list[Span]) -> Iterator[Range]:
    for span in spans:
        if span.kind != "launch_config":
            continue
        config = root.descendant_for_byte_range(span.start, span.end)
        fn = _function(config) if config is not None else None
        last = _statement(config) if config is not None else None
        if config is None or fn is None or is_device_function(fn) or last is None or config.parent is None:
            continue
        # the sizes only the configuration reads: a name the launch passes or later code reads stays shown
        args = config.parent.child_by_field_name("arguments")
        shown = (_identifiers(args) if args is not None else set()) | {
            _text(n) for n in walk(fn) if n.type == "identifier" and n.start_byte >= last.end_byte}
        needed = _identifiers(config)
        first, prev = last, _prev(last)
        while prev is not None:
            if prev.type == "declaration" and _declared(prev) & needed and not _declared(prev) & shown:
                needed |= _identifiers(prev)
            elif not _returns_on(prev, needed):
                break
            first, prev = prev, _prev(prev)
        yield first, last


FINDERS: dict[str, Callable[[tree_sitter.Node, list[Span]], Iterator[Range]]] = {
    "index_guard": _index_guard, "reduction_loop": _reduction_loop, "smem_tiling": _smem_tiling,
    "launch_config": _launch_config,
}


def _well_formed(code: bytes) -> bool:
    """`code` parses as a run of statements of a function body."""
    tree = cuda_parser().parse(b"void kw_infill_region() {\n" + code + b"\n}\n")
    return not tree.root_node.has_error


def _byte_spans(cuda: str) -> list[Span]:
    spans = cuda_source_spans(cuda)
    if len(cuda.encode("utf-8")) == len(cuda):
        return spans
    return [Span(len(cuda[:s.start].encode("utf-8")), len(cuda[:s.end].encode("utf-8")), s.kind) for s in spans]


def _widened(first: tree_sitter.Node, last: tree_sitter.Node) -> Iterator[Range]:
    """The range itself, then with up to WIDEN neighbouring statements of its block (fewest first; those
    after it before those before it), for when the range alone recurs elsewhere in the file."""
    yield first, last
    for k in range(1, WIDEN + 1):
        for after in range(k, -1, -1):
            lo: tree_sitter.Node | None = first
            hi: tree_sitter.Node | None = last
            for _ in range(k - after):
                lo = _prev(lo) if lo is not None else None
            for _ in range(after):
                hi = _next(hi) if hi is not None else None
            if lo is not None and hi is not None:
                yield lo, hi


def region_candidates(solution: str) -> Iterator[Region]:
    """Every candidate region of `solution`, kind by kind (REGION_KINDS order), each kind's in preference order."""
    literals = []
    for offset, cuda in cuda_string_literals(solution, SpanResult()):
        data = cuda.encode("utf-8")
        literals.append((offset, data, cuda_parser().parse(data).root_node, _byte_spans(cuda)))
    for kind in REGION_KINDS:
        for offset, data, root, spans in literals:
            for first, last in FINDERS[kind](root, spans):
                for wide_first, wide_last in _widened(first, last):
                    start = offset + len(data[:wide_first.start_byte].decode("utf-8", "replace"))
                    code = data[wide_first.start_byte:wide_last.end_byte].decode("utf-8", "replace")
                    yield Region(kind, start, start + len(code))


def _usable(solution: str, region: Region, max_lines: int) -> bool:
    """Short enough, well-formed, not shown elsewhere in the file, and spliced back it gives `solution`."""
    answer = solution[region.start:region.end]
    partial = solution[:region.start] + marker(region.kind) + solution[region.end:]
    return (bool(answer.strip()) and answer.count("\n") < max_lines and _well_formed(answer.encode("utf-8"))
            and answer not in partial and splice(partial, answer_text(answer)) == solution)


def find_regions(solution: str, max_lines: dict[str, int] | None = None) -> dict[str, Region]:
    """The first usable region of each kind in the CUDA sources of `solution`, by kind."""
    limits = max_lines or MAX_LINES
    found: dict[str, Region] = {}
    if MARKER_RE.search(solution):
        return found
    for region in region_candidates(solution):
        if region.kind not in found and _usable(solution, region, limits[region.kind]):
            found[region.kind] = region
    return found


def infill_tasks(task_id: str, reference: str, solution: str, signature: str, family: str) -> list[InfillTask]:
    """One infill task per region kind found in `solution` (in REGION_KINDS order), each of which splices
    back to `solution` exactly."""
    return [InfillTask(id=f"{task_id}__{kind}", task_id=task_id, kind=kind, reference=reference,
                       partial=solution[:r.start] + marker(kind) + solution[r.end:], answer=solution[r.start:r.end],
                       signature=signature, family=family)
            for kind, r in find_regions(solution).items()]
