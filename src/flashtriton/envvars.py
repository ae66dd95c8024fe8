"""Fast reads of the FLASHTRITON_* environment variables that calls check every time.

os.environ.get costs ~1.1 us a name (str -> bytes and back, CI CPU, 2026-11-30), which a
decode step or a replayed prefill call pays for 5-7 names. On POSIX, os.environ keeps its
bytes in the dict os.environ._data (CPython, since 3.2; os.environ[...] = and pytest's
monkeypatch.setenv update it): one dict lookup a name. Elsewhere, os.environ.get.
"""
from __future__ import annotations

import os

_DATA = getattr(os.environ, "_data", None) if os.name == "posix" else None
if not isinstance(_DATA, dict):
    _DATA = None


def reader(names: tuple):
    """A function returning the current values of `names` (a tuple of str or None)."""
    if _DATA is None:
        return lambda: tuple(os.environ.get(n) for n in names)
    keys = tuple(os.fsencode(n) for n in names)
    get, decode = _DATA.get, os.fsdecode
    # the decoded values per raw bytes values (a process sees a handful of environments):
    # one C-level tuple and one dict lookup a call instead of a generator decoding each set
    # name (~0.7 us of a replayed prefill call's plan key, CI CPU)
    seen: dict = {}

    def values():
        raw = tuple(map(get, keys))
        got = seen.get(raw)
        if got is None:
            if len(seen) >= 64:
                seen.clear()
            got = seen[raw] = tuple(None if v is None else decode(v) for v in raw)
        return got
    return values


def raw_reader(names: tuple):
    """A function returning the current values of `names` as the environment holds them
    (bytes or None on POSIX, str or None elsewhere): for keys only (equal exactly when the
    values are), without reader()'s decoding lookup (~0.15 us of a replayed decode step's
    key for its 12 names, CI CPU, 2026-12-01)."""
    if _DATA is None:
        return lambda: tuple(os.environ.get(n) for n in names)
    keys = tuple(os.fsencode(n) for n in names)
    get = _DATA.get
    return lambda: tuple(map(get, keys))


def value(name: str, default: str | None = None) -> str | None:
    """One variable's value, as os.environ.get(name, default)."""
    if _DATA is None:
        return os.environ.get(name, default)
    v = _DATA.get(os.fsencode(name))
    return default if v is None else os.fsdecode(v)
