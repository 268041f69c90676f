"""Which files of a folder ``ingest.read_documents`` reads: the documents below it, walked
without recursion, less what must not be served.

Hidden files and folders (``.git``) are skipped, and so are links to hidden files, links
out of the folder (unless asked: ``follow_links_out``) and paths that are not regular files
(a named pipe would block the read forever), each with a warning naming them. Links to
folders are not followed (a link to ``..`` would loop). The walk keeps its own stack, so a
tree nested as deep as the file system allows (``pathlib.rglob`` recursed once per level:
1,900 nested folders raised ``RecursionError``) is read like any other.
"""
from __future__ import annotations

import os
import warnings
from pathlib import Path

__all__ = ["document_files"]


def _walk(root: Path, suffixes: tuple[str, ...]) -> list[Path]:
    """Every path below ``root`` whose suffix is one of ``suffixes`` (any case), sorted;
    hidden names and what lies below them left out, links to folders not entered."""
    found, stack = [], [root]
    while stack:
        folder = stack.pop()
        try:
            entries = list(os.scandir(folder))
        except OSError:     # vanished, or no access: its files cannot be read either
            continue
        for entry in entries:
            if entry.name.startswith("."):
                continue
            path = folder / entry.name
            if entry.is_dir(follow_symlinks=False):
                stack.append(path)
            elif os.path.splitext(entry.name)[1].lower() in suffixes:
                found.append(path)
    return sorted(found)


def document_files(root: Path, suffixes: tuple[str, ...], follow_links_out: bool) -> list[Path]:
    """The files under ``root`` that ``read_documents`` reads (see the module docstring),
    sorted; warnings name what is skipped. Called from ``ingest._read_folder``: warnings
    point at the caller of ``read_documents``."""
    named = _walk(root, suffixes)
    files = [p for p in named if p.is_file()]
    _not_regular([p for p in named if not p.is_file() and not p.is_dir()], root)
    inside, resolved = root.resolve(), {f: f.resolve() for f in files}
    outside = [f for f in files if not resolved[f].is_relative_to(inside)]
    if outside:  # a link out of the folder: its target was never meant to be served
        shown = ", ".join(repr(str(f)) for f in outside[:3]) + ", ..." * (len(outside) > 3)
        if follow_links_out:
            warnings.warn(f"reading {len(outside)} file(s) under {str(root)!r} that link to "
                          f"places outside it ({shown}), as follow_links_out=True asks",
                          stacklevel=4)
        else:
            warnings.warn(f"skipped {len(outside)} file(s) under {str(root)!r} that link to "
                          f"places outside it ({shown}); copy the files in to index them, "
                          f"or pass follow_links_out=True", stacklevel=4)
            files = [f for f in files if resolved[f].is_relative_to(inside)]
    hidden = {f for f in files if resolved[f].is_relative_to(inside) and any(
        p.startswith(".") for p in resolved[f].relative_to(inside).parts)}
    if hidden:  # notes.txt -> .secret/env.txt: the file is hidden, whatever the link is called
        warnings.warn(f"skipped {len(hidden)} file(s) under {str(root)!r} that link to hidden "
                      f"files or folders ({', '.join(repr(str(f)) for f in sorted(hidden)[:3])}); "
                      f"copy the files to a visible path to index them", stacklevel=4)
        files = [f for f in files if f not in hidden]
    return files


def _not_regular(paths: list[Path], root: Path) -> None:
    """Warn of files under ``root`` that are skipped because they are not regular files (a
    named pipe, whose opening waits for a writer forever; a socket, a device, a link to
    nothing): named, never silently left out."""
    if paths:
        shown = ", ".join(repr(str(p)) for p in paths[:3]) + (", ..." if len(paths) > 3
                                                             else "")
        warnings.warn(f"skipped {len(paths)} path(s) under {str(root)!r} that are not regular "
                      f"files ({shown}): named pipes, sockets, devices or links to nothing; "
                      f"replace them with the files themselves to index them", stacklevel=5)
