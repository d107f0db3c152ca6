#!/usr/bin/env python3
"""Generates LibStarling.jl, the low-level Julia layer of Starling: one `ccall` wrapper
per function of capi/include/starling/starling.h, Julia mirrors of its structs, enums,
constants and handle types, and the DLPack structs they use.

SWIG has no Julia target, so this is a small parser for the header's own style (C99
declarations, one per statement, doc comments before them); it fails loudly on anything
it does not understand rather than guessing. The output depends only on the header:
running it twice gives identical bytes.

    generate.py starling.h -o LibStarling.jl [--layout-json F] [--c-check F]

--layout-json writes the struct layouts the Julia mirrors will have (C alignment rules,
which isbits Julia structs follow); --c-check writes a C program that prints the same
JSON from the C compiler's sizeof/offsetof, so a test can compare the two.
"""
import argparse
import json
import re
import sys

# Julia's reserved words cannot name arguments; `in` and `isa` parse as operators.
JULIA_RESERVED = {
    "baremodule", "begin", "break", "catch", "const", "continue", "do", "else", "elseif", "end", "export",
    "false", "finally", "for", "function", "global", "if", "import", "in", "isa", "let", "local", "macro",
    "module", "quote", "return", "struct", "true", "try", "using", "where", "while", "abstract", "mutable",
    "primitive", "type", "outer",
}

# C scalar types -> (Julia type, size, alignment) on LP64 Linux.
SCALARS = {
    "void": ("Cvoid", 0, 1),
    "char": ("Cchar", 1, 1),
    "int": ("Cint", 4, 4),
    "double": ("Cdouble", 8, 8),
    "size_t": ("Csize_t", 8, 8),
    "int8_t": ("Int8", 1, 1),
    "uint8_t": ("UInt8", 1, 1),
    "int16_t": ("Int16", 2, 2),
    "uint16_t": ("UInt16", 2, 2),
    "int32_t": ("Int32", 4, 4),
    "uint32_t": ("UInt32", 4, 4),
    "int64_t": ("Int64", 8, 8),
    "uint64_t": ("UInt64", 8, 8),
}
POINTER = (8, 8)

# DLPack (dlpack/dlpack.h, whose DLTensor layout is the same in every version): the
# structs Starling's functions take, and the enum values a caller needs.
DLPACK_ENUMS = [("DLDeviceType", [("kDLCPU", 1)]),
                ("DLDataTypeCode", [("kDLInt", 0), ("kDLUInt", 1), ("kDLFloat", 2), ("kDLBfloat", 4)])]
DLPACK_STRUCTS = [
    ("DLDevice", [("DLDeviceType", 0, "device_type"), ("int32_t", 0, "device_id")]),
    ("DLDataType", [("uint8_t", 0, "code"), ("uint8_t", 0, "bits"), ("uint16_t", 0, "lanes")]),
    ("DLTensor", [("void", 1, "data"), ("DLDevice", 0, "device"), ("int32_t", 0, "ndim"),
                  ("DLDataType", 0, "dtype"), ("int64_t", 1, "shape"), ("int64_t", 1, "strides"),
                  ("uint64_t", 0, "byte_offset")]),
]


class ParseError(Exception):
    pass


class Header:
    """Everything the header declares, in source order."""

    def __init__(self):
        self.items = []  # (kind, data) in order
        self.enums = {}  # enum type name -> [(name, value)]
        self.aliases = {}  # typedef name -> C type it stands for (scalars, enums)
        self.handles = {}  # handle typedef -> struct tag
        self.structs = {}  # typedef name -> [(ctype, pointer depth, field name)]
        self.functions = []  # (name, return (ctype, depth), [(ctype, depth, name)], doc)


def preprocess(text):
    """Joins continuation lines, drops `#ifdef __cplusplus` blocks and returns
    (code without preprocessor lines, [(name, params or None, body)] of #defines)."""
    text = re.sub(r"\\\n", " ", text)
    lines, defines, skip = [], [], []
    for line in text.split("\n"):
        s = line.strip()
        if s.startswith("#"):
            directive = s[1:].strip()
            if directive.startswith(("if", "ifdef", "ifndef")):
                skip.append(directive == "ifdef __cplusplus")
            elif directive.startswith("endif"):
                skip.pop()
            elif directive.startswith("define") and not any(skip):
                m = re.match(r"define\s+(\w+)(\(([^)]*)\))?\s*(.*)$", directive)
                params = [p.strip() for p in m.group(3).split(",")] if m.group(2) else None
                defines.append((m.group(1), params, m.group(4).strip()))
            lines.append("")  # keep line numbers for messages
            continue
        lines.append("" if any(skip) else line)
    return "\n".join(lines), defines


TOKEN = re.compile(r"/\*.*?\*/|//[^\n]*|[A-Za-z_]\w*|-?\d+(\.\d+)?[uUlL]*|\S", re.S)


def tokenize(code):
    return [m.group(0) for m in TOKEN.finditer(code)]


def comment_text(token):
    """The text of a /* */ comment without its markers and leading stars."""
    body = token[2:-2] if token.startswith("/*") else token[2:]
    out = []
    for line in body.split("\n"):
        line = re.sub(r"^\s*\*?\s?", "", line).rstrip()
        out.append(line)
    while out and not out[0].strip("-* "):
        out.pop(0)
    while out and not out[-1].strip():
        out.pop()
    return out


def statements(tokens):
    """Splits tokens at top-level ';' into (doc comment lines, tokens without comments)."""
    stmt, doc, depth = [], None, 0
    last_comment = None
    for tok in tokens:
        if tok.startswith("/*") or tok.startswith("//"):
            if not stmt:
                last_comment = comment_text(tok)
            continue
        if not stmt:
            doc, last_comment = last_comment, None
        stmt.append(tok)
        if tok == "{":
            depth += 1
        elif tok == "}":
            depth -= 1
        elif tok == ";" and depth == 0:
            yield doc, stmt[:-1]
            stmt, doc = [], None
    if stmt:
        raise ParseError("unterminated declaration: " + " ".join(stmt))


def parse_decl(tokens):
    """`[const] type [const] [*...] name` -> (ctype, pointer depth, name)."""
    toks = [t for t in tokens if t != "const"]
    if not toks:
        raise ParseError("empty declaration")
    depth = toks.count("*")
    words = [t for t in toks if t != "*"]
    if len(words) == 1:
        return words[0], depth, None
    if words[0] in ("struct", "enum"):
        words = words[1:]
    if len(words) != 2:
        raise ParseError("cannot read declaration: " + " ".join(tokens))
    return words[0], depth, words[1]


def split_commas(tokens):
    parts, cur, depth = [], [], 0
    for t in tokens:
        if t in "({":
            depth += 1
        elif t in ")}":
            depth -= 1
        if t == "," and depth == 0:
            parts.append(cur)
            cur = []
        else:
            cur.append(t)
    if cur:
        parts.append(cur)
    return parts


def parse_enum_body(tokens):
    values, next_value = [], 0
    for part in split_commas(tokens):
        if not part:
            continue
        name = part[0]
        if len(part) > 1:
            if part[1] != "=" or len(part) != 3:
                raise ParseError("enum value must be a literal: " + " ".join(part))
            next_value = int(part[2].rstrip("uUlL"))
        values.append((name, next_value))
        next_value += 1
    return values


def parse(text):
    code, defines = preprocess(text)
    h = Header()
    h.defines = defines
    for doc, st in statements(tokenize(code)):
        if st[:2] == ["extern", '"'] or st == ["}"]:
            continue
        if st[0] == "typedef" and st[1] in ("struct", "enum") and "{" in st:
            kind, tag = st[1], st[2] if st[2] != "{" else None
            open_at, close_at = st.index("{"), len(st) - 1 - st[::-1].index("}")
            name = st[close_at + 1]
            body = st[open_at + 1:close_at]
            if kind == "enum":
                h.enums[name] = parse_enum_body(body)
                h.aliases[name] = "int"
                if tag:
                    h.aliases[tag] = "int"
                h.items.append(("enum", (name, doc)))
            else:
                fields = [parse_decl(f) for f in _split_semis(body)]
                h.structs[name] = fields
                h.items.append(("struct", (name, doc)))
        elif st[0] == "enum" and "{" in st:
            name = st[1]
            body = st[st.index("{") + 1:-1]
            h.enums[name] = parse_enum_body(body)
            h.aliases[name] = "int"
            h.items.append(("enum", (name, doc)))
        elif st[0] == "typedef" and st[1] == "struct" and "*" in st:
            ctype, depth, name = parse_decl(st[1:])
            if depth != 1:
                raise ParseError("handle typedefs must be one pointer: " + " ".join(st))
            h.handles[name] = ctype
            h.items.append(("handle", (name, doc)))
        elif st[0] == "typedef":
            ctype, depth, name = parse_decl(st[1:])
            if depth or ctype not in SCALARS:
                raise ParseError("unsupported typedef: " + " ".join(st))
            h.aliases[name] = ctype
            h.items.append(("alias", (name, doc)))
        elif st[0] == "STARLING_API":
            open_at = st.index("(")
            ret = parse_decl(st[1:open_at])
            params = [] if st[open_at + 1:-1] == ["void"] else [parse_decl(p) for p in split_commas(st[open_at + 1:-1])]
            if st[-1] != ")":
                raise ParseError("function declaration must end with ')': " + " ".join(st))
            for p in params:
                if p[2] is None:
                    raise ParseError(ret[2] + ": every parameter needs a name")
            h.functions.append((ret[2], ret[:2], params, doc))
            h.items.append(("function", (ret[2], doc)))
        else:
            raise ParseError("unsupported declaration: " + " ".join(st))
    return h


def _split_semis(tokens):
    parts, cur = [], []
    for t in tokens:
        if t == ";":
            parts.append(cur)
            cur = []
        else:
            cur.append(t)
    if cur:
        raise ParseError("struct field without ';': " + " ".join(cur))
    return parts


class Types:
    """Maps C types to Julia types and computes C/Julia layouts."""

    def __init__(self, h):
        self.h = h
        self.structs = dict((n, f) for n, f in DLPACK_STRUCTS)
        self.structs.update(h.structs)
        self.enum_aliases = {name for name, _ in DLPACK_ENUMS} | set(h.aliases)

    def resolve(self, ctype):
        while ctype in self.h.aliases and self.h.aliases[ctype] != ctype:
            ctype = self.h.aliases[ctype]
        return "int" if ctype in self.enum_aliases and ctype not in SCALARS else ctype

    def julia(self, ctype, depth):
        if depth == 0:
            if ctype in SCALARS:
                return SCALARS[ctype][0]
            if ctype in self.structs or ctype in self.h.handles or ctype in self.enum_aliases:
                return ctype
            raise ParseError("unknown type " + ctype)
        return "Ptr{" + self.julia(ctype, depth - 1) + "}"

    def size_align(self, ctype, depth):
        if depth or ctype in self.h.handles:
            return POINTER
        if ctype in self.structs:
            layout = self.layout(ctype)
            return layout["size"], layout["align"]
        base = self.resolve(ctype)
        if base not in SCALARS:
            raise ParseError("no size for " + ctype)
        return SCALARS[base][1:]

    def layout(self, name):
        offset, align, offsets, sizes = 0, 1, {}, {}
        for ctype, depth, field in self.structs[name]:
            size, a = self.size_align(ctype, depth)
            offset = (offset + a - 1) // a * a
            offsets[field], sizes[field] = offset, size
            offset += size
            align = max(align, a)
        return {"size": (offset + align - 1) // align * align, "align": align, "offsets": offsets,
                "field_sizes": sizes}


def julia_name(name):
    return name + "_" if name in JULIA_RESERVED else name


def comment_lines(doc, indent=""):
    return [indent + ("# " + line if line else "#") for line in (doc or [])]


def define_value(body, known):
    """A #define body as a Julia expression, or None when it is not a plain constant."""
    literal = re.fullmatch(r"\(?(-?\d+)\)?", body)  # 5, -1, (-1)
    if literal and body.count("(") == body.count(")"):
        return literal.group(1)
    expr = body.replace("/", "÷")
    names = re.findall(r"[A-Za-z_]\w*", expr)
    if names and all(n in known for n in names) and re.fullmatch(r"[\w\s()+\-*÷,]+", expr):
        return expr
    return None


def struct_init(body, name, types):
    """STARLING_*_INIT = { sizeof(T), 0, NULL, ... }: a keyword constructor for T."""
    m = re.fullmatch(r"\{\s*sizeof\((\w+)\)\s*,(.*)\}", body)
    if not m or m.group(1) not in types.h.structs:
        return None
    struct = m.group(1)
    values = ["sizeof(" + struct + ")"] + [v.strip() for v in m.group(2).split(",")]
    fields = types.h.structs[struct]
    if len(values) != len(fields):
        raise ParseError(name + " has " + str(len(values)) + " values for " + str(len(fields)) + " fields")
    args = []
    for (ctype, depth, field), value in zip(fields, values):
        value = "C_NULL" if value == "NULL" else value
        args.append((julia_name(field), types.julia(ctype, depth), value))
    return struct, args


def generate(h, soname):
    types = Types(h)
    out = [
        "# LibStarling: the low-level Julia layer of Starling, one ccall per C function.",
        "# Generated by bindings/julia/generate.py from capi/include/starling/starling.h; do not",
        "# edit. Pointers, handles and status codes are exactly the C ABI's: see Starling.jl for",
        "# the Julian API on top.",
        "module LibStarling",
        "",
        "# The library's SONAME: Starling.__init__ dlopens the file (STARLING_LIBRARY or the",
        "# loader's search path) with RTLD_GLOBAL, and ccall then finds it by this name.",
        "const libstarling = " + json.dumps(soname),
        "",
        "# ---- DLPack (dlpack/dlpack.h)",
    ]
    for enum, values in DLPACK_ENUMS:
        out.append("const " + enum + " = Cint")
        out += ["const " + n + " = Cint(" + str(v) + ")" for n, v in values]
    for name, fields in DLPACK_STRUCTS:
        out += ["", "struct " + name]
        out += ["    " + julia_name(f) + "::" + types.julia(c, d) for c, d, f in fields]
        out.append("end")

    out += ["", "# ---- constants"]
    known = set()
    for name, params, body in h.defines:
        if name.startswith("STARLING_STARLING_H") or name == "STARLING_API":
            continue
        if params is not None:
            if re.fullmatch(r"[\w\s()+\-*/]+", body) and set(re.findall(r"[A-Za-z_]\w*", body)) <= set(params):
                out.append(name + "(" + ", ".join(params) + ") = " + body.replace("/", "÷"))
                known.add(name)
            continue
        value = define_value(body, known)
        if value is not None:
            out.append("const " + name + " = " + value)
            known.add(name)
        elif body.startswith("{"):
            continue  # struct initializers: constructors below
        else:
            raise ParseError("cannot translate #define " + name + " " + body)

    inits = [struct_init(body, name, types) for name, params, body in h.defines
             if params is None and body.startswith("{")]
    inits = {s: a for s, a in (i for i in inits if i)}

    for kind, (name, doc) in h.items:
        if kind == "function":
            continue
        out.append("")
        out += comment_lines(doc)
        if kind == "alias":
            out.append("const " + name + " = " + SCALARS[h.aliases[name]][0])
        elif kind == "enum":
            out.append("const " + name + " = Cint")
            out += ["const " + n + " = Cint(" + str(v) + ")" for n, v in h.enums[name]]
        elif kind == "handle":
            out.append("mutable struct " + h.handles[name] + " end")
            out.append("const " + name + " = Ptr{" + h.handles[name] + "}")
        elif kind == "struct":
            out.append("struct " + name)
            out += ["    " + julia_name(f) + "::" + types.julia(c, d) for c, d, f in h.structs[name]]
            out.append("end")
            if name in inits:
                args = inits[name]
                out.append("# Defaults of the C initializer macro; struct_size is set.")
                out.append(name + "(; " + ", ".join(f + "=" + v for f, _, v in args) + ") =")
                out.append("    " + name + "(" + ", ".join(f for f, _, _ in args) + ")")

    out += ["", "# ---- functions"]
    for name, ret, params, doc in h.functions:
        out.append("")
        out += comment_lines(doc)
        args = [julia_name(p[2]) for p in params]
        argtypes = [types.julia(p[0], p[1]) for p in params]
        out.append("function " + name + "(" + ", ".join(args) + ")")
        call = ("    ccall((:" + name + ", libstarling), " + types.julia(*ret) + ", ("
                + ", ".join(argtypes) + ("," if len(argtypes) == 1 else "") + ")")
        out.append(call + ("" if not args else ", " + ", ".join(args)) + ")")
        out.append("end")
    out += ["", "end # module LibStarling", ""]
    return "\n".join(out)


def constants(h):
    """Every enum value and integer #define the Julia file defines, by name."""
    values = {n: v for _, vals in DLPACK_ENUMS for n, v in vals}
    for name in sorted(h.enums):
        values.update(h.enums[name])
    for name, params, body in h.defines:
        literal = re.fullmatch(r"\(?(-?\d+)\)?", body) if params is None else None
        if literal and body.count("(") == body.count(")"):
            values[name] = int(literal.group(1))
    return values


def layouts(h):
    types = Types(h)
    names = [n for n, _ in DLPACK_STRUCTS] + [name for kind, (name, _) in h.items if kind == "struct"]
    out = {n: {k: v for k, v in types.layout(n).items() if k != "align"} for n in names}
    out["constants"] = constants(h)
    return out


def c_check(h):
    """A C program printing the compiler's layouts in layouts()'s JSON shape."""
    types = Types(h)
    lines = ["/* Generated by bindings/julia/generate.py: the C compiler's view of the structs the",
             " * Julia mirrors copy, as JSON. */",
             "#include <stddef.h>", "#include <stdio.h>", "", "#include <starling/starling.h>", "",
             "int main(void) {", '  printf("{");']
    names = [n for n, _ in DLPACK_STRUCTS] + [name for kind, (name, _) in h.items if kind == "struct"]
    for i, name in enumerate(names):
        fields = types.structs[name]
        offs = ", ".join('\\"%s\\": %%zu' % f for _, _, f in fields)
        lines.append('  printf("%s\\"%s\\": {\\"size\\": %%zu, \\"offsets\\": {%s}, ", sizeof(%s), %s);' % (
            ", " if i else "", name, offs, name, ", ".join("offsetof(%s, %s)" % (name, f) for _, _, f in fields)))
        lines.append('  printf("\\"field_sizes\\": {%s}}", %s);' % (
            offs, ", ".join("sizeof(((%s*)0)->%s)" % (name, f) for _, _, f in fields)))
    consts = sorted(constants(h))
    lines.append('  printf(", \\"constants\\": {");')
    for i, name in enumerate(consts):
        lines.append('  printf("%s\\"%s\\": %%lld", (long long)(%s));' % (", " if i else "", name, name))
    lines += ['  printf("}}\\n");', "  return 0;", "}", ""]
    return "\n".join(lines)


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("header")
    ap.add_argument("-o", "--output", required=True)
    ap.add_argument("--soname", default="libstarling.so.0")
    ap.add_argument("--layout-json")
    ap.add_argument("--c-check")
    args = ap.parse_args(argv)
    with open(args.header, encoding="utf-8") as f:
        try:
            h = parse(f.read())
        except ParseError as e:
            sys.exit(args.header + ": " + str(e))
    outputs = [(args.output, generate(h, args.soname))]
    if args.layout_json:
        outputs.append((args.layout_json, json.dumps(layouts(h), indent=1, sort_keys=True) + "\n"))
    if args.c_check:
        outputs.append((args.c_check, c_check(h)))
    for path, text in outputs:
        with open(path, "w", encoding="utf-8", newline="\n") as f:
            f.write(text)


if __name__ == "__main__":
    main(sys.argv[1:])
