"""Sphinx extension: writes the generated reference pages before Sphinx reads the
sources, and reports as warnings (errors under -W) what the code leaves undocumented:
C declarations without a comment, exported Julia names and public Python objects
without a docstring."""
import os

from sphinx.util import logging

import gen_capi
import gen_tables
import pycheck

logger = logging.getLogger(__name__)


def _write(path, text):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    old = open(path).read() if os.path.exists(path) else None
    if old != text:  # keep the mtime when nothing changed (incremental builds)
        with open(path, "w") as f:
            f.write(text)


def generate(app):
    src = app.srcdir
    root = os.path.dirname(src)
    out = os.path.join(src, "reference", "_generated")
    build = app.config.starling_build_dir

    text, header = gen_capi.render(os.path.join(root, "capi", "include", "starling", "starling.h"))
    _write(os.path.join(out, "c-api.md"), text)
    for problem in header.problems:
        logger.warning("starling.h: %s", problem)

    table, names = gen_tables.environment(root)
    _write(os.path.join(out, "environment-table.md"), table)

    starlingrun = os.path.join(build, "impl", "launcher", "starlingrun")
    if not os.path.exists(starlingrun):
        logger.warning("%s is missing: build Starling first (packaging/docs.sh does)", starlingrun)
    else:
        options, full = gen_tables.starlingrun_help(starlingrun)
        _write(os.path.join(out, "starlingrun-options.md"), options)
        _write(os.path.join(out, "starlingrun-help.txt"), full)

    text, problems = gen_tables.julia(root)
    _write(os.path.join(out, "julia.md"), "# Julia API reference\n\n" + JULIA_INTRO + text)
    for problem in problems:
        logger.warning(problem)

    try:
        undocumented = pycheck.missing()
    except ImportError as e:
        logger.warning("cannot import the starling package from %s/python (%s): build it first",
                       build, e)
    else:
        for name in undocumented:
            logger.warning("Python: public %s has no docstring", name)


JULIA_INTRO = """Generated from the docstrings of `bindings/julia/Starling/src/*.jl` when the
documentation is built. `Starling.jl` is the Julian layer over `LibStarling.jl`, which
`bindings/julia/generate.py` generates from the C header (one `ccall` wrapper per C
function: see the [C API reference](c-api.md) for their semantics). **It has never run**:
no Julia runtime exists on the machines this project is tested on.

"""


def setup(app):
    app.add_config_value("starling_build_dir", os.environ.get("STARLING_BUILD_DIR", "build"), "env")
    app.connect("builder-inited", generate)
    return {"parallel_read_safe": True, "version": "1"}
