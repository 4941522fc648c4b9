"""Every place the console keeps or finds its files, in one module.

The user's files follow the XDG base directories (read at each call, so a test or a demo that sets
`XDG_DATA_HOME` moves them): recordings, reports, screenshots, the audit log and benchmark runs under
the data dir, the Hub's file lists under the cache dir, profiles under the config dir. The package's
own files (the stylesheet, SGLang's flag table) are found from the package, wherever its modules sit.
"""

from __future__ import annotations

import os
from pathlib import Path

import console

PACKAGE_DIR = Path(console.__file__).resolve().parent
"""console/ itself: its `data/` and, in a wheel, its `styles/`."""
PACKAGE_PARENT = PACKAGE_DIR.parent
"""What goes on PYTHONPATH for a child process to import this same console (a checkout's root, or
site-packages)."""
DATA_DIR = PACKAGE_DIR / "data"


def data_home() -> Path:
    """`$XDG_DATA_HOME/gpuconsole` (`~/.local/share/gpuconsole`)."""
    return Path(os.environ.get("XDG_DATA_HOME") or os.path.expanduser("~/.local/share")) / "gpuconsole"


def cache_home() -> Path:
    """`$GPUCONSOLE_CACHE_DIR`, else `$XDG_CACHE_HOME/gpuconsole` (`~/.cache/gpuconsole`)."""
    explicit = os.environ.get("GPUCONSOLE_CACHE_DIR")
    if explicit:
        return Path(explicit)
    return Path(os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache")) / "gpuconsole"


def config_home() -> Path:
    """`$XDG_CONFIG_HOME/gpuconsole` (`~/.config/gpuconsole`)."""
    return Path(os.environ.get("XDG_CONFIG_HOME") or Path.home() / ".config") / "gpuconsole"


def stylesheet() -> Path:
    """The stylesheet ships inside the package (wheel) or sits at the checkout's root."""
    for candidate in (PACKAGE_DIR / "styles" / "console.tcss", PACKAGE_PARENT / "styles" / "console.tcss"):
        if candidate.exists():
            return candidate
    raise FileNotFoundError("console.tcss not found next to the package or at the repository root")
