"""Build ``data/ninja/manual/``: the Ninja build system's manual, one Markdown file per
section, from the HTML copy Debian's ``ninja-build`` package ships.

    python tools/build_ninja_manual.py [/usr/share/doc/ninja-build/manual.html]

Each section (chapter, section or subsection heading) becomes ``<slug>.md``: front matter
(``id``, ``title``, ``chapter``), a ``# heading`` line and the section's own text — not its
subsections'. Paragraphs keep the manual's hard line wrapping (the HTML keeps the AsciiDoc
source's line breaks), code blocks become fenced blocks, list items ``- `` lines, and links
``text (url)``, so the text has the shapes a reader meets in real documentation. The
labelled questions (``data/ninja/questions.jsonl``) are written by hand and quote this text
verbatim: rebuild only from the same manual (ninja 1.11.1, Debian 12's ninja-build
1.11.1-2~deb12u1), then check every span is still found (tests/test_answer_units.py).
"""
import re
import sys
from pathlib import Path

from bs4 import BeautifulSoup, NavigableString, Tag

OUT = Path(__file__).resolve().parent.parent / "data" / "ninja" / "manual"
HEADINGS = ("h1", "h2", "h3")


def slug(title: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", title.lower()).strip("-")


def inline(node) -> str:
    """The text of an inline node, links written ``text (url)`` for external ones."""
    if isinstance(node, NavigableString):
        return str(node)
    if node.name == "a" and node.get("href", "").startswith("http"):
        text = "".join(inline(c) for c in node.children).strip()
        return f"{text} ({node['href']})" if text != node["href"] else text
    return "".join(inline(c) for c in node.children)


INLINE = ("a", "code", "span", "em", "strong", "literal", "tt", "b", "i", "sup", "sub")


def para(text: str) -> str:
    """A paragraph with the source's hard wrapping kept and continuation indents dropped."""
    return "\n".join(line.strip() for line in text.strip().splitlines() if line.strip())


def blocks(node, out: list[str]) -> None:
    """Append the Markdown blocks of ``node``'s own content (subsections excluded); runs of
    inline nodes (text, links, code) become one paragraph."""
    run: list[str] = []

    def flush():
        if "".join(run).strip():
            out.append(para("".join(run)))
        run.clear()

    for child in node.children:
        if isinstance(child, NavigableString) or (isinstance(child, Tag)
                                                   and child.name in INLINE):
            run.append(inline(child))
            continue
        flush()
        if not isinstance(child, Tag):
            continue
        cls = child.get("class") or []
        if "section" in cls or "titlepage" in cls or child.name in HEADINGS:
            continue
        if child.name == "p":
            out.append(para(inline(child)))
        elif child.name == "pre":
            out.append("```\n" + child.get_text().strip("\n") + "\n```")
        elif child.name == "li":
            items: list[str] = []
            blocks(child, items)
            out.append("- " + "\n  ".join("\n\n".join(items).splitlines()))
        elif child.name == "dt":
            out.append("**" + " ".join(inline(child).split()) + "**")
        elif child.name in ("ul", "ol", "dl"):
            items = []
            blocks(child, items)
            out.append("\n".join(items))
        else:
            blocks(child, out)
    flush()


def sections(html: str):
    """(title, chapter, markdown body) of every section in document order."""
    soup = BeautifulSoup(html, "html.parser")
    chapter = ""
    for div in soup.find_all("div", class_=["chapter", "section"]):
        head = div.find(HEADINGS)
        title = " ".join(head.get_text().split())
        if "chapter" in (div.get("class") or []):
            chapter = title
        out: list[str] = []
        blocks(div, out)
        body = "\n\n".join(b for b in out if b.strip())
        if body:
            yield title, chapter, body


def main(src: str) -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    for old in OUT.glob("*.md"):
        old.unlink()
    seen = set()
    for title, chapter, body in sections(Path(src).read_text(encoding="utf-8")):
        doc_id = slug(title)
        assert doc_id not in seen, doc_id
        seen.add(doc_id)
        text = (f"---\nid: {doc_id}\ntitle: {title}\nchapter: {chapter}\n---\n"
                f"# {title}\n\n{body}\n")
        (OUT / f"{doc_id}.md").write_text(text, encoding="utf-8")
    print(f"{len(seen)} sections -> {OUT}")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "/usr/share/doc/ninja-build/manual.html")
