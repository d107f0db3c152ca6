#!/usr/bin/env python3
"""Keeps the documentation's code honest (run by packaging/docs.sh and ctest's docs test).

1. No program code is pasted into a page: a fenced block in python, c, java or julia
   fails the check. Program code reaches the pages through `literalinclude` only.
2. Every literalinclude'd file either lives in docs/snippets/ (run here, at the rank
   counts its first line names: "ranks: 1 2 4") or is run by a ctest test (its file name
   appears in a CMakeLists.txt of examples/ or tests/).
3. The README's program blocks are excerpts of those snippets: every line of them must
   be a line of a snippet in the same language.
4. Shell blocks: every source-tree path they name exists; every build-tree path
   (build/...) exists in the build; every starlingrun option they use (there and in
   `starlingrun ...` quoted in the prose) is in `starlingrun --help`.

usage: check_snippets.py [--build-dir build] [--no-run]
"""
import argparse
import glob
import os
import re
import shlex
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DOCS = os.path.join(ROOT, "docs")
PROGRAM_LANGS = {"python", "py", "c", "cpp", "c++", "java", "julia", "jl"}
SOURCE_DIRS = ("bindings", "capi", "docs", "examples", "impl", "packaging", "swig", "tests", ".ci")


def pages():
    for path in sorted(glob.glob(os.path.join(DOCS, "**", "*.md"), recursive=True)):
        rel = os.path.relpath(path, DOCS)
        if rel.startswith(("_build", "reference/_generated", "snippets")):
            continue
        yield path


def fences(text):
    """(info string, body, first line number) of each fenced block."""
    out, lines, i = [], text.split("\n"), 0
    while i < len(lines):
        m = re.match(r"^(\s*)(`{3,}|~{3,})(.*)$", lines[i])
        if m:
            fence, info, start = m.group(2), m.group(3).strip(), i
            body = []
            i += 1
            while i < len(lines) and not lines[i].strip().startswith(fence):
                body.append(lines[i])
                i += 1
            out.append((info, "\n".join(body), start + 1))
        i += 1
    return out


def snippet_ranks(path):
    first = open(path).readline()
    m = re.search(r"ranks:\s*([\d ]+|none.*)$", first)
    if not m:
        return None
    spec = m.group(1).strip()
    return [] if spec.startswith("none") else [int(r) for r in spec.split()]


def tested_by_ctest(path):
    name = os.path.basename(path)
    stem = os.path.splitext(name)[0]
    for cml in glob.glob(os.path.join(ROOT, "examples", "**", "CMakeLists.txt"), recursive=True) + \
            glob.glob(os.path.join(ROOT, "tests", "**", "CMakeLists.txt"), recursive=True):
        text = open(cml).read()
        if name in text or re.search(r"\b%s\b" % re.escape(stem), text):
            return True
    return False


class Checker:
    def __init__(self, build, run):
        self.build, self.run = os.path.abspath(build), run
        self.problems, self.ran, self.skipped = [], [], []
        self.snippets = set()
        starlingrun = os.path.join(self.build, "impl", "launcher", "starlingrun")
        self.starlingrun = starlingrun
        self.help = subprocess.run([starlingrun, "--help"], capture_output=True, text=True).stdout

    def problem(self, where, text):
        self.problems.append("%s: %s" % (where, text))

    def check_page(self, path):
        rel = os.path.relpath(path, ROOT)
        text = open(path).read()
        # starlingrun command lines quoted in the prose: their options must exist too.
        for m in re.finditer(r"`(starlingrun [^`]*)`", text):
            self.check_shell("%s:%d" % (rel, text.count("\n", 0, m.start()) + 1), m.group(1))
        for info, body, line in fences(text):
            where = "%s:%d" % (rel, line)
            lang = info.split()[0].lower() if info else ""
            m = re.match(r"\{(literalinclude|code-block|code)\}\s*(\S*)", info)
            if m and m.group(1) == "literalinclude":
                self.check_include(where, os.path.normpath(os.path.join(os.path.dirname(path), m.group(2))))
                continue
            if m:
                lang = (re.search(r"\}\s*(\S+)", info).group(1) if m.group(1) != "literalinclude" else "").lower()
            if lang in PROGRAM_LANGS:
                self.problem(where, "a %s block pasted into the page: put the program in docs/snippets/ "
                             "(or use a tested example) and literalinclude it" % lang)
            elif lang in ("sh", "bash", "console", "shell"):
                self.check_shell(where, body)

    def check_include(self, where, target):
        if not os.path.exists(target):
            self.problem(where, "literalinclude of a missing file %s" % target)
            return
        rel = os.path.relpath(target, ROOT)
        if rel.startswith("docs/reference/_generated/"):
            return  # written from the code at build time
        if rel.startswith("docs/snippets/"):
            self.snippets.add(target)
        elif not tested_by_ctest(target):
            self.problem(where, "%s is shown but no test runs it (not in docs/snippets/, "
                         "not named by a CMakeLists.txt in examples/ or tests/)" % rel)

    def check_shell(self, where, body):
        for line in body.replace("\\\n", " ").split("\n"):
            code = line.split(" #")[0].strip()
            if not code or code.startswith("#"):
                continue
            for token in re.findall(r"(?<![\w./$-])((?:%s)/[\w./+-]*[\w+])" % "|".join(
                    re.escape(d) for d in SOURCE_DIRS), code):
                if "*" in token or "<" in token:
                    continue
                if not os.path.exists(os.path.join(ROOT, token)):
                    self.problem(where, "names %s, which is not in the source tree" % token)
            for token in re.findall(r"(?<![\w./$-])build/[\w./+-]*[\w+]", code):
                if any(c in token for c in "*<"):
                    continue
                if not glob.glob(os.path.join(self.build, token[len("build/"):] + "*")):
                    self.problem(where, "names %s, which the build does not make" % token)
            if re.search(r"(^|[\s;&|(])starlingrun\s", code):
                try:
                    args = shlex.split(code[code.index("starlingrun"):])
                except ValueError:
                    args = code[code.index("starlingrun"):].split()
                for arg in args[1:]:
                    if not arg.startswith("-"):
                        break  # the program: its own options follow
                    opt = arg.split("=")[0]
                    if opt not in self.help:
                        self.problem(where, "starlingrun has no option %s (starlingrun --help)" % opt)

    def check_readme(self):
        by_lang = {}
        for path in glob.glob(os.path.join(DOCS, "snippets", "*")):
            lang = {".py": "python", ".c": "c", ".java": "java", ".jl": "julia"}.get(os.path.splitext(path)[1])
            by_lang.setdefault(lang, set()).update(" ".join(l.split()) for l in open(path))
        text = open(os.path.join(ROOT, "README.md")).read()
        for info, body, line in fences(text):
            lang = info.split()[0].lower() if info else ""
            if lang in ("sh", "bash", "console", "shell"):
                self.check_shell("README.md:%d" % line, body)
                continue
            if lang not in PROGRAM_LANGS:
                continue
            known = by_lang.get({"py": "python", "jl": "julia"}.get(lang, lang), set())
            for k, code in enumerate(body.split("\n")):
                if code.strip() and " ".join(code.split()) not in known:
                    self.problem("README.md:%d" % (line + 1 + k), "not a line of any docs/snippets/ program "
                                 "in %s (README examples are excerpts of tested snippets): %s" % (lang, code.strip()))

    def run_snippets(self):
        env = dict(os.environ)
        env["PYTHONPATH"] = os.path.join(self.build, "python") + os.pathsep + env.get("PYTHONPATH", "")
        env.setdefault("OMPI_MCA_rmaps_base_oversubscribe", "1")
        jar = os.path.join(self.build, "bindings", "java", "starling.jar")
        with tempfile.TemporaryDirectory() as tmp:
            for path in sorted(self.snippets):
                rel = os.path.relpath(path, ROOT)
                ranks = snippet_ranks(path)
                if ranks is None:
                    self.problem(rel, "its first line must say which ranks it runs at ('ranks: 1 2 4')")
                    continue
                if not ranks:
                    self.skipped.append("%s (%s)" % (rel, open(path).readline().strip("#/* \n")))
                    continue
                ext = os.path.splitext(path)[1]
                if ext == ".py":
                    cmd = ["/usr/bin/python3", path]
                elif ext == ".c":
                    exe = os.path.join(tmp, os.path.basename(path)[:-2])
                    if not self.sh(rel, ["cc", "-std=c11", "-Wall", "-Werror", "-I", os.path.join(ROOT, "capi", "include"),
                                         path, "-L", self.build, "-lstarling", "-lm", "-Wl,-rpath," + self.build,
                                         "-o", exe], env):
                        continue
                    cmd = [exe]
                elif ext == ".java":
                    if not self.sh(rel, ["javac", "-Xlint:all", "-Werror", "-cp", jar, "-d", tmp, path], env):
                        continue
                    cmd = ["java", "-cp", jar + os.pathsep + tmp, os.path.basename(path)[:-5]]
                else:
                    self.problem(rel, "no way to run %s files" % ext)
                    continue
                for n in ranks:
                    start = time.time()
                    if self.sh("%s at %d ranks" % (rel, n),
                               [self.starlingrun, "-np", str(n), "--timeout", "180"] + cmd, env):
                        self.ran.append("%s at %d ranks (%.1f s)" % (rel, n, time.time() - start))

    def sh(self, what, cmd, env):
        p = subprocess.run(cmd, env=env, capture_output=True, text=True, cwd=ROOT)
        if p.returncode != 0:
            self.problem(what, "failed (exit %d): %s\n%s%s" % (p.returncode, " ".join(cmd), p.stdout[-3000:],
                                                              p.stderr[-3000:]))
            return False
        return True


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build-dir", default=os.path.join(ROOT, "build"))
    ap.add_argument("--no-run", action="store_true", help="check the pages, run nothing")
    args = ap.parse_args()
    c = Checker(args.build_dir, not args.no_run)
    for page in pages():
        c.check_page(page)
    c.check_readme()
    unused = set(glob.glob(os.path.join(DOCS, "snippets", "*"))) - c.snippets
    for path in sorted(unused):
        c.problem(os.path.relpath(path, ROOT), "a snippet no page includes")
    if c.run:
        c.run_snippets()
    for line in c.ran:
        print("ran      " + line)
    for line in c.skipped:
        print("not run  " + line)
    for p in c.problems:
        print("PROBLEM  " + p, file=sys.stderr)
    print("check_snippets: %d runs, %d not run, %d problems" % (len(c.ran), len(c.skipped), len(c.problems)))
    return 1 if c.problems else 0


if __name__ == "__main__":
    sys.exit(main())
