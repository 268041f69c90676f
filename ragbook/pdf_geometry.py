"""Where a PDF content stream's text lands, and whether a reader can see it there: text
drawn wholly off the page (outside its CropBox), wholly outside a clipping path, or wholly
under an opaque filled rectangle painted after it is invisible on the rendered page, and
``pdf_text`` leaves it out as it leaves out text drawn in render mode 3.

Every estimate errs towards *seen*: a run of text is given a box larger than its glyphs
(each byte up to 1.5 em wide, ascenders and descenders included), a clipping path the box
around its points, and only a plain rectangle filled in an unrotated space, with no
transparency or blend mode set (``gs``), and no pattern colour, covers text. So a
word is dropped only when all of that box is off the page, clipped away or covered.
Not read: clipping by text (render modes 4–7), shadings (``sh``), images or forms drawn
over text, and annotations.
"""
from __future__ import annotations

import heapq

__all__ = ["unseen", "form_place", "FILLS", "SHOW"]

_EM = 1.5                    # the widest a glyph is taken to be, in em per byte
_COVERS = 64                 # the largest fills drawn after text that are tested against it
_PATH = (b"m", b"l", b"c", b"v", b"y", b"re")
_ENDS = (b"n", b"f", b"F", b"f*", b"S", b"s", b"B", b"B*", b"b", b"b*")
FILLS = (b"f", b"F", b"f*", b"B", b"B*", b"b", b"b*")
SHOW = (b"Tj", b"TJ", b"'", b'"')
Box = tuple[float, float, float, float]          # x0, y0, x1, y1 in default user space


def _mul(m, n) -> tuple:
    """The matrix product ``m × n`` of two PDF matrices ``[a b c d e f]``."""
    a, b, c, d, e, f = m
    p, q, r, s, t, u = n
    return (a * p + b * r, a * q + b * s, c * p + d * r, c * q + d * s,
            e * p + f * r + t, e * q + f * s + u)


def _box(points, m) -> Box:
    """The box around ``points`` mapped by matrix ``m``."""
    xs, ys = [], []
    for x, y in points:
        xs.append(m[0] * x + m[2] * y + m[4])
        ys.append(m[1] * x + m[3] * y + m[5])
    return min(xs), min(ys), max(xs), max(ys)


def _meet(a: Box | None, b: Box | None) -> Box | None:
    """The intersection of two boxes (None: no box, everything)."""
    if a is None or b is None:
        return a or b
    return max(a[0], b[0]), max(a[1], b[1]), min(a[2], b[2]), min(a[3], b[3])


def _empty(box: Box) -> bool:
    return box[0] >= box[2] or box[1] >= box[3]


def _inside(inner: Box, outer: Box) -> bool:
    return outer[0] <= inner[0] and outer[1] <= inner[1] and inner[2] <= outer[2] \
        and inner[3] <= outer[3]


class _State:
    """The graphics and text state ``unseen`` follows."""

    def __init__(self, ctm, clip) -> None:
        self.ctm, self.clip, self.opaque = ctm, clip, True
        self.size, self.scale, self.rise, self.leading = 1.0, 1.0, 0.0, 0.0
        self.char, self.word = 0.0, 0.0

    def copy(self) -> _State:
        new = _State(self.ctm, self.clip)
        new.__dict__.update(self.__dict__)
        return new


def unseen(operations, page_box: Box, ctm=(1, 0, 0, 1, 0, 0), clip: Box | None = None,
           transparent=lambda name: True, draws: dict | None = None) -> set[int]:
    """The indices of the text-showing operations among ``operations`` (pypdf's ``(operands,
    operator)`` pairs) that no reader sees: their text's box lies wholly outside ``page_box``
    (the CropBox) or the clip in force, or wholly under an opaque rectangle filled later.
    ``ctm``, ``clip``: the state the stream starts in (a form's, from the ``Do`` that draws
    it); ``transparent(name)``: whether the ``gs`` parameters ``name`` make fills
    translucent. ``draws``, when given, gets the ``(ctm, clip)`` each XObject is drawn in
    (``Do``), by name."""
    state, stack = _State(ctm, _meet(clip, page_box)), []
    tm = tlm = (1, 0, 0, 1, 0, 0)
    ahead = [0.0, 0.0]                   # how far the line has advanced: least, most
    path: list = []
    texts: list[tuple[int, Box]] = []
    fills: list[tuple[int, Box]] = []
    hidden: set[int] = set()
    for i, (operands, op) in enumerate(operations):
        try:
            args = [float(v) for v in operands] if op not in (b"TJ", b"Tj", b"'", b'"', b"Tf",
                                                              b"gs", b"scn", b"Do") else []
        except (TypeError, ValueError):
            continue
        if op == b"q":
            stack.append(state.copy())
        elif op == b"Q" and stack:
            state = stack.pop()
        elif op == b"cm" and len(args) == 6:
            state.ctm = _mul(args, state.ctm)
        elif op == b"Do" and operands and draws is not None:
            draws.setdefault(operands[0], []).append((state.ctm, state.clip))
        elif op == b"gs" and operands:
            state.opaque = state.opaque and not transparent(operands[0])
        elif op == b"scn" and operands and not isinstance(operands[-1], (int, float)):
            state.opaque = False          # a pattern: it may be see-through
        elif op in _PATH:
            path.append((op, args, state.ctm))
        elif op in (b"W", b"W*"):
            path.append((b"W", [], state.ctm))
        elif op in _ENDS:
            _end_path(path, op, state, i, fills)
            path = []
        elif op == b"BT":
            tm = tlm = (1, 0, 0, 1, 0, 0)
            ahead = [0.0, 0.0]
        elif op in (b"Td", b"TD") and len(args) == 2:
            state.leading = -args[1] if op == b"TD" else state.leading
            tm = tlm = _mul((1, 0, 0, 1, args[0], args[1]), tlm)
            ahead = [0.0, 0.0]
        elif op == b"Tm" and len(args) == 6:
            tm = tlm = tuple(args)
            ahead = [0.0, 0.0]
        elif op in (b"T*", b"'", b'"'):
            tm = tlm = _mul((1, 0, 0, 1, 0, -state.leading), tlm)
            ahead = [0.0, 0.0]
        elif op == b"Tf" and len(operands) > 1:
            state.size = float(operands[1])
        elif op in (b"Tz", b"Ts", b"TL", b"Tc", b"Tw") and args:
            setattr(state, {b"Tz": "scale", b"Ts": "rise", b"TL": "leading", b"Tc": "char",
                            b"Tw": "word"}[op], args[0] / 100 if op == b"Tz" else args[0])
        if op == b'"' and len(operands) == 3:
            state.word, state.char = float(operands[0]), float(operands[1])
        if op in SHOW and operands:
            box = _text_box(operands[-1], state, tm, ahead)
            seen = _meet(box, state.clip)
            if _empty(seen):
                hidden.add(i)
            else:
                texts.append((i, seen))
    return hidden | _covered(texts, fills)


def _end_path(path: list, op: bytes, state: _State, i: int, fills: list) -> None:
    """A path ends: a clip (``W``) narrows the state's clip to the box around its points;
    a fill of one plain rectangle, opaque, in an unrotated space, is noted in ``fills``."""
    points = []
    for kind, args, ctm in path:
        if kind == b"re" and len(args) == 4:
            x, y, w, h = args
            points.append(_box([(x, y), (x + w, y + h)], ctm))
        elif kind != b"W" and len(args) >= 2:
            points.append(_box(list(zip(args[::2], args[1::2], strict=False)), ctm))
    if not points:
        return
    box = (min(p[0] for p in points), min(p[1] for p in points),
           max(p[2] for p in points), max(p[3] for p in points))
    if any(kind == b"W" for kind, _, _ in path):
        state.clip = _meet(state.clip, box)
    plain = len(path) - sum(kind == b"W" for kind, _, _ in path) == 1 and path[0][0] == b"re"
    if op in FILLS and plain and state.opaque and path[0][2][1] == path[0][2][2] == 0:
        covered = _meet(box, state.clip)
        if not _empty(covered):
            fills.append((i, covered))


def _text_box(string, state: _State, tm, ahead: list[float]) -> Box:
    """The box, in default user space, that a text-showing operation's glyphs lie within
    (each byte up to ``_EM`` wide, from the line's least to most advance so far), and the
    line's advance moved past them."""
    least = most = low_mark = high_mark = 0.0
    parts = string if isinstance(string, list) else [string]
    for part in parts:
        if isinstance(part, (bytes, str)):
            raw = part.encode("latin-1", "replace") if isinstance(part, str) else part
            spaces = raw.count(b" ")
            most += len(raw) * (_EM * state.size + max(state.char, 0)) \
                + spaces * max(state.word, 0)
            least += len(raw) * min(state.char, 0) + spaces * min(state.word, 0)
        else:
            try:
                shift = -float(part) / 1000 * state.size
            except (TypeError, ValueError):
                continue
            most, least = most + shift, least + shift
        low_mark, high_mark = min(low_mark, least), max(high_mark, most)
    scale = state.scale
    x0, x1 = (ahead[0] + low_mark) * scale, (ahead[1] + high_mark) * scale
    ahead[0], ahead[1] = ahead[0] + least, ahead[1] + most
    size = abs(state.size)
    low, high = state.rise - 0.5 * size, state.rise + 1.5 * size
    return _box([(x0, low), (x1, low), (x0, high), (x1, high)], _mul(tm, state.ctm))


def _covered(texts: list[tuple[int, Box]], fills: list[tuple[int, Box]]) -> set[int]:
    """The text operations whose visible box lies wholly inside a fill drawn after them
    (of the ``_COVERS`` largest fills drawn after each)."""
    if not fills or not texts:
        return set()
    out, largest, at = set(), [], len(fills)
    for index, box in reversed(texts):
        while at and fills[at - 1][0] > index:
            at -= 1
            fill = fills[at][1]
            heapq.heappush(largest, ((fill[2] - fill[0]) * (fill[3] - fill[1]), at, fill))
            if len(largest) > _COVERS:
                heapq.heappop(largest)
        if any(_inside(box, fill) for _, _, fill in largest):
            out.add(index)
    return out


def form_place(form, draws: list, page_box: Box) -> tuple | None:
    """``(ctm, clip)`` a form XObject's content starts in, when it is drawn once (``draws``:
    the ``(ctm, clip)`` of each ``Do`` of it): its ``/Matrix`` on the drawing CTM, clipped
    to its ``/BBox``; None for a form drawn more or less often (not judged by place)."""
    if len(draws) != 1:
        return None
    try:
        matrix = [float(v) for v in form.get("/Matrix", (1, 0, 0, 1, 0, 0))]
        x0, y0, x1, y1 = (float(v) for v in form["/BBox"])
    except (KeyError, TypeError, ValueError):
        return None
    if len(matrix) != 6:
        return None
    ctm = _mul(matrix, draws[0][0])
    return ctm, _meet(_meet(draws[0][1], _box([(x0, y0), (x1, y1), (x0, y1), (x1, y0)], ctm)),
                      page_box)
