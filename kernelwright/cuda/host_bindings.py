"""Bindings of a split build's host file without pybind11 in it: one object, built once, binds them all.

    (the object is built by cuda/pch.py's header thread beside the slim header; split_build.py uses it)

After the slim header (torch/types.h + torch/python.h) an empty host file still costs g++ about
3.9 CPU-s, most of it instantiating what pybind11's and torch's Python headers leave pending;
after torch/types.h alone it costs about 1.7 (the dev machine; bench/host_header.py measures whole
files). A host file needs torch/python.h only for the bindings `load_inline(functions=...)` writes
into it. Here the bindings live elsewhere:

- `GENERIC`: a C++ file of kernelwright's own (no candidate text in it), compiled once per host into
  `kw_host_bindings.cpp.o` beside torch's headers, stamped like the slim header. It defines
  `kw_make_module(name, fns, n)`: a module whose functions take positional arguments, load each
  with pybind11's own casters (torch's for tensors, in convert mode as pybind11's overload
  resolution ends with), call the candidate's function inside torch's error handling
  (`HANDLE_TH_ERRORS`, as `torch::wrap_pybind_function` does) and return its result as pybind11
  would; a wrong count or type of arguments is a `TypeError`, as before.
- `shim(functions)`: appended to the candidate's host file, per bound function a call stub
  `kw_call_<i>(void* const* args, void* result)` that casts the argument slots and calls it, their
  table, and `PyInit_<TORCH_EXTENSION_NAME>` calling `kw_make_module`: plain C++ over torch/types.h.
  The object is linked into the candidate's extension (`extra_ldflags`).

`bound_functions` reads the signatures from the host sources' declarations (tree-sitter) and
answers why not when any of `functions` is outside what the object converts: a parameter other than
a tensor (`torch::Tensor`/`at::Tensor` by value or reference), `int`, `int64_t`/`long`/`long long`,
`float`, `double`, `bool`, a `std::vector` of tensors, `int64_t`, `int` or `double`, or an optional
(`c10::optional`/`std::optional`) tensor, `int64_t` or `double` (these by value or const reference);
a result other than a tensor, a scalar of those, `void`, `std::vector` of tensors or `std::tuple` of
tensors; an overload; a function declared nowhere at top level; a file that names pybind11 itself.
The split build then reads the slim header as before.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable

import tree_sitter

from kernelwright.cuda.spans import cuda_parser
from kernelwright.cuda.split_syntax import declared_name, node_text

_PYBIND = re.compile(r"\bPYBIND11_|\bpybind11::|\bpy::|torch/python\.h")
_NAME = re.compile(r"[A-Za-z_]\w*\Z")
_TENSOR = {"torch::Tensor", "at::Tensor", "Tensor"}
_SCALARS = {"int": "i", "int32_t": "i", "std::int32_t": "i", "int64_t": "l", "std::int64_t": "l", "long": "l",
            "longint": "l", "longlong": "l", "float": "f", "double": "d", "bool": "b"}
# parameters passed by value or const reference, besides the scalars: lists of tensors, int64_t, int or
# double; an optional tensor, int64_t or double
_OPTIONAL = ("c10::optional", "std::optional")
_VALUES = _SCALARS | {f"std::vector<{t}>": "L" for t in ("int64_t", "std::int64_t", "long")} | {
    "std::vector<double>": "D", "std::vector<int>": "I"} | {f"std::vector<{t}>": "V" for t in _TENSOR} | {
    f"{o}<{t}>": "O" for o in _OPTIONAL for t in _TENSOR} | {
    f"{o}<{t}>": "q" for o in _OPTIONAL for t in ("int64_t", "std::int64_t", "long")} | {
    f"{o}<double>": "p" for o in _OPTIONAL}
# the C++ type of each code's slot in GENERIC's `Slot` (what a stub casts `void*` to)
SLOT_TYPE = {"T": "at::Tensor", "i": "int", "l": "int64_t", "f": "float", "d": "double", "b": "bool",
             "V": "std::vector<at::Tensor>", "U": "std::vector<at::Tensor>", "L": "std::vector<int64_t>",
             "D": "std::vector<double>", "I": "std::vector<int>", "O": "std::optional<at::Tensor>",
             "q": "std::optional<int64_t>", "p": "std::optional<double>"}


@dataclasses.dataclass(frozen=True)
class Bound:
    """One function of `functions` the object can bind: its name, docstring and signature codes."""

    name: str
    doc: str
    result: str  # one code: T i l f d b (as the parameters), v void, V vector of tensors, U tuple of tensors
    params: str  # one code per parameter: T i l f d b; lists: V tensors, L int64_t, I int, D double;
    # optionals: O tensor, q int64_t, p double


def requested(functions: object) -> list[tuple[str, str]] | None:
    """`load_inline`'s `functions` as (name, docstring) pairs, torch's way (a name, a list, or a dict
    of name to docstring); None when there are none or the value is of another kind."""
    if isinstance(functions, str):
        return [(functions, functions)]
    if isinstance(functions, dict) and all(isinstance(k, str) and isinstance(v, str) for k, v in functions.items()):
        return list(functions.items()) or None
    if isinstance(functions, (list, tuple)) and all(isinstance(f, str) for f in functions):
        return [(f, f) for f in functions] or None
    return None


def bound_functions(sources: Iterable[str], functions: object) -> list[Bound] | str:
    """The signatures of `functions` read from `sources` (the host file's parts), or why the generic
    bindings cannot take them."""
    wanted = requested(functions)
    if wanted is None:
        return "no functions to bind"
    text = "\n".join(sources)
    if _PYBIND.search(text):
        return "the sources use pybind11 themselves"
    if len({name for name, _ in wanted}) != len(wanted) or not all(_NAME.match(name) for name, _ in wanted):
        return "a function name that is not a plain identifier, or named twice"
    found = _signatures(cuda_parser().parse(text.encode("utf-8")).root_node, {name for name, _ in wanted})
    out = []
    for name, doc in wanted:
        sigs = found.get(name, set())
        if len(sigs) != 1:
            return f"{name}: {'declared nowhere at top level' if not sigs else 'overloaded'}"
        sig = next(iter(sigs))
        if sig is None:
            return f"{name}: a parameter or result type the generic bindings do not convert"
        out.append(Bound(name, doc, sig[0], sig[1]))
    return out


def _signatures(root: tree_sitter.Node, names: set[str]) -> dict[str, set[tuple[str, str] | None]]:
    """Per wanted name, the distinct signatures its top-level declarations and definitions give
    (None for one that is not convertible)."""
    out: dict[str, set[tuple[str, str] | None]] = {}
    for node in root.named_children:
        if node.type not in ("declaration", "function_definition"):
            continue
        for decl in node.children_by_field_name("declarator"):
            fn = decl
            while fn.type in ("reference_declarator", "pointer_declarator") and fn.named_children:
                fn = fn.named_children[-1]
            if fn.type != "function_declarator" or (name := declared_name(fn)) not in names:
                continue
            result = None if fn is not decl else _result_code(node)
            params = _param_codes(fn.child_by_field_name("parameters"))
            out.setdefault(name, set()).add((result, params) if result and params is not None else None)
    return out


def _norm(type_node: tree_sitter.Node | None) -> str:
    return re.sub(r"\s+", "", node_text(type_node))


def _result_code(node: tree_sitter.Node) -> str | None:
    kind = _norm(node.child_by_field_name("type"))
    if kind == "void":
        return "v"
    for container, code in (("std::vector<", "V"), ("std::tuple<", "U")):
        if kind.startswith(container) and kind.endswith(">"):
            inner = kind[len(container):-1].split(",")
            ok = all(t in _TENSOR for t in inner) and (code == "U" or len(inner) == 1)
            return code if ok else None
    return "T" if kind in _TENSOR else _SCALARS.get(kind)


def _param_codes(plist: tree_sitter.Node | None) -> str | None:
    if plist is None:
        return None
    codes = []
    for p in plist.named_children:
        if p.type == "comment":
            continue
        if p.type not in ("parameter_declaration", "optional_parameter_declaration"):
            return None
        kind = _norm(p.child_by_field_name("type"))
        if kind == "void" and len(plist.named_children) == 1 and p.child_by_field_name("declarator") is None:
            return ""
        const = any(node_text(c) == "const" for c in p.children if c.type == "type_qualifier")
        decl = p.child_by_field_name("declarator")
        ref = decl is not None and decl.type in ("reference_declarator", "abstract_reference_declarator")
        if decl is not None and not ref and decl.type != "identifier":
            return None  # a pointer, an array, a function
        if ref and node_text(decl).lstrip().startswith("&&"):
            return None  # an rvalue reference: the stub passes lvalues
        if kind in _TENSOR:
            codes.append("T")
        elif kind in _VALUES and (const or not ref):
            codes.append(_VALUES[kind])
        else:
            return None
    return "".join(codes)


def _c_string(text: str) -> str:
    """`text` as a C++ string literal (octal escapes for every byte outside plain ASCII)."""
    out = []
    for byte in text.encode("utf-8"):
        ch = chr(byte)
        out.append(ch if 32 <= byte < 127 and ch not in '"\\?' else f"\\{byte:03o}")
    return '"' + "".join(out) + '"'


def shim(bound: list[Bound]) -> str:
    """The host file's tail for `bound`: call stubs, their table and the module's `PyInit_`. Every
    name it introduces starts with `kw_`/`KW_` (the candidate's macros, `#define T 16` say, come
    before it); a clash still only fails the build, which then takes the slim header."""
    lines = ["namespace kw_bind { struct Fn { const char* name; const char* doc; const char* sig;"
             " void (*call)(void* const*, void*); }; }",
             'extern "C" struct _object* kw_make_module(const char* name, const kw_bind::Fn* fns, int n);',
             "template <class KwTuple> static void kw_tuple(KwTuple&& kw_t, std::vector<at::Tensor>& kw_out) {",
             "  std::apply([&](auto&... kw_x) { (kw_out.push_back(kw_x), ...); }, kw_t);", "}"]
    for i, fn in enumerate(bound):
        args = ", ".join(f"*static_cast<{SLOT_TYPE[c]}*>(kw_a[{k}])" for k, c in enumerate(fn.params))
        call = f"{fn.name}({args})"
        if fn.result == "v":
            body = f"{call};"
        elif fn.result == "U":
            body = f"kw_tuple({call}, *static_cast<std::vector<at::Tensor>*>(kw_r));"
        else:
            body = f"*static_cast<{SLOT_TYPE[fn.result]}*>(kw_r) = {call};"
        lines.append(f"static void kw_call_{i}(void* const* kw_a, void* kw_r) {{ (void)kw_a; (void)kw_r; {body} }}")
    table = ", ".join(f"{{{_c_string(fn.name)}, {_c_string(fn.doc)}, \"{fn.result}:{fn.params}\", kw_call_{i}}}"
                      for i, fn in enumerate(bound))
    lines += [f"static const kw_bind::Fn kw_fns[] = {{{table}}};",
              "#define KW_CAT2(a, b) a##b", "#define KW_CAT(a, b) KW_CAT2(a, b)",
              "#define KW_STR2(a) #a", "#define KW_STR(a) KW_STR2(a)",
              'extern "C" __attribute__((visibility("default")))',
              "struct _object* KW_CAT(PyInit_, TORCH_EXTENSION_NAME)() {",
              f"  return kw_make_module(KW_STR(TORCH_EXTENSION_NAME), kw_fns, {len(bound)});", "}"]
    return "\n".join(lines) + "\n"


GENERIC = r"""// kernelwright: the generic bindings of split builds' host files (kernelwright/cuda/host_bindings.py)
#include <torch/types.h>
#include <torch/python.h>
#include <pybind11/stl.h>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

namespace kw_bind {
struct Fn { const char* name; const char* doc; const char* sig; void (*call)(void* const*, void*); };
}

namespace {
namespace py = pybind11;

struct Slot {
  at::Tensor t;
  std::vector<at::Tensor> v;
  int64_t l = 0;
  int i = 0;
  double d = 0;
  float f = 0;
  bool b = false;
  std::vector<int64_t> vl;
  std::vector<double> vd;
  std::vector<int> vi;
  std::optional<at::Tensor> ot;
  std::optional<int64_t> ol;
  std::optional<double> od;
};

template <typename T>
bool load(py::handle h, T& out) {
  py::detail::make_caster<T> caster;
  if (!caster.load(h, true)) return false;
  out = py::detail::cast_op<T&>(caster);
  return true;
}

void* slot(char code, Slot& s) {
  switch (code) {
    case 'T': return &s.t;
    case 'V': case 'U': return &s.v;
    case 'l': return &s.l;
    case 'i': return &s.i;
    case 'd': return &s.d;
    case 'f': return &s.f;
    case 'b': return &s.b;
    case 'L': return &s.vl;
    case 'D': return &s.vd;
    case 'I': return &s.vi;
    case 'O': return &s.ot;
    case 'q': return &s.ol;
    case 'p': return &s.od;
    default: return nullptr;
  }
}

bool load_slot(char code, py::handle h, Slot& s) {
  switch (code) {
    case 'T': return load(h, s.t);
    case 'l': return load(h, s.l);
    case 'i': return load(h, s.i);
    case 'd': return load(h, s.d);
    case 'f': return load(h, s.f);
    case 'b': return load(h, s.b);
    case 'L': return load(h, s.vl);
    case 'D': return load(h, s.vd);
    case 'V': return load(h, s.v);
    case 'I': return load(h, s.vi);
    case 'O': return load(h, s.ot);
    case 'q': return load(h, s.ol);
    case 'p': return load(h, s.od);
    default: return false;
  }
}

const char* type_name(char code) {
  switch (code) {
    case 'T': return "torch.Tensor";
    case 'l': case 'i': return "int";
    case 'd': case 'f': return "float";
    case 'b': return "bool";
    case 'V': return "list[torch.Tensor]";
    case 'U': return "tuple";
    case 'L': return "list[int]";
    case 'D': return "list[float]";
    case 'I': return "list[int]";
    case 'O': return "torch.Tensor | None";
    case 'q': return "int | None";
    case 'p': return "float | None";
    default: return "None";
  }
}

[[noreturn]] void incompatible(const kw_bind::Fn& fn, const py::args& args) {
  std::string msg = std::string(fn.name) + "(): incompatible function arguments. "
                    "The following argument types are supported:\n    1. (";
  for (const char* p = fn.sig + 2; *p; ++p) {
    msg += std::string(p == fn.sig + 2 ? "" : ", ") + "arg" + std::to_string(p - fn.sig - 2) + ": " + type_name(*p);
  }
  msg += std::string(") -> ") + type_name(fn.sig[0]) + "\n\nInvoked with: ";
  msg += std::string(py::str(py::object(args)));  // py::str(args) is ambiguous in pybind11 3.0.1 (torch 2.11)
  throw py::type_error(msg);
}

py::object result(char code, Slot& r) {
  switch (code) {
    case 'T': return py::cast(std::move(r.t));
    case 'V': return py::cast(std::move(r.v));
    case 'U': return py::tuple(py::cast(std::move(r.v)));
    case 'l': return py::cast(r.l);
    case 'i': return py::cast(r.i);
    case 'd': return py::cast(r.d);
    case 'f': return py::cast(r.f);
    case 'b': return py::cast(r.b);
    default: return py::none();
  }
}

py::object call(const kw_bind::Fn& fn, const py::args& args) {
  const char* params = fn.sig + 2;
  const size_t n = std::strlen(params);
  if (args.size() != n) incompatible(fn, args);
  std::vector<Slot> slots(n + 1);
  std::vector<void*> ptrs(n);
  for (size_t k = 0; k < n; ++k) {
    if (!load_slot(params[k], args[k], slots[k])) incompatible(fn, args);
    ptrs[k] = slot(params[k], slots[k]);
  }
  Slot& r = slots[n];
  HANDLE_TH_ERRORS
  fn.call(ptrs.data(), slot(fn.sig[0], r));
  END_HANDLE_TH_ERRORS_PYBIND
  return result(fn.sig[0], r);
}
}  // namespace

extern "C" __attribute__((visibility("default")))
PyObject* kw_make_module(const char* name, const kw_bind::Fn* fns, int n) {
  PYBIND11_CHECK_PYTHON_VERSION
  PYBIND11_ENSURE_INTERNALS_READY
  auto m = py::module_::create_extension_module(name, nullptr, new PyModuleDef());
  try {
    for (int i = 0; i < n; ++i) {
      const kw_bind::Fn fn = fns[i];
      m.def(fn.name, [fn](const py::args& args) { return call(fn, args); }, fn.doc);
    }
    return m.ptr();
  }
  PYBIND11_CATCH_INIT_EXCEPTIONS
  return nullptr;
}
"""
