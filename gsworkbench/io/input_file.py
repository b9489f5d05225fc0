"""The one check every reader makes before it opens a file: the errors Python users catch, naming the
path (FileNotFoundError for a missing file, IsADirectoryError for a folder)."""

from __future__ import annotations

import os
from pathlib import Path


def check_input_file(path: str | os.PathLike[str]) -> Path:
    """``path`` as a Path when it names a readable file; else FileNotFoundError (nothing there) or
    IsADirectoryError (a folder), each naming the path."""
    path = Path(path)
    if path.is_dir():
        raise IsADirectoryError(f"{path}: is a folder, not a file")
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no such file")
    return path
