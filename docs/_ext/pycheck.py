"""Finds the public objects of the starling Python package that have no docstring."""
import importlib
import inspect

MODULES = ["starling", "starling.compression", "starling.topology_util", "starling.torch"]


def _public(module):
    names = getattr(module, "__all__", None)
    if names is None:
        names = [n for n in vars(module) if not n.startswith("_")]
    for name in names:
        obj = getattr(module, name)
        if inspect.ismodule(obj):
            continue
        owner = getattr(obj, "__module__", None) or ""
        if not owner.startswith("starling"):
            continue  # re-exported from elsewhere (numpy, torch, enum values)
        if not (inspect.isclass(obj) or inspect.isfunction(obj) or inspect.isbuiltin(obj)):
            continue
        yield name, obj


def _members(cls):
    for name, member in vars(cls).items():
        if name.startswith("_") and name not in ("__init__", "__call__"):
            continue
        if name == "__init__" and not inspect.isfunction(member):
            continue
        if isinstance(member, (staticmethod, classmethod)):
            member = member.__func__
        if inspect.isfunction(member) or isinstance(member, property):
            yield name, member


def missing():
    """[(qualified name, what)] of public functions, classes, methods without a docstring."""
    out = []
    seen = set()
    for modname in MODULES:
        module = importlib.import_module(modname)
        for name, obj in _public(module):
            key = (obj.__module__, getattr(obj, "__qualname__", name))
            if key in seen:
                continue
            seen.add(key)
            qual = "%s.%s" % key
            if not inspect.getdoc(obj) or (inspect.isclass(obj) and obj.__doc__ is None):
                out.append(qual)
            if inspect.isclass(obj):
                for mname, member in _members(obj):
                    if mname == "__init__":
                        continue  # documented by the class
                    if not (member.__doc__ or "").strip():
                        out.append("%s.%s" % (qual, mname))
    return out
