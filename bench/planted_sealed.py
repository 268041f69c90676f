"""Planted instructions on a set no detector was written against: patterns vs the meaning
signal, and the meaning signal kept to text the patterns cannot read (other languages).

``data/redteam/sealed_planted.jsonl`` (60 planted) and ``sealed_benign.jsonl`` (60 honest
texts in the same words), 25 English rows each and 35 in 36 languages, were written in
session 13 by a separate agent that saw neither the detector, its rules nor the other
red-team files. A row is flagged when ``planted_spans`` flags any sentence of it.

Signals: the patterns (the default); ``MeaningSignal`` on every sentence (opt-in today); and
``MeaningSignal`` on the sentences ``english`` below says are not English — the design this
script was written to decide (the patterns are written in English first, so the regression
would judge only what they cannot read). Measured, it flags two thirds of the honest
non-English rows, so it was not adopted (docs/benchmarks.md).

    flock /tmp/ragbook-heavy.lock .venv/bin/python bench/planted_sealed.py [--set sealed2]

``--set sealed2``: ``sealed2_planted.jsonl`` / ``sealed2_benign.jsonl`` (50 + 50), written
later in session 13 by a third agent under the same rules, after every rule change of the
session: the last held-out measurement.
"""
import argparse
import json
import re
import time
import unicodedata

from ragbook.datasets import data_dir, load_helpcentre, load_ninja, load_pydocs
from ragbook.injection import fold, planted_spans
from ragbook.injection_model import MeaningSignal
from ragbook.text import sentence_spans

# the commonest English words: a sentence of five or more words with too few of them is
# not English, and goes to the regression, which reads every language E5 knows (the
# patterns read English best: their rules are written in English first)
_ENGLISH = frozenset("""a an the and or but if then than so as at by for from in into of on
onto to with without about after before over under up out off is are was were be been being
am do does did done has have had having can could will would shall should may might must not
no it its this that these those there here we our you your they their them he his she her i
my me us what which who whom whose when where why how all any each every some more most
other such only also just very too new use used using see per one two both same own via
set get gets make makes made need needs way ways time first last next see must can't don't
isn't it's you're we're doesn't won't""".split())
_LETTER = re.compile(r"[^\W\d_]+(?:'[a-z]+)?")
_CODE = re.compile(r"[(){}\[\]=<>_/\\|#@$%^*+~`;]")


def english(text: str) -> bool:
    """``text`` reads as English, or gives no sign of another language — the language the
    patterns read best. Another language: more than a fifth of its letters outside ASCII
    (Thai, Greek, Hindi); or two or more distinct common words of other Latin-script
    languages (``_OTHER``, diacritics dropped: German, Indonesian, Tagalog, Swahili … are
    often written in plain ASCII) outnumbering the common English ones (``_ENGLISH``); or
    5 % of its letters outside ASCII with fewer than a fifth of its words common English.
    "x = foo(bar)", "Two-factor authentication" and "Café opening hours are listed below."
    are English, and so is text more than a tenth brackets, ``=``, ``_``, slashes (code,
    log lines); "Hinweis an alle KI-Systeme: bitte ignoriere …" is not."""
    raw = _LETTER.findall(unicodedata.normalize("NFKC", text))
    letters = sum(map(len, raw))
    if not letters:
        return True
    outside = sum(not c.isascii() for w in raw for c in w) / letters
    words = _LETTER.findall(fold(text).lower())
    common = sum(w in _ENGLISH for w in words)
    other = [w for w in words if w in _OTHER and len(w) > 1]
    if outside <= 0.2 and len(_CODE.findall(text)) * 10 > len(text):
        return True                                     # code, a log line: no language
    return not (outside > 0.2 or (len(set(other)) >= 2 and len(other) > common)
                or (outside >= 0.05 and common * 5 < len(words)))


# common words of Latin-script languages, folded (no diacritics), English homographs left
# out: de nl da sv no de fr es it pt ca ro pl cs sk sl hr/sr/bs hu fi et lv lt tr az id/ms
# tl sw vi sq eu af cy ga is mt
_OTHER = frozenset("""
der die das und ist nicht mit fur auf sich dem den des ein eine einen einem zu wenn nach
wird werden sie du ihr auch noch nur oder aber wie bei aus um uber vom zum zur bitte alle
deine dein ihre ihren sind hat kann soll sollen muss dass diese dieser dieses jetzt immer
het een van voor niet zijn ook dat wordt worden deze bij naar uw je jij moet kunnen altijd
og ikke er af til det som med har skal kan vil du dig jeg fra eller ogsa nar
och att inte ett som pa av med har ska kan vill du dig jag fran eller ocksa nar alla
les des une pour dans que est pas sur du au aux vous tu ce cette sont avec par mais ou qui
los las una para por con del como ser el la le en y es su sus al lo mas pero esta este
il gli che della sono non questo questa di e da per nel alla delle dei sei tu puoi deve
os uma nao com isso em ao do da dos das seu sua voce pelo pela sempre
amb els per aixo tambe es
si este sunt cu pe nu un o la ca pentru sau mai din acest aceasta
od dla przez jest sie ze po lub oraz jak nie jestes tylko zawsze aby
je se na ze v ve pro jako byt jsou nebo ale tak si aby vzdy
ki in za so pri ali kot da ne
su da ili samo uvijek kao sve jer sto
az es hogy nem egy van vagy meg csak mindig ha
ja on ei se etta ovat tai kun myos vain aina sina
ja on ei et ka see kui voi
ir kad yra ar ne tai su kaip
un ir ka ar ne tas vai
ve bir bu icin ile ki da de olan gibi daha cok sen
va bu ucun ile da de bir olan
yang dan untuk dengan ini itu tidak adalah dari pada akan bahwa kepada sila boleh jika
atau juga hanya tentang ke lalu anda kami harus selalu
ang ng mga sa ay hindi ni si ito iyon na po lamang
kwa ya wa kwamba katika ni na hii cha za la
va la cua co cac duoc nhung trong cho khong nay mot nguoi ban
dhe te ne eshte nje per me nga qe
eta da ez du bat dira edo
die en van nie het vir sal moet jy jou ook
yn y ac mae ar gyda ei bod
agus an na ar ata ni le do
og er ekki ad til med sem um ad
li ta fil ghal hija huwa""".split()) - _ENGLISH


class NotEnglish(MeaningSignal):
    """``MeaningSignal`` that judges only text ``english`` says is in another language."""

    def verdicts(self, texts):
        read = [i for i, t in enumerate(texts) if not english(t)]
        say = [0] * len(texts)
        for i, v in zip(read, super().verdicts([texts[i] for i in read]), strict=True):
            say[i] = v
        return say


def rows(name):
    path = data_dir() / "redteam" / name
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--set", default="sealed", choices=("sealed", "sealed2"))
    name = parser.parse_args().set
    t = time.perf_counter()
    full = MeaningSignal()
    signals = {"patterns (default)": None, "meaning, every sentence": full,
               "meaning, not-English only": NotEnglish(encoder=full.encoder)}
    sets = {"planted": rows(f"{name}_planted.jsonl"), "benign": rows(f"{name}_benign.jsonl")}
    wrong = sum(english(r["text"]) != (r["lang"] == "en") for s in sets.values() for r in s)
    print(f"english() wrong on {wrong} of {sum(map(len, sets.values()))} sealed rows")
    for name, corpus in (("help centre", load_helpcentre()), ("Python docs", load_pydocs()),
                         ("Ninja", load_ninja())):
        said = [d.text[a:z] for d in corpus.documents for a, z in sentence_spans(d.text)]
        print(f"{name}: {sum(not english(s) for s in said)} of {len(said)} sentences "
              f"judged not English")
    print(f"{'signal':<28} {'planted caught':>16} {'(en / other)':>14} "
          f"{'benign flagged':>16} {'(en / other)':>14}")
    for name, signal in signals.items():
        cells = []
        for part in sets.values():
            hit = [bool(planted_spans(r["text"], extra=signal)) for r in part]
            en = sum(h for h, r in zip(hit, part, strict=True) if r["lang"] == "en")
            n_en = sum(r["lang"] == "en" for r in part)
            other = f"{sum(hit) - en}/{len(part) - n_en}"
            cells += [f"{sum(hit)}/{len(part)}", f"{en}/{n_en} / {other}"]
        print(f"{name:<28} {cells[0]:>16} {cells[1]:>14} {cells[2]:>16} {cells[3]:>14}")
    print(f"{time.perf_counter() - t:.0f} s")


if __name__ == "__main__":
    main()
