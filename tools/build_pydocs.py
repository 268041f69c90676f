#!/usr/bin/env python3
"""Build the ``data/pydocs`` corpus from Debian's Python documentation package.

The ragbook benchmark uses the official Python documentation (PSF licence) as a
real-world corpus.  This script turns the Sphinx HTML shipped in Debian's
``python3.X-doc`` package into one record per *section* (see Records), and derives labelled
retrieval queries from the FAQ pages (heading = question, section body = gold
answer).

Usage (from the repository root)::

    apt-get download python3.11-doc          # once, into some temp dir
    python3 tools/build_pydocs.py --deb /tmp/python3.11-doc_3.11.2-6+deb12u9_all.deb \
        --out data/pydocs
    # or, with the package already extracted (``dpkg-deb -x``):
    python3 tools/build_pydocs.py --html-dir /tmp/x/usr/share/doc/python3.11/html \
        --out data/pydocs

Only the Python standard library is used (the ``.deb`` is read with a small
``ar`` reader plus :mod:`tarfile`, so neither dpkg nor network access is needed).
The build is deterministic: rerunning on the same package gives byte-identical
outputs.

Records
-------
A record is either a Sphinx *heading section* (``<section id=...>``, or the
older ``<div class="section" id=...>``) or -- unless ``--no-split-objects`` --
an *API object description* (``<dl class="py function">``, ``c function``,
``std envvar`` ...: one function, class, method, attribute, C macro, command
line option, ...).  Objects are split out because the 3.11 documentation has
only ~3,330 heading sections in the pages used, and many of them are
whole API references of thousands of words (``library/functions`` is one
11,000-word section).  An object record has the object's anchor as id
(``library/functions#abs``), its first signature as heading (``abs(x)``), the
enclosing headings plus the signature as path, and its description as text;
an object shorter than ``--min-words`` (or without an anchor) is not split out
but stays inline in its parent's text (signature paragraph, then description),
so no text is lost to the split.

Outputs (in ``--out``):

``sections.jsonl.gz``
    gzip (mtime 0), one JSON object per line, sorted by ``id``::

        {"id": "library/functions#built-in-functions",
         "file": "library/functions",        # page path without .html
         "heading": "Built-in Functions",    # the section's own heading text
         "path": ["Built-in Functions"],     # heading path, page title first
         "text": "..."}                      # the section's OWN body text

    ``text`` is the body directly under the heading: nested subsections
    (and split-out object descriptions), the heading itself, local tables of
    contents (``nav.contents``, toctrees), permalink anchors ("¶") and page
    chrome (sidebar, related bars, footer) are excluded.  Ordered list items
    are numbered ("1. ", "a. ").  Paragraphs (and list items, table rows, signatures, ...) are
    separated by a blank line; ``<pre>`` blocks are kept verbatim; inline
    markup (``<code>``, links, emphasis) becomes plain text with whitespace
    collapsed.  List items are prefixed with ``- ``, table cells are joined by
    `` | ``, admonition/footnote labels ("Note", "See also", "[1]") are
    prefixed to the paragraph that follows them.  Sections with fewer than
    ``--min-words`` (15) words are dropped, except FAQ question sections,
    which are kept whenever their text is non-empty because they are gold
    answers (see ``faq.jsonl``).

``faq.jsonl``
    One labelled query per FAQ question (``faq/*.html`` sections whose heading
    ends with "?" and whose own text is non-empty)::

        {"id": "faq-programming-001", "question": <heading>,
         "file": "faq/programming", "heading": <heading>,
         "split": "train"|"test"}

    ``(file, heading)`` identifies the gold section; if a pair were not
    unique a ``"parent"`` key (the parent section's heading) is added as a
    disambiguator.  ``split`` is ``test`` when ``int(sha1("file|heading"), 16)
    % 2 == 0``, else ``train``.

``LICENSE``
    The copyright and "History and License" pages of the same documentation
    build, rendered to text (PSF License Agreement + Zero-Clause BSD for code
    examples + licences of incorporated software).

``build_info.json``
    Package name/version (when built from a ``.deb``), counts and word
    statistics, and SHA-256 digests of the generated files.

``faq_spans.jsonl`` is *hand-written* (short verbatim answer spans picked by
reading each FAQ answer): ``{"faq_id", "answer", "answer_start"}``.  This
script never writes it, but if it exists it is validated: every ``answer``
must be an exact substring of its gold section's ``text``, 1-25 words long,
and ``answer_start`` must equal ``text.find(answer)`` (the first occurrence,
which was checked by hand to be the intended one).  A failing check makes the
script exit 1.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import html.parser
import io
import json
import re
import statistics
import sys
import tarfile
from pathlib import Path

# --------------------------------------------------------------------------
# Which pages to use
# --------------------------------------------------------------------------

#: Pages (paths without ``.html``, relative to the html root) that are skipped:
#: indices, search, pure tables of contents, legal boilerplate (written to
#: LICENSE instead) and the download page of the docs archives themselves.
SKIP_PAGES = {
    "search",
    "py-modindex",
    "genindex",
    "contents",      # the master table of contents
    "index",         # the docs start page: links only
    "license",       # goes to LICENSE, not into the corpus
    "copyright",
    "download",      # "Download Python X.Y Documentation": archive links
}
#: Path prefixes skipped entirely: the release notes ("What's New" and the
#: changelog live under whatsnew/) and Sphinx's internal folders.
SKIP_PREFIXES = ("genindex", "whatsnew/", "_static/", "_sources/", "_images/",
                 "_downloads/")

MIN_WORDS = 15

# --------------------------------------------------------------------------
# HTML -> sections
# --------------------------------------------------------------------------

VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link",
        "meta", "param", "source", "track", "wbr"}
HEADINGS = {"h1", "h2", "h3", "h4", "h5", "h6"}
#: Elements whose start and end delimit a paragraph.
BLOCK = {"p", "div", "dl", "dt", "dd", "ul", "ol", "li", "blockquote", "table",
         "thead", "tbody", "tfoot", "caption", "figure", "figcaption", "aside",
         "section", "article", "header", "footer", "nav", "form", "fieldset",
         "address", "center", "details", "summary", "hr", "pre", "tr"}
#: Title paragraphs whose text becomes a prefix of the next paragraph.
TITLE_CLASSES = {"admonition-title", "sidebar-title", "topic-title"}
#: Classes of elements dropped with everything inside them.
SKIP_CLASSES = {"headerlink", "toctree-wrapper", "contents", "sphinxsidebar",
                "related", "footer", "mobile-nav", "inline-search",
                "version_switcher_placeholder", "language_switcher_placeholder",
                "clearer"}
#: ``<dl>`` classes of Sphinx object descriptions (``dl.py.function`` ...).
OBJECT_DOMAINS = {"py", "c", "cpp", "js", "std", "describe", "object"}
SKIP_TAGS = {"script", "style", "noscript", "template", "button", "img",
             "svg", "math"}  # Sphinx renders math as text too; none in 3.11 docs

_WS = re.compile(r"\s+")
_BR = "\x00"  # placeholder for <br>, survives whitespace collapsing


class _Section:
    """A heading section, or (kind "object") an API object description."""
    __slots__ = ("anchor", "depth", "heading", "paras", "parent", "children", "kind")

    def __init__(self, anchor, parent, depth=None, kind="section"):
        self.anchor = anchor
        self.depth = depth       # parser stack depth of the section/dl element
        self.heading = None
        # paragraphs (str); an object child is stored in place as a _Section
        # so that it can be inlined there if it is too short to stand alone
        self.paras: list = []
        self.parent = parent
        self.children: list[_Section] = []
        self.kind = kind


class SphinxSections(html.parser.HTMLParser):
    """Split one Sphinx page into a tree of sections with their own text."""

    def __init__(self, split_objects=True):
        super().__init__(convert_charrefs=True)
        self.split_objects = split_objects
        self.heading_depth = None
        self.last_target = None  # id of a <span class="target"> just seen
        self.fieldlists: set[int] = set()  # stack depths of open dl.field-list
        self.lists: list = []    # open <ul> (None) / <ol> ([next number, classes])
        self.stack: list[tuple[str, bool]] = []  # (tag, is_skip_root)
        self.skip = 0            # >0 while inside a skipped element
        self.in_body = 0         # >0 while inside div.body
        self.body_depth = None   # stack depth of div.body
        self.pre = 0
        self.buf: list[str] = []
        self.prefix = ""         # pending prefix for the next paragraph
        self.heading_buf: list[str] | None = None
        self.title_buf: list[str] | None = None
        self.title_depth = None
        self.label_depth = None
        self.row: list[str] | None = None   # table row: finished cells
        self.cell: list[str] | None = None
        self.root = _Section(None, None)
        self.cur = self.root

    # -- helpers ----------------------------------------------------------
    def _flush(self):
        text = "".join(self.buf)
        self.buf = []
        text = _WS.sub(" ", text).replace(_BR, "\n").strip()
        text = "\n".join(line.strip() for line in text.split("\n")).strip()
        if not text:
            return
        self._add_para(self.prefix + text)
        self.prefix = ""

    def _bullet(self) -> str:
        lst = self.lists[-1] if self.lists else None
        if lst is None:
            return "- "
        n, classes = lst
        lst[0] += 1
        if classes & {"loweralpha", "upperalpha"} and 1 <= n <= 26:
            c = chr(ord("a") + n - 1)
            return (c.upper() if "upperalpha" in classes else c) + ". "
        return f"{n}. "

    def _add_para(self, para):
        self.cur.paras.append(para)

    def _sink(self, data):
        if self.heading_buf is not None:
            self.heading_buf.append(data)
        elif self.title_buf is not None:
            self.title_buf.append(data)
        elif self.cell is not None:
            self.cell.append(data)
        else:
            self.buf.append(data)

    # -- parser callbacks ---------------------------------------------------
    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        classes = set((a.get("class") or "").split())
        if tag in VOID:
            if tag == "br" and self.in_body and not self.skip:
                self._sink("\n" if self.pre else _BR)
            return
        is_skip = bool(self.skip == 0 and (tag in SKIP_TAGS or classes & SKIP_CLASSES))
        self.stack.append((tag, is_skip))
        if self.skip:
            return
        if is_skip:
            self.skip = 1
            return
        if not self.in_body:
            if tag == "div" and "body" in classes:
                self.in_body = 1
                self.body_depth = len(self.stack)
            return
        if tag == "span" and "target" in classes and a.get("id"):
            self.last_target = a["id"]
            return
        if tag != "dl":
            self.last_target = None

        if tag == "section" or (tag == "div" and "section" in classes):
            self._flush()
            sec = _Section(a.get("id"), self.cur, len(self.stack))
            self.cur.children.append(sec)
            self.cur = sec
            return
        if (self.split_objects and tag == "dl" and classes & OBJECT_DOMAINS
                and self.cur is not self.root and not self.pre and self.cell is None):
            self._flush()
            # a :noindex: object has no id on its <dt>; Sphinx then often puts
            # a target <span id=...> right before the <dl>: use that instead
            obj = _Section(self.last_target, self.cur, len(self.stack), kind="object")
            self.last_target = None
            self.cur.children.append(obj)
            self.cur.paras.append(obj)
            self.cur = obj
            return
        if (self.cur.kind == "object" and tag == "dt" and self.cur.heading is None
                and len(self.stack) == self.cur.depth + 1):
            self._flush()
            self.cur.anchor = a.get("id") or self.cur.anchor  # None: inlined
            self.heading_buf = []
            self.heading_depth = len(self.stack)
            return
        if (tag in HEADINGS and self.cur.heading is None and self.cur is not self.root
                and self.cur.kind == "section" and self.heading_buf is None):
            self._flush()
            self.heading_buf = []
            self.heading_depth = len(self.stack)
            return
        if self.pre and tag not in BLOCK:
            return
        if tag == "pre":
            self._flush()
            self.pre += 1
            return
        if tag == "tr":
            self._flush()
            self.row = []
            return
        if self.row is not None and tag in ("td", "th"):
            self.cell = []
            return
        if self.cell is not None:
            return  # block markup inside a table cell stays inline
        if tag in BLOCK:
            self._flush()
            if tag in ("ul", "ol"):
                start = a.get("start") or "1"
                self.lists.append([int(start) if start.isdigit() else 1, classes]
                                  if tag == "ol" else None)
            if tag == "li":
                self.prefix = self._bullet()
            if tag == "dl" and "field-list" in classes:
                self.fieldlists.add(len(self.stack))
            if (tag == "p" and classes & TITLE_CLASSES) or (
                    tag == "dt" and len(self.stack) - 1 in self.fieldlists):
                self.title_buf = []
                self.title_depth = len(self.stack)
            return
        if tag == "span" and "label" in classes:
            self.label_depth = len(self.stack)

    def handle_startendtag(self, tag, attrs):
        self.handle_starttag(tag, attrs)
        if tag not in VOID:
            self.handle_endtag(tag)

    def handle_endtag(self, tag):
        if tag in VOID:
            return
        # pop to the matching element (tolerates sloppy nesting)
        idx = None
        for i in range(len(self.stack) - 1, -1, -1):
            if self.stack[i][0] == tag:
                idx = i
                break
        if idx is None:
            return
        while len(self.stack) > idx:
            depth = len(self.stack)
            t, was_skip_root = self.stack.pop()
            self._close(t, was_skip_root, depth)

    def _close(self, tag, was_skip_root, depth):
        if self.skip:
            if was_skip_root:
                self.skip = 0
            return
        if not self.in_body:
            return
        if depth == self.body_depth:
            self._flush()
            self.in_body = 0
            return
        if self.heading_buf is not None and depth == self.heading_depth:
            self.heading_depth = None
            self.cur.heading = _WS.sub(" ", "".join(self.heading_buf).replace(_BR, " ")).strip()
            self.heading_buf = None
            return
        if tag == "pre" and self.pre:
            self.pre -= 1
            if not self.pre:
                text = "".join(self.buf).replace(_BR, "\n")
                self.buf = []
                text = text.strip("\n").rstrip()
                if text.strip():
                    if self.prefix:
                        self._add_para(self.prefix.rstrip())
                        self.prefix = ""
                    self._add_para(text)
            return
        if self.pre:
            return
        if tag in ("td", "th") and self.cell is not None:
            self.row.append(_WS.sub(" ", "".join(self.cell).replace(_BR, " ")).strip())
            self.cell = None
            return
        if tag == "tr" and self.row is not None:
            cells = self.row
            self.row = None
            while cells and not cells[-1]:
                cells.pop()
            if any(cells):
                self._add_para(self.prefix + " | ".join(cells))
                self.prefix = ""
            return
        if self.cell is not None:
            return
        if self.title_buf is not None and depth == self.title_depth:
            title = _WS.sub(" ", "".join(self.title_buf)).strip()
            self.title_buf = None
            self.title_depth = None
            if title:
                self.prefix = title.rstrip(":") + ": "
            return
        if self.label_depth is not None and depth == self.label_depth:
            self.label_depth = None
            label = _WS.sub(" ", "".join(self.buf)).strip()
            if label:
                self.buf = []
                self.prefix += label + " "
            return
        if tag in ("section", "div", "dl") and self._is_section_close(tag, depth):
            self._flush()
            self.cur = self.cur.parent
            return
        if tag == "dl":
            self.fieldlists.discard(depth)
        if tag in ("ul", "ol") and self.lists:
            self.lists.pop()
        if tag in BLOCK:
            keep = self.prefix if tag == "li" else None
            self._flush()
            if tag == "li" and keep and self.prefix == keep:
                self.prefix = ""   # empty list item

    def _is_section_close(self, tag, depth):
        return self.cur is not self.root and self.cur.depth == depth

    def handle_data(self, data):
        if self.skip or not self.in_body:
            return
        if data.strip():
            self.last_target = None
        if self.pre and self.heading_buf is None:
            self.buf.append(data)
            return
        self._sink(data)


def parse_page(html_text: str, split_objects: bool = True):
    p = SphinxSections(split_objects)
    p.feed(html_text)
    p.close()
    return p.root


def _nwords(text: str) -> int:
    return len(text.split())


def iter_sections(root, min_words=MIN_WORDS):
    """Yield one dict per record of a parsed page, in document order:
    ``anchor, heading, path, text, kind, parent`` (parent = heading of the
    enclosing record, None for a page's top section).

    An object description is a record of its own when it has an anchor and
    at least ``min_words`` words of own text; otherwise it is inlined (its
    signature, then its text) at its place in the enclosing text.
    """
    used = set()
    rendered: dict[int, str] = {}

    def render(node) -> str:
        if id(node) not in rendered:
            out = []
            for p in node.paras:
                if isinstance(p, str):
                    out.append(p)
                elif inlined(p):
                    if p.heading:
                        out.append(p.heading)
                    t = render(p)
                    if t:
                        out.append(t)
            rendered[id(node)] = "\n\n".join(out)
        return rendered[id(node)]

    def inlined(node) -> bool:
        return node.kind == "object" and (
            not node.anchor or not node.heading or _nwords(render(node)) < min_words)

    def walk(node, path):
        heading = node.heading or ""
        here = path + [heading]
        if not inlined(node):
            anchor = (node.anchor or re.sub(r"[^a-z0-9]+", "-", heading.lower()).strip("-")
                      or "section")
            base, n = anchor, 1
            while anchor in used:
                n += 1
                anchor = f"{base}-{n}"
            used.add(anchor)
            yield {"anchor": anchor, "heading": heading, "path": here,
                   "text": render(node), "kind": node.kind,
                   "parent": path[-1] if path else None}
        for ch in node.children:
            yield from walk(ch, here)

    for top in root.children:
        yield from walk(top, [])


# --------------------------------------------------------------------------
# Input: a .deb (read with the stdlib) or an extracted html directory
# --------------------------------------------------------------------------

def _ar_members(data: bytes):
    if not data.startswith(b"!<arch>\n"):
        raise ValueError("not an ar archive (.deb)")
    pos = 8
    while pos + 60 <= len(data):
        hdr = data[pos:pos + 60]
        name = hdr[:16].decode().strip().rstrip("/")
        size = int(hdr[48:58].decode().strip())
        body = data[pos + 60:pos + 60 + size]
        yield name, body
        pos += 60 + size + (size & 1)


def read_deb(path: Path):
    """Return (control_fields, {relpath: bytes}, copyright_bytes) where the
    mapping holds the files under usr/share/doc/python3.X/html/."""
    data = path.read_bytes()
    control, html_files, copyright_ = {}, {}, None
    for name, body in _ar_members(data):
        if name.startswith("control.tar"):
            with tarfile.open(fileobj=io.BytesIO(body)) as tf:
                for m in tf:
                    if m.isfile() and m.name.lstrip("./") == "control":
                        txt = tf.extractfile(m).read().decode()
                        for line in txt.splitlines():
                            if line and not line[0].isspace() and ":" in line:
                                k, v = line.split(":", 1)
                                control[k.strip()] = v.strip()
        elif name.startswith("data.tar"):
            with tarfile.open(fileobj=io.BytesIO(body)) as tf:
                for m in tf:
                    if not m.isfile():
                        continue
                    n = m.name.lstrip("./")
                    mm = re.match(r"usr/share/doc/python3\.\d+/html/(.*)$", n)
                    if mm:
                        html_files[mm.group(1)] = tf.extractfile(m).read()
                    elif re.match(r"usr/share/doc/python3\.\d+-doc/copyright$", n):
                        copyright_ = tf.extractfile(m).read()
    if not html_files:
        raise SystemExit(f"{path}: no usr/share/doc/python3.X/html/ in package")
    return control, html_files, copyright_


def read_html_dir(root: Path):
    files = {}
    for p in sorted(root.rglob("*.html")):
        files[p.relative_to(root).as_posix()] = p.read_bytes()
    return files


# --------------------------------------------------------------------------
# Building
# --------------------------------------------------------------------------

def wanted(rel: str) -> bool:
    if not rel.endswith(".html"):
        return False
    stem = rel[:-5]
    if stem in SKIP_PAGES or stem.startswith(SKIP_PREFIXES):
        return False
    return True


def is_faq_question(file: str, s: dict) -> bool:
    return (file.startswith("faq/") and file != "faq/index"
            and s["heading"].endswith("?") and bool(s["text"].strip()))


def page_text(html_bytes: bytes) -> str:
    """Whole page as text (headings included), for LICENSE."""
    root = parse_page(html_bytes.decode("utf-8"), split_objects=False)
    out = []

    def walk(sec, level):
        if sec.heading:
            out.append(sec.heading + "\n" + ("=" if level == 0 else "-") * len(sec.heading))
        out.extend(sec.paras)
        for ch in sec.children:
            walk(ch, level + 1)
    for top in root.children:
        walk(top, 0)
    return "\n\n".join(out).strip() + "\n"


def word_stats(counts):
    s = sorted(counts)
    n = len(s)
    return {
        "min": s[0], "median": statistics.median(s),
        "p90": s[min(n - 1, int(0.9 * n))], "max": s[-1], "total": sum(s),
        "mean": round(sum(s) / n, 1),
    }


def build(files: dict[str, bytes], min_words: int, split_objects: bool = True):
    sections, faq_candidates, dropped = [], [], 0
    kinds: dict[str, int] = {}
    for rel in sorted(files):
        if not wanted(rel):
            continue
        file = rel[:-5]
        root = parse_page(files[rel].decode("utf-8"), split_objects)
        for s in iter_sections(root, min_words):
            nwords = len(s["text"].split())
            faq_q = is_faq_question(file, s)
            if faq_q:
                faq_candidates.append((file, s))
            if nwords < min_words and not faq_q:
                dropped += 1
                continue
            if not s["heading"]:
                dropped += 1
                continue
            kinds[s["kind"]] = kinds.get(s["kind"], 0) + 1
            sections.append({
                "id": f"{file}#{s['anchor']}", "file": file,
                "heading": s["heading"], "path": s["path"], "text": s["text"],
            })
    sections.sort(key=lambda r: r["id"])
    ids = [r["id"] for r in sections]
    assert len(ids) == len(set(ids)), "duplicate section ids"
    return sections, faq_candidates, dropped, kinds


def make_faq(faq_candidates, sections):
    by_key: dict[tuple[str, str], list[dict]] = {}
    for r in sections:
        by_key.setdefault((r["file"], r["heading"]), []).append(r)
    queries, counters = [], {}
    for file, s in faq_candidates:  # document order per file, files sorted
        stem = file.split("/", 1)[1]
        counters[stem] = counters.get(stem, 0) + 1
        q = {
            "id": f"faq-{stem}-{counters[stem]:03d}",
            "question": s["heading"], "file": file, "heading": s["heading"],
        }
        matches = by_key.get((file, s["heading"]), [])
        if len(matches) != 1:
            # disambiguate by the parent heading (path[-2])
            q["parent"] = s["parent"]
            matches = [r for r in matches if len(r["path"]) >= 2
                       and r["path"][-2] == s["parent"]]
            if len(matches) != 1:
                raise SystemExit(f"FAQ gold does not resolve uniquely: {q}")
        h = int(hashlib.sha1(f"{file}|{s['heading']}".encode()).hexdigest(), 16)
        q["split"] = "test" if h % 2 == 0 else "train"
        queries.append(q)
    return queries


def resolve(q, sections_by_key):
    cands = sections_by_key.get((q["file"], q["heading"]), [])
    if "parent" in q:
        cands = [r for r in cands if len(r["path"]) >= 2 and r["path"][-2] == q["parent"]]
    return cands


def check_spans(path: Path, queries, sections):
    by_key = {}
    for r in sections:
        by_key.setdefault((r["file"], r["heading"]), []).append(r)
    qmap = {q["id"]: q for q in queries}
    errors, n, seen = [], 0, set()
    for ln, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        rec = json.loads(line)
        n += 1
        fid, ans = rec.get("faq_id"), rec.get("answer")
        if fid in seen:
            errors.append(f"line {ln}: duplicate faq_id {fid}")
        seen.add(fid)
        if fid not in qmap:
            errors.append(f"line {ln}: unknown faq_id {fid}")
            continue
        secs = resolve(qmap[fid], by_key)
        if len(secs) != 1:
            errors.append(f"line {ln}: {fid} does not resolve to one section")
            continue
        text = secs[0]["text"]
        if not isinstance(ans, str) or ans != ans.strip() or ans not in text:
            errors.append(f"line {ln}: {fid}: answer is not a verbatim substring: {ans!r}")
        elif not 1 <= len(ans.split()) <= 25:
            errors.append(f"line {ln}: {fid}: answer has {len(ans.split())} words")
        elif "answer_start" in rec and rec["answer_start"] != text.find(ans):
            errors.append(f"line {ln}: {fid}: answer_start {rec['answer_start']} != "
                          f"{text.find(ans)} (first occurrence)")
    return n, errors


def write_gz_jsonl(path: Path, rows):
    raw = "".join(json.dumps(r, ensure_ascii=False, sort_keys=False) + "\n" for r in rows)
    with open(path, "wb") as fh:
        with gzip.GzipFile(filename="", mode="wb", fileobj=fh, mtime=0, compresslevel=9) as gz:
            gz.write(raw.encode("utf-8"))


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    src = ap.add_mutually_exclusive_group(required=True)
    src.add_argument("--deb", type=Path, help="python3.X-doc .deb file")
    src.add_argument("--html-dir", type=Path,
                     help="extracted usr/share/doc/python3.X/html directory")
    ap.add_argument("--out", type=Path, default=Path("data/pydocs"),
                    help="output directory (default %(default)s)")
    ap.add_argument("--min-words", type=int, default=MIN_WORDS,
                    help="drop sections with fewer words (default %(default)s)")
    ap.add_argument("--no-split-objects", dest="split_objects", action="store_false",
                    help="keep API object descriptions (functions, classes, ...) "
                         "inside their heading section instead of splitting them out")
    ap.add_argument("--min-sections", type=int, default=4000,
                    help="fail if fewer sections result (default %(default)s)")
    args = ap.parse_args(argv)

    control = {}
    if args.deb:
        control, files, _copyright = read_deb(args.deb)
        source = {"package": control.get("Package"), "version": control.get("Version"),
                  "deb": args.deb.name}
    else:
        files = read_html_dir(args.html_dir)
        source = {"html_dir": str(args.html_dir)}

    sections, faq_candidates, dropped, kinds = build(files, args.min_words, args.split_objects)
    if len(sections) < args.min_sections:
        raise SystemExit(f"only {len(sections)} sections (< {args.min_sections})")
    queries = make_faq(faq_candidates, sections)

    out = args.out
    out.mkdir(parents=True, exist_ok=True)
    write_gz_jsonl(out / "sections.jsonl.gz", sections)
    with open(out / "faq.jsonl", "w", encoding="utf-8") as fh:
        for q in queries:
            fh.write(json.dumps(q, ensure_ascii=False) + "\n")
    lic = []
    for page in ("copyright.html", "license.html"):
        if page in files:
            lic.append(page_text(files[page]))
    (out / "LICENSE").write_text(
        "Python documentation: copyright and licence, as rendered from the\n"
        "copyright.html and license.html pages of the documentation build this\n"
        "corpus was made from (" + (f"Debian package {source['package']} "
                                    f"{source['version']}" if args.deb else "html dir")
        + ").\n\n" + "\n\n".join(lic), encoding="utf-8")

    wc = [len(r["text"].split()) for r in sections]
    stats = word_stats(wc)
    splits = {s: sum(q["split"] == s for q in queries) for s in ("train", "test")}
    info = {
        "source": source,
        "split_objects": args.split_objects,
        "min_words": args.min_words,
        "sections": len(sections),
        "sections_by_kind": dict(sorted(kinds.items())),
        "sections_under_min_words_kept_as_faq_gold": sum(
            len(r["text"].split()) < args.min_words for r in sections),
        "sections_dropped_short_or_untitled": dropped,
        "pages": len({r["file"] for r in sections}),
        "words": stats,
        "faq_queries": len(queries),
        "faq_splits": splits,
        "faq_with_parent": sum("parent" in q for q in queries),
        "faq_by_file": {f: sum(q["file"] == f for q in queries)
                        for f in sorted({q["file"] for q in queries})},
    }
    rc = 0
    spans_path = out / "faq_spans.jsonl"
    if spans_path.exists():
        n, errors = check_spans(spans_path, queries, sections)
        info["faq_spans"] = n
        split_of = {q["id"]: q["split"] for q in queries}
        ids = [json.loads(line)["faq_id"]
               for line in spans_path.read_text(encoding="utf-8").splitlines() if line.strip()]
        info["faq_spans_splits"] = {sp: sum(split_of.get(i) == sp for i in ids)
                                    for sp in ("train", "test")}
        for e in errors:
            print("SPAN ERROR:", e, file=sys.stderr)
        if errors:
            rc = 1
    info["files"] = {p.name: {"bytes": p.stat().st_size, "sha256": sha256(p)}
                     for p in sorted(out.iterdir())
                     if p.is_file() and p.name != "build_info.json" and p.name != "README.md"}
    (out / "build_info.json").write_text(json.dumps(info, indent=2) + "\n", encoding="utf-8")
    print(json.dumps(info, indent=2))
    return rc


if __name__ == "__main__":
    sys.exit(main())
