#!/usr/bin/env python3
"""Checks of the Julia binding that need no Julia runtime (none exists on these machines).

- The generated LibStarling.jl wraps every function of starling.h with the same number
  of arguments and matching types. The reference prototypes come from the C compiler
  itself (gcc -aux-info), not from the generator's parser.
- Struct mirrors: the layout the Julia struct definitions will have (computed here from
  the .jl text with C alignment rules, which isbits Julia structs follow) and the
  generator's own layout JSON both equal what the C compiler reports (sizeof, offsetof,
  field sizes), and so do the enum and #define constants.
- The generator is deterministic and the copy committed in the package is current.
- Every .jl file is syntactically plausible: blocks, brackets and strings balance, and
  the generated file uses no undefined type. With STARLING_TREE_SITTER_PYTHON naming a
  Python that has tree-sitter-julia (PyPI), a real Julia grammar parses every file too. Every export of Starling.jl is defined and
  every C function is used by the Julian layer.

Usage: test_julia_binding.py --header H --generator G --generated F --committed F
       --layout-json J --layout-check EXE --cc CC --include DIR --package DIR
       --example F [unittest test names...]
"""
import argparse
import glob
import json
import os
import re
import subprocess
import sys
import tempfile
import unittest

ARGS = None

# C type (as gcc -aux-info prints it, without const) -> Julia type LibStarling must use.
C_TO_JULIA = {"int": "Cint", "double": "Cdouble", "size_t": "Csize_t", "int64_t": "Int64", "char": "Cchar",
              "void": "Cvoid", "uint64_t": "UInt64"}
# Julia types -> (size, alignment) on x86-64 Linux.
JULIA_SIZES = {"Cint": (4, 4), "Cuint": (4, 4), "Int32": (4, 4), "UInt32": (4, 4), "Cdouble": (8, 8),
               "Csize_t": (8, 8), "Int64": (8, 8), "UInt64": (8, 8), "UInt8": (1, 1), "Int8": (1, 1),
               "Cchar": (1, 1), "UInt16": (2, 2), "Int16": (2, 2)}
JULIA_BUILTIN_TYPES = set(JULIA_SIZES) | {"Cvoid", "Ptr"}


def read(path):
    with open(path, encoding="utf-8") as f:
        return f.read()


def c_prototypes():
    """{name: (return type, [parameter types])} of every function starling.h declares."""
    with tempfile.TemporaryDirectory() as tmp:
        src = os.path.join(tmp, "proto.c")
        info = os.path.join(tmp, "proto.txt")
        with open(src, "w") as f:
            f.write("#include <starling/starling.h>\n")
        subprocess.run([ARGS.cc, "-std=c99", "-I", ARGS.include, "-aux-info", info, "-c", src, "-o",
                        os.path.join(tmp, "proto.o")], check=True)
        lines = read(info).splitlines()
    header = os.path.realpath(ARGS.header)
    protos = {}
    for line in lines:
        m = re.match(r"/\* (\S+):\d+:\w+ \*/ extern (.+?)(\w+) \((.*)\);$", line)
        if not m or os.path.realpath(m.group(1)) != header:
            continue
        params = [] if m.group(4) == "void" else [p.strip() for p in m.group(4).split(",")]
        protos[m.group(3)] = (m.group(2).strip(), params)
    return protos


def expected_julia(ctype):
    """The Julia type for a C type such as 'const DLTensor *'."""
    depth = ctype.count("*")
    base = ctype.replace("*", " ").replace("const", " ").split()
    assert len(base) == 1, ctype
    t = C_TO_JULIA.get(base[0], base[0])  # typedef names are mirrored under their own name
    for _ in range(depth):
        t = "Ptr{" + t + "}"
    return t


def split_top(text):
    """Splits at commas outside braces and parentheses."""
    parts, depth, cur = [], 0, ""
    for ch in text:
        depth += ch in "({"
        depth -= ch in ")}"
        if ch == "," and depth == 0:
            parts.append(cur.strip())
            cur = ""
        else:
            cur += ch
    if cur.strip():
        parts.append(cur.strip())
    return parts


def julia_wrappers(text):
    """{name: (formal args, return type, argument types, passed args)} of the ccall wrappers."""
    wrappers = {}
    pattern = re.compile(r"^function (\w+)\(([^)]*)\)\n    ccall\(\(:(\w+), libstarling\), (.+?), \((.*?)\)(.*)\)\nend$",
                         re.M)
    for m in pattern.finditer(text):
        name, formals, symbol, ret, types, passed = m.groups()
        assert name == symbol, name
        wrappers[name] = (split_top(formals), ret, split_top(types), split_top(passed.lstrip(", ")))
    return wrappers


def julia_structs(text):
    """{name: [(field, type)]} of the `struct ... end` blocks of a generated file."""
    structs = {}
    for m in re.finditer(r"^struct (\w+)\n((?:    \w+::\S+\n)*)end$", text, re.M):
        structs[m.group(1)] = [tuple(line.strip().split("::")) for line in m.group(2).splitlines()]
    return structs


def julia_aliases(text):
    return dict(re.findall(r"^const (\w+) = (Cint|Cuint|Cdouble|Csize_t|Int\d+|UInt\d+|Ptr\{\w+\})$", text, re.M))


def julia_layout(structs, aliases, name):
    offset, align, offsets, sizes = 0, 1, {}, {}
    for field, jtype in structs[name]:
        jtype = aliases.get(jtype, jtype)
        if jtype.startswith("Ptr{"):
            size, a = 8, 8
        elif jtype in structs:
            inner = julia_layout(structs, aliases, jtype)
            size, a = inner["size"], inner["align"]
        else:
            size, a = JULIA_SIZES[jtype]
        offset = (offset + a - 1) // a * a
        offsets[field], sizes[field] = offset, size
        offset += size
        align = max(align, a)
    return {"size": (offset + align - 1) // align * align, "align": align, "offsets": offsets, "field_sizes": sizes}


# ---- a plausibility check of Julia syntax

BLOCK_OPENERS = {"function", "struct", "module", "baremodule", "if", "for", "while", "let", "begin", "try", "do",
                 "quote", "macro"}


def strip_julia(text):
    """Removes comments, strings and character literals; raises on unterminated ones."""
    out, i, n = [], 0, len(text)
    while i < n:
        if text.startswith("#=", i):
            j = text.find("=#", i + 2)
            if j < 0:
                raise SyntaxError("unterminated #= comment")
            i = j + 2
        elif text[i] == "#":
            j = text.find("\n", i)
            i = n if j < 0 else j
        elif text.startswith('"""', i):
            j = text.find('"""', i + 3)
            if j < 0:
                raise SyntaxError('unterminated """ string')
            out.append(' "" ')
            i = j + 3
        elif text[i] == '"':
            m = re.compile(r'"(?:\\.|[^"\\\n])*"').match(text, i)
            if not m:
                raise SyntaxError("unterminated string at offset %d" % i)
            out.append(' "" ')
            i = m.end()
        elif text[i] == "'" and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] in "_)]}'")):
            m = re.compile(r"'(?:\\.|[^'\\\n])'").match(text, i)
            if not m:
                raise SyntaxError("bad character literal at offset %d" % i)
            out.append(" 'c' ")
            i = m.end()
        else:
            out.append(text[i])
            i += 1
    return "".join(out)


def check_julia_syntax(text):
    """Raises SyntaxError unless every block, bracket and string is closed in order."""
    code = strip_julia(text)
    stack = []
    for m in re.finditer(r"[A-Za-z_][A-Za-z_0-9!]*|[()\[\]{}]|\.\.\.|\.", code):
        tok = m.group(0)
        line = code.count("\n", 0, m.start()) + 1
        in_brackets = bool(stack) and stack[-1][0] in "([{"
        prev = code[max(0, m.start() - 1)]
        if prev in ".:" and tok.isidentifier():
            continue  # a field or a symbol (x.end, :end) is not a keyword
        if tok in "([{":
            stack.append((tok, line))
        elif tok in ")]}":
            if not stack or stack[-1][0] != {")": "(", "]": "[", "}": "{"}[tok]:
                raise SyntaxError("line %d: unmatched %r (open: %r)" % (line, tok, stack[-1] if stack else None))
            stack.pop()
        elif tok == "end":
            if in_brackets:
                continue  # indexing: x[end]
            if not stack:
                raise SyntaxError("line %d: 'end' without a block" % line)
            stack.pop()
        elif tok in BLOCK_OPENERS and not (in_brackets and tok in ("for", "if", "begin")):
            stack.append((tok, line))
        elif tok == "type" and code[max(0, m.start() - 9):m.start()].split()[-1:] in (["abstract"], ["primitive"]):
            stack.append((tok, line))
    if stack:
        raise SyntaxError("unclosed %r opened on line %d" % stack[-1])


class JuliaBinding(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.generated = read(ARGS.generated)

    def test_generator_is_deterministic_and_the_committed_copy_is_current(self):
        with tempfile.TemporaryDirectory() as tmp:
            runs = []
            for k in range(2):
                out = os.path.join(tmp, "LibStarling%d.jl" % k)
                subprocess.run([sys.executable, ARGS.generator, ARGS.header, "-o", out], check=True)
                runs.append(read(out))
        self.assertEqual(runs[0], runs[1], "two runs of the generator differ")
        self.assertEqual(runs[0], self.generated, "the build's LibStarling.jl differs from a fresh run")
        self.assertEqual(read(ARGS.committed), self.generated,
                         "bindings/julia/Starling/src/LibStarling.jl is stale; refresh it with: python3 "
                         "bindings/julia/generate.py capi/include/starling/starling.h -o "
                         "bindings/julia/Starling/src/LibStarling.jl")

    def test_every_function_is_wrapped_with_matching_arguments_and_types(self):
        protos = c_prototypes()
        wrappers = julia_wrappers(self.generated)
        self.assertGreater(len(protos), 80)
        self.assertEqual(sorted(protos), sorted(wrappers), "functions of the header vs wrappers")
        for name, (ret, params) in protos.items():
            formals, jret, jtypes, passed = wrappers[name]
            self.assertEqual(len(formals), len(params), name + ": number of arguments")
            self.assertEqual(formals, passed, name + ": every argument is passed on, in order")
            self.assertEqual(jret, expected_julia(ret), name + ": return type")
            self.assertEqual(jtypes, [expected_julia(p) for p in params], name + ": argument types")

    def test_struct_layouts_and_constants_match_the_c_compiler(self):
        c = json.loads(subprocess.run([ARGS.layout_check], check=True, capture_output=True, text=True).stdout)
        generator = json.loads(read(ARGS.layout_json))
        self.assertEqual(generator, c, "the generator's layouts vs the C compiler's")
        structs, aliases = julia_structs(self.generated), julia_aliases(self.generated)
        self.assertEqual(sorted(structs), sorted(k for k in c if k != "constants"))
        for name in structs:
            layout = julia_layout(structs, aliases, name)
            del layout["align"]
            self.assertEqual(layout, c[name], name + ": layout of the Julia struct vs C")
        constants = {n: int(v) for n, v in
                     re.findall(r"^const (\w+) = (?:Cint\()?(-?\d+)\)?$", self.generated, re.M)}
        self.assertEqual(constants, c["constants"], "constants of the Julia file vs C")

    def test_julia_files_are_syntactically_plausible(self):
        files = [ARGS.generated, ARGS.example] + sorted(glob.glob(os.path.join(ARGS.package, "src", "*.jl")))
        for path in files:
            with self.subTest(path=path):
                check_julia_syntax(read(path))
        # The generated file uses only types it defines or Julia's own.
        code = strip_julia(self.generated)
        defined = set(re.findall(r"^(?:const|struct|mutable struct) (\w+)", code, re.M))
        used = set()
        for m in re.finditer(r"::(\S+)", code):
            used |= set(re.findall(r"\w+", m.group(1)))
        for m in re.finditer(r"ccall\(\(:\w+, libstarling\), (.+?), \((.*?)\),", code):
            used |= set(re.findall(r"\w+", m.group(1) + " " + m.group(2)))
        self.assertEqual(used - defined - JULIA_BUILTIN_TYPES, set(), "undefined types")

    @unittest.skipUnless(os.environ.get("STARLING_TREE_SITTER_PYTHON"),
                         "set STARLING_TREE_SITTER_PYTHON to a Python with tree_sitter_julia for a full parse")
    def test_tree_sitter_julia_parses_every_file(self):
        """A real Julia grammar (tree-sitter-julia from PyPI), when available, finds no error."""
        files = [ARGS.generated, ARGS.example] + sorted(glob.glob(os.path.join(ARGS.package, "src", "*.jl")))
        script = (
            "import sys, tree_sitter, tree_sitter_julia\n"
            "p = tree_sitter.Parser(tree_sitter.Language(tree_sitter_julia.language()))\n"
            "def bad(n):\n"
            "    if n.type == 'ERROR' or n.is_missing: yield n.start_point[0] + 1\n"
            "    for c in n.children: yield from bad(c)\n"
            "for f in sys.argv[1:]:\n"
            "    lines = sorted(set(bad(p.parse(open(f, 'rb').read()).root_node)))\n"
            "    if lines: print(f, 'errors on lines', lines)\n")
        result = subprocess.run([os.environ["STARLING_TREE_SITTER_PYTHON"], "-c", script] + files,
                                capture_output=True, text=True, check=True)
        self.assertEqual(result.stdout, "", result.stdout)

    def test_the_checker_rejects_broken_julia(self):
        for broken in ["function f(x)\n  x\n", "struct S\n a::Int\n", "f(x) = (x + 1", "a = [1, 2)\n",
                       'println("open)\n', "end\n", "if x\n for i in y\n end\n"]:
            with self.subTest(code=broken), self.assertRaises(SyntaxError):
                check_julia_syntax(broken)
        check_julia_syntax("x[end] + y[begin:end-1]\nv = [i for i in 1:3 if isodd(i)]\nf(a) do b\n b\nend\n")

    def test_starling_jl_exports_are_defined_and_uses_every_c_function(self):
        sources = {p: strip_julia(read(p)) for p in glob.glob(os.path.join(ARGS.package, "src", "*.jl"))
                   if not p.endswith("LibStarling.jl")}
        code = "\n".join(sources.values())
        exported = set()
        for m in re.finditer(r"^export (.+)$", code, re.M):
            exported |= {e.strip() for e in m.group(1).split(",")}
        defined = set(re.findall(r"^(?:function |mutable struct |struct |const )?(?:Base\.)?(\w+!?)[({ =\n]", code,
                                 re.M))
        self.assertEqual(exported - defined, set(), "exported but never defined")
        used = set(re.findall(r"\bL\.(starling_\w+)", code))
        self.assertEqual(set(c_prototypes()) - used, set(), "C functions the Julian layer never calls")


def main():
    global ARGS
    ap = argparse.ArgumentParser()
    for flag in ("--header", "--generator", "--generated", "--committed", "--layout-json", "--layout-check",
                 "--cc", "--include", "--package", "--example"):
        ap.add_argument(flag, required=True)
    ARGS, rest = ap.parse_known_args()
    unittest.main(argv=[sys.argv[0]] + rest, verbosity=2)


if __name__ == "__main__":
    main()
