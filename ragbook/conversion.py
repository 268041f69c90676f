"""What every document converter shares (``convert`` for PDF and HTML, ``docx_text`` for
Word): the error a file that cannot be read raises, the limits on what one file may cost,
the optional library a format needs, and how a converter's blocks are joined; and
``html_text``, an HTML file's bytes decoded as a browser sniffs their encoding."""
from __future__ import annotations

import codecs
import importlib
import re
from pathlib import Path
from typing import Any

__all__ = ["ConversionError", "MAX_BYTES", "MAX_CHARS", "MAX_UNZIPPED", "library",
           "unreadable", "join_blocks", "html_text"]

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


_BOMS = ((b"\xef\xbb\xbf", "utf-8"), (b"\xfe\xff", "utf-16-be"), (b"\xff\xfe", "utf-16-le"))
_META_CHARSET = re.compile(rb"<meta[^>]*?charset\s*=\s*[\"']?\s*([-\w.:]+)", re.I)
# The encodings of the WHATWG Encoding Standard, by the name of Python's codec for a label,
# each mapped to the codec a browser decodes with: a declared UTF-16 means UTF-8 (bytes that
# declare themselves are not UTF-16), Latin-1/ASCII and ISO-8859-9/-11 their Windows
# supersets, GB2312 GBK, Big5 Big5-HKSCS. A codec not here (UTF-7, UTF-32, unicode_escape,
# cp437, the replacement encodings ISO-2022-KR and HZ) is no encoding a browser reads a page
# in: honouring it would index text a browser shows as markup, a script or a comment.
_WHATWG = {"utf-16": "utf-8", "utf-16-le": "utf-8", "utf-16-be": "utf-8", "latin-1": "cp1252",
           "iso8859-1": "cp1252", "ascii": "cp1252", "iso8859-9": "cp1254",
           "iso8859-11": "cp874", "tis-620": "cp874", "gb2312": "gbk", "big5": "big5hkscs",
           **{name: name for name in (
               "utf-8", "cp866", "koi8-r", "koi8-u", "mac-roman", "mac-cyrillic", "cp874",
               *(f"iso8859-{n}" for n in (2, 3, 4, 5, 6, 7, 8, 10, 13, 14, 15, 16)),
               *(f"cp{n}" for n in range(1250, 1259)), "gbk", "gb18030", "big5hkscs",
               "euc_jp", "iso2022_jp", "shift_jis", "cp932", "euc_kr")}}


def html_text(raw: bytes) -> str:
    """An HTML file's bytes decoded as the HTML standard's encoding sniffing does: a
    byte-order mark decides (UTF-8, UTF-16 BE or LE); else the ``<meta charset>`` (or
    ``http-equiv`` content type) in the first 1,024 bytes, where a declared UTF-16 means
    UTF-8 (bytes that declare themselves are not UTF-16) and Latin-1 or ASCII mean
    windows-1252, as browsers read them; else UTF-8, else windows-1252. A label the WHATWG
    Encoding Standard does not list (``utf-7``, ``unicode_escape``: Python decodes them, no
    browser does) is ignored, as a browser ignores it. Bytes invalid in the encoding become
    U+FFFD, as in a browser."""
    for bom, encoding in _BOMS:
        if raw.startswith(bom):
            return raw[len(bom):].decode(encoding, "replace")
    declared = _META_CHARSET.search(raw[:1024])
    encoding = _codec(declared[1].decode("ascii", "replace")) if declared else None
    if encoding is None:
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError:
            encoding = "cp1252"
    return raw.decode(encoding, "replace")


def _codec(label: str) -> str | None:
    """Python's codec for an encoding label, mapped as the WHATWG Encoding Standard maps it;
    None for a label no codec knows or whose codec is no WHATWG encoding (``_WHATWG``)."""
    try:
        name = codecs.lookup(label.strip().lower()).name
    except LookupError:
        return "cp1252" if label.strip().lower() == "x-user-defined" else None
    return _WHATWG.get(name)
