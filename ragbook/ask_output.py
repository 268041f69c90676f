"""What ``ragbook ask`` prints for a question: the answer as a quoted block (streamed as
it is checked, with ``--generative``), the escalation or the sources, the confidence and,
with ``--explain``, why each source scored what it did — every line that holds document or
model text escaped (``terminal.shown``) and, on a terminal, folded to its width by ragbook
(``folding``), so no text a document chose can start a row of the tool's own. (``width``
None: lines stay whole, for a pipe or a file.)"""
from __future__ import annotations

import re
from collections.abc import Callable

from .result import Result
from .terminal import Quoted, confidence_line, one_line, passage_line, quoted, tool_line

__all__ = ["streamed_answer", "result_lines", "join_soft_breaks"]


def join_soft_breaks(text: str) -> str:
    """``text`` with each single line break inside a paragraph joined into a space (a
    document's hard-wrapped lines); blank lines between paragraphs kept."""
    return re.sub(r"[ \t]*(?<!\n)\n(?!\n)[ \t]*", " ", text.strip("\n"))


def streamed_answer(pipeline, question: str, scope, width: int | None,
                    write: Callable[[str], None]) -> tuple[Result, bool]:
    """Ask ``pipeline`` (a ``Pipeline``) ``question`` streaming, ``write``-ing each
    verified sentence as a quoted block as it comes; returns the result and whether any
    of it was shown."""
    streamed, block, shown = pipeline.stream(question, scope=scope), Quoted(width), False
    for piece in streamed:
        if piece:
            write(block.write(piece))
            shown = True
    result = streamed.result
    if shown:
        write(block.end() + "\n")
    return result, shown


def result_lines(pipeline, result: Result, *, shown: bool, explained: list[str],
                 width: int | None) -> list[str]:
    """The lines printed under a question (the answer too, unless ``shown`` streamed it),
    ``explained`` (``commands.explain_lines``, for ``--explain``) last."""
    out, lines = result.to_dict(), []
    if out["escalated"]:
        detail = f" ({one_line(out['detail'])})" if out.get("detail") else ""
        lines.append(tool_line(f"escalated: {out['reason']}{detail}", width))
        lines.append("candidates for a human to check:" if out["candidates"] else
                     "no candidate passages were found")
        lines += [passage_line(n, p, width) for n, p in enumerate(out["candidates"], 1)]
        lines.append(confidence_line(out, pipeline.min_confidence))
        return lines
    if not shown:                            # a streamed answer is already on screen
        lines.append(quoted(join_soft_breaks(out["answer"]), width))
    ids = [p["id"] for p in out["candidates"]]
    rank = (f"passage {ids.index(out['sources'][0]['id']) + 1} of {len(ids)} read"
            if out["sources"] and out["sources"][0]["id"] in ids else "")
    if out.get("answer_span"):
        doc, start, end = out["answer_span"]
        lines.append(tool_line(f"(from {one_line(doc)}, chars {start}-{end}"
                               + (f"; {rank})" if rank else ")"), width))
    elif rank:
        lines.append(f"({rank})")
    lines += [confidence_line(out, pipeline.min_confidence), "sources:"]
    lines += [passage_line(n, p, width) for n, p in enumerate(out["sources"], 1)]
    return lines + [tool_line(line, width) for line in explained]
