"""What every document converter shares (``convert`` for PDF and HTML, ``docx_text`` for
Word): the error a file that cannot be read raises, the limits on what one file may cost,
the optional library a format needs, and how a converter's blocks are joined."""
from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any

__all__ = ["ConversionError", "MAX_BYTES", "MAX_CHARS", "MAX_UNZIPPED", "library",
           "unreadable", "join_blocks"]

MAX_BYTES = 50_000_000  # the largest file converted by default (50 MB); read_documents(max_bytes=)
MAX_CHARS = 10_000_000  # the most text kept from one file (about 3,000 pages); convert(max_chars=)
MAX_UNZIPPED = 200_000_000  # a DOCX whose parts unzip past this is refused before parsing
_EXTRA = 'pip install "ragbook[documents]"'


class ConversionError(ValueError):
    """A file that cannot be read as a document (encrypted, no text, corrupt, too large); the
    message names the file, the problem and the fix. ``read_documents`` skips such a file in a
    folder, with a warning, and reads the others."""


def library(module: str, package: str, suffix: str) -> Any:
    """The optional library ``module`` a format needs; an ImportError saying what to install."""
    try:
        return importlib.import_module(module)
    except ImportError:
        raise ImportError(f"reading {suffix} files needs the package {package!r}, which is not "
                          f"installed; install the documents extra: {_EXTRA}") from None


def unreadable(path: Path, kind: str, err: Exception) -> ConversionError:
    """The error for a file its library could not parse: the file, the library's words, the fix."""
    detail = " ".join(str(err).split())[:160] or type(err).__name__
    return ConversionError(f"{str(path)!r} is not a readable {kind} file ({detail}); open it "
                           f"in its application and save it again, or remove it")


def join_blocks(blocks: list[str]) -> str:
    """Blocks joined by blank lines, one final newline: the convention of ``read_documents``
    (no blank lines at either end), so a converted file chunks like a Markdown one."""
    return "\n\n".join(blocks) + "\n" if blocks else ""
