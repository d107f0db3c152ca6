"""Reference pages generated from the code: the environment variables (the table in
impl/common/config.cc that the library parses), starlingrun's options (its --help text)
and the Julia binding (its docstrings)."""
import glob
import os
import re


def _md_cell(text):
    return text.replace("|", "\\|").replace("<", "\\<").replace("*", "\\*")


def environment(root):
    """Markdown for the STARLING_* variables of the library's configuration table."""
    src = open(os.path.join(root, "impl", "common", "config.cc")).read()
    table = src[src.index("kTable"):]
    table = table[:table.index("};")]
    entries = re.findall(r'\{\s*"(\w+)",\s*(nullptr|"\w+"),\s*"([^"]*)",\s*((?:"(?:[^"\\]|\\.)*"\s*)+)\}', table)
    if not entries:
        raise RuntimeError("no entries found in impl/common/config.cc's kTable")
    rows = ["| variable | BlueFog alias | default | meaning |", "|---|---|---|---|"]
    for name, alias, default, meaning in entries:
        meaning = "".join(re.findall(r'"((?:[^"\\]|\\.)*)"', meaning))
        alias = "`%s`" % alias.strip('"') if alias != "nullptr" else ""
        rows.append("| `%s` | %s | %s | %s |" % (name, alias, "`%s`" % default if default else "(empty)",
                                               _md_cell(meaning)))
    return "\n".join(rows) + "\n", [e[0] for e in entries]


def starlingrun_help(starlingrun):
    """(options table, full help text) from `starlingrun --help`."""
    import subprocess
    text = subprocess.run([starlingrun, "--help"], check=True, capture_output=True, text=True,
                          timeout=30).stdout
    options = text[text.index("Options:"):text.index("\n\n", text.index("Options:"))]
    rows, current = [], None
    for line in options.split("\n")[1:]:
        m = re.match(r"  (-\S.*?)\s{2,}(\S.*)$", line)
        if m:
            current = [m.group(1).strip(), m.group(2).strip()]
            rows.append(current)
        elif current and line.strip():
            current[1] += " " + line.strip()
    table = ["| option | meaning |", "|---|---|"]
    table += ["| `%s` | %s |" % (opt, _md_cell(desc)) for opt, desc in rows]
    return "\n".join(table) + "\n", text


def _julia_name(decl):
    m = re.match(r"(?:function\s+|struct\s+|mutable struct\s+|abstract type\s+|const\s+|macro\s+)?"
                 r"(?:Base\.)?([A-Za-z_][\w!]*)", decl.strip())
    return m.group(1) if m else decl.strip()


def julia(root):
    """(markdown, problems) for the Julia binding (Starling.jl): every docstring, file by
    file; an exported name without a docstring is a problem."""
    out, documented = [], set()
    src_dir = os.path.join(root, "bindings", "julia", "Starling", "src")
    for path in sorted(glob.glob(os.path.join(src_dir, "*.jl"))):
        src = open(path).read()
        items = re.findall(r'(?ms)^"""\n(.*?)\n"""\n(\S[^\n]*)|^"((?:[^"\\\n]|\\.)+)"\n(\S[^\n]*)', src)
        if not items:
            continue
        out += ["## `%s`" % os.path.relpath(path, root), ""]
        for long_doc, long_decl, short_doc, short_decl in items:
            doc, decl = (long_doc, long_decl) if long_decl else (short_doc, short_decl)
            documented.add(_julia_name(decl))
            lines = doc.split("\n")
            sigs = []
            while lines and lines[0].startswith("    "):
                sigs.append(lines.pop(0).strip())
            documented.update(_julia_name(sig) for sig in sigs)
            body = "\n".join(lines).strip()
            # Documenter's cross-references become plain code here.
            body = re.sub(r"\[(`[^`]+`)\]\(@ref\)", r"\1", body)
            out += ["```julia", "\n".join(sigs) if sigs else decl.strip(), "```", "", body, ""]
    exports = []
    for m in re.finditer(r"(?m)^export\s+(.*)$", open(os.path.join(src_dir, "Starling.jl")).read()):
        exports += [e.strip() for e in m.group(1).split(",") if e.strip()]
    problems = ["Julia: exported %s has no docstring" % e for e in exports if e not in documented]
    return "\n".join(out), problems
