"""Sphinx configuration of Starling's documentation (built by packaging/docs.sh).

Sphinx and MyST come from Debian 12 (python3-sphinx 5.3, python3-myst-parser 0.18).
The pages under reference/_generated are written at build time from the sources (the C
header, the environment table in impl/common/config.cc, starlingrun --help, the Julia
binding); see _ext/starling_docs.py. The Python reference imports the built package:
STARLING_BUILD_DIR (default: build) must hold a build with the Python module.
"""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
BUILD = os.path.join(ROOT, os.environ.get("STARLING_BUILD_DIR", "build"))
sys.path.insert(0, os.path.join(HERE, "_ext"))
sys.path.insert(0, os.path.join(BUILD, "python"))

project = "Starling"
author = "The Starling authors"
copyright = "2026, " + author
release = version = "0.1.0"

extensions = ["myst_parser", "sphinx.ext.autodoc", "starling_docs"]
source_suffix = {".md": "markdown"}
exclude_patterns = ["_build", "snippets", "tools", "_ext", "changelog-perf.md",
                    "reference/_generated/environment-table.md",
                    "reference/_generated/starlingrun-options.md"]
root_doc = "index"

myst_enable_extensions = ["colon_fence", "deflist"]
myst_heading_anchors = 3

# Every cross-reference must resolve (the build runs with -W: warnings are errors).
nitpicky = True
nitpick_ignore = [
    # DLPack's and the C library's types appear in the C declarations.
    ("c:identifier", name) for name in (
        "DLTensor", "DLDataType", "DLDevice", "size_t", "int64_t", "uint64_t", "int32_t",
        "uint32_t", "uint8_t", "starling_context_s", "starling_request_s", "starling_topology_s",
        "starling_schedule_s", "starling_window_s")
] + [("py:class", name) for name in (
    "numpy.ndarray", "torch.Tensor", "torch.optim.Optimizer", "torch.nn.Module",
    "networkx.DiGraph", "enum.Enum")]

autodoc_member_order = "bysource"
autodoc_typehints = "none"
autodoc_mock_imports = []

html_theme = "alabaster"
html_title = "Starling " + release
html_static_path = []
html_theme_options = {"description": "decentralized communication for distributed training",
                      "fixed_sidebar": True, "show_relbars": True}
html_sidebars = {"**": ["about.html", "navigation.html", "relations.html", "searchbox.html"]}
starling_build_dir = BUILD
