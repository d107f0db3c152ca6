"""Generates the C API reference page from capi/include/starling/starling.h.

The header's comments are the single source: a comment that ends on the line just
before a declaration documents it; declarations on the lines right after a documented
one share its comment (e.g. a function and its _nonblocking form); a section banner
(`/* ---- ...`) opens a section whose first sentence is its title. A public function,
type or status code with no comment is reported as a problem, which fails the docs build.
"""
import re

BANNER = re.compile(r"/\*\s*-{20,}")
FUNC_NAME = re.compile(r"(starling_\w+)\s*\(")


def _lex(lines):
    """Yields (kind, first_line, last_line, text) for comments, declarations, blanks."""
    i, n = 0, len(lines)
    items = []
    depth = 0  # #if nesting we skip (only the STARLING_API visibility block)
    while i < n:
        line = lines[i]
        s = line.strip()
        if not s:
            items.append(("blank", i, i, ""))
            i += 1
        elif s.startswith("/*"):
            j = i
            while "*/" not in lines[j]:
                j += 1
            items.append(("comment", i, j, "\n".join(lines[i:j + 1])))
            i = j + 1
        elif s.startswith("#define"):
            j = i
            while lines[j].rstrip().endswith("\\"):
                j += 1
            items.append(("define", i, j, "\n".join(lines[i:j + 1])))
            i = j + 1
        elif s.startswith("#") or s.startswith("extern \"C\"") or s.startswith("}  /*"):
            items.append(("other", i, i, s))
            i += 1
        else:
            j = i
            text = lines[i]
            if s.startswith(("typedef struct", "typedef enum", "enum", "struct")) and "{" in s:
                while not re.match(r"^}\s*\w*\s*;", lines[j].strip()):
                    j += 1
            else:
                while not lines[j].rstrip().endswith(";"):
                    j += 1
            items.append(("decl", i, j, "\n".join(lines[i:j + 1])))
            i = j + 1
    return items


def _comment_text(raw):
    """The comment without its /* * */ frame, as lines."""
    body = raw.strip()
    body = re.sub(r"^/\*+", "", body)
    body = re.sub(r"\*/$", "", body)
    out = []
    for k, line in enumerate(body.split("\n")):
        # Strip the frame's " * " (a star then a space or the end), never a star that
        # starts the text (as in "*out = 1 if ...").
        line = line.strip() if k == 0 else re.sub(r"^\s*\*(?: |$)", "", line)
        out.append(line.rstrip())
    while out and not out[0].strip():
        out.pop(0)
    while out and not out[-1].strip():
        out.pop()
    return out


def _escape(text):
    # CommonMark specials that occur in the header's prose. Backticks stay: the header
    # quotes code with them.
    text = text.replace("\\", "\\\\").replace("*", "\\*").replace("<", "\\<").replace("[", "\\[")
    return text


class Header:
    def __init__(self, path):
        with open(path) as f:
            self.lines = f.read().split("\n")
        self.items = _lex(self.lines)
        self.problems = []
        self.functions = []   # names in header order
        self.codes = []       # (name, value, comment)
        self.sections = []    # [title, intro_lines, entries]; entry = (doc_lines, [decl texts], kinds)
        self._parse()

    def _parse(self):
        section = ["Conventions", [], []]
        self.sections.append(section)
        prev = None
        group = None
        first = True
        for kind, a, b, text in self.items:
            if kind == "comment" and first:
                # The file's opening comment: the conventions that hold everywhere.
                section[1] = _comment_text(text)
                first = False
                prev = (kind, a, b, text)
                continue
            if kind == "comment" and BANNER.match(text.strip()):
                lines = _comment_text(BANNER.sub("/*", text, count=1))
                lines = [l for l in lines if not re.fullmatch(r"-+", l.strip())]
                joined = " ".join(l.strip() for l in lines)
                m = re.match(r"(.+?[.:])(\s|$)", joined)
                title = (m.group(1) if m else joined).rstrip(".:")
                rest = lines
                # Drop the title sentence from the intro.
                if m:
                    first_line = lines[0]
                    rest = [first_line[len(m.group(1)):].strip()] + lines[1:] if first_line.startswith(m.group(1)) else lines
                section = [title, rest, []]
                self.sections.append(section)
                prev = (kind, a, b, text)
                group = None
                continue
            if kind in ("decl", "define"):
                if self._skip(kind, text):
                    prev = (kind, a, b, text)
                    continue
                after_struct = (prev and prev[0] == "blank" and kind == "define" and group is not None
                                and re.match(r"#define\s+STARLING_\w+_INIT\b", text)
                                and "typedef struct" in group[1][-1])
                if prev and prev[0] == "comment" and prev[2] == a - 1 and BANNER.match(prev[3].strip()):
                    # Declarations right under a section banner: the banner documents them.
                    group = ([], [], [])
                    section[2].append(group)
                elif prev and prev[0] == "comment" and prev[2] == a - 1:
                    group = (_comment_text(prev[3]), [], [])
                    section[2].append(group)
                elif after_struct:
                    pass  # a struct's STARLING_..._INIT initializer, one blank line below it
                elif prev and prev[0] in ("decl", "define") and prev[2] == a - 1 and group is not None:
                    pass
                else:
                    self.problems.append("line %d: undocumented declaration (add a comment just above it):\n%s"
                                         % (a + 1, text))
                    group = ([], [], [])
                    section[2].append(group)
                group[1].append(text)
                group[2].append(kind)
                if kind == "decl" and "STARLING_API" in text:
                    m = FUNC_NAME.search(text)
                    self.functions.append(m.group(1))
                if kind == "decl" and "enum starling_status_code" in text:
                    self._status_codes(a, text)
            elif kind == "comment" and prev and prev[0] == "comment" and prev[2] == a - 1:
                # Two comments in a row: the first is prose for the section.
                section[2].append((_comment_text(prev[3]), [], []))
            elif kind == "comment" and prev and prev[0] == "blank":
                pass
            prev = (kind, a, b, text)
        # Prose comments followed by a blank line (not attached to anything).
        for idx, (kind, a, b, text) in enumerate(self.items):
            if kind != "comment" or idx == 0 or BANNER.match(text.strip()):
                continue
            nxt = self.items[idx + 1] if idx + 1 < len(self.items) else None
            if nxt and nxt[0] == "blank":
                self._attach_prose(a, _comment_text(text))

    def _attach_prose(self, line, text):
        # Find the section that contains this line: the last banner before it.
        title_index = 0
        for kind, a, b, t in self.items:
            if a > line:
                break
            if kind == "comment" and BANNER.match(t.strip()):
                title_index += 1
        self.sections[title_index][2].append((text, [], []))

    @staticmethod
    def _skip(kind, text):
        if kind == "define" and re.match(r"#define\s+(STARLING_STARLING_H_|STARLING_API)\b", text):
            return True
        return False

    def _status_codes(self, first_line, text):
        for k, line in enumerate(text.split("\n")):
            m = re.match(r"\s*(STARLING_\w+)\s*=\s*(-?\d+),?\s*(?:/\*\s*(.*?)\s*\*/)?", line)
            if m:
                if not m.group(3):
                    self.problems.append("line %d: status code %s has no comment"
                                         % (first_line + k + 1, m.group(1)))
                self.codes.append((m.group(1), int(m.group(2)), m.group(3) or ""))


def _linkify(text, functions, codes):
    """Turns known function names and status codes in prose into cross-references."""
    names = set(functions)
    code_names = {c[0] for c in codes}

    def repl(m):
        word = m.group(0)
        if word in names:
            return "{c:func}`%s`" % word
        if word in code_names:
            return "{c:enumerator}`%s`" % word
        return word
    # Leave code spans alone.
    parts = re.split(r"(`[^`]*`)", text)
    return "".join(p if p.startswith("`") else re.sub(r"\b(starling_\w+|STARLING_\w+)\b", repl, p)
                   for p in parts)


def _prose(lines, functions, codes):
    """Markdown for comment lines: paragraphs and '- ' lists kept."""
    out, para = [], []

    def flush():
        if para:
            out.append(_linkify(_escape(" ".join(para)), functions, codes))
            para.clear()
    for line in lines:
        s = line.strip()
        if not s:
            flush()
            out.append("")
        elif s.startswith("- "):
            flush()
            para.append(s)
        elif line.startswith("    ") and not para:
            out.append("    " + s)
        else:
            para.append(s)
    flush()
    return "\n".join(out)


def _declaration(text):
    """One-line C declaration for the Sphinx C domain."""
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    text = text.replace("STARLING_API", "")
    text = " ".join(text.split())
    return text.rstrip(";").strip()


def render(header_path):
    """Returns (markdown text, Header) for the header at header_path."""
    h = Header(header_path)
    fn, codes = h.functions, h.codes
    out = [
        "# C API reference",
        "",
        "Generated from `capi/include/starling/starling.h` when the documentation is built:",
        "the header's comments are the only source of this page. Include the header as",
        "`#include <starling/starling.h>` and link with `-lstarling` (or `Starling::starling`,",
        "or `pkg-config --cflags --libs starling`).",
        "",
    ]
    for title, intro, entries in h.sections:
        if not intro and not entries:
            continue
        out += ["## " + title, ""]
        if intro and any(l.strip() for l in intro):
            out += [_prose(intro, fn, codes), ""]
        for doc, decls, kinds in entries:
            body = _prose(doc, fn, codes) if doc else ""
            if not decls:
                out += [body, ""]
                continue
            for k, (decl, kind) in enumerate(zip(decls, kinds)):
                last = k == len(decls) - 1
                directive = _directive(decl, kind)
                if directive is None:
                    out += ["```c", decl.strip(), "```", ""] + ([body, ""] if last and body else [])
                    continue
                block = "{" in decl and kind == "decl"
                fence = "````" if block else "```"
                out.append("%s{%s} %s" % ((fence,) + directive))
                if last and body:
                    out += [body, ""]
                if block and "enum starling_status_code" in decl:
                    out += [fence, ""]
                    # Top level, so that the codes are referenced by their bare names.
                    for name, value, comment in codes:
                        out += ["```{c:enumerator} %s = %d" % (name, value), _linkify(_escape(comment), fn, codes), "```", ""]
                    continue
                if block:
                    out += ["```c", decl.strip(), "```"]
                out += [fence, ""]
    return "\n".join(out) + "\n", h


def _directive(decl, kind):
    if kind == "define":
        m = re.match(r"#define\s+(\w+(\([^)]*\))?)", decl)
        return ("c:macro", m.group(1))
    text = _declaration(decl)
    if "STARLING_API" in decl or re.search(r"\)\s*;\s*$", decl.strip()) and "typedef" not in decl:
        return ("c:function", text)
    m = re.match(r"typedef\s+(struct|enum)\s+(\w+)\s*\{.*\}\s*(\w+)$", text)
    if m:
        return ("c:type", m.group(3))
    m = re.match(r"enum\s+(\w+)\s*\{", text)
    if m:
        return ("c:enum", m.group(1))
    m = re.match(r"typedef\s+(.+?)\s*(\w+)$", text)
    if m:
        return ("c:type", "%s %s" % (m.group(1), m.group(2)))
    return None
