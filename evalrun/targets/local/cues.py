"""Contradiction cues for the ``local`` judge: what an embedding cannot see.

"Penguins can fly" and "Penguins cannot fly" embed almost alike, and so do "Kyoto is the capital
of Japan" and "Tokyo is the capital of Japan". The judge therefore compares a claim with the
clause it aligns best with on a few rules (docs/local-judge.md, "How it decides"): negation on
one side only, a name of the claim replaced by another name the context uses, numbers, months
and units that disagree. Names are only compared within one language, because other languages
capitalise and spell them differently (German capitalises every noun).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

from evalrun.targets.local.text import STOPWORDS, split_statements, stem


def _set(words: str) -> frozenset[str]:
    return frozenset(words.split())


_LANGUAGE_WORDS = {
    "en": _set("the is are was were of and to in that with for by from has have it this which"),
    "de": _set("der die das ist sind war und mit von den dem des ein eine nicht auf für sie hat"),
    "es": _set("el la los las es son fue y de del en con por para una un que su está"),
    "fr": _set("le la les est sont été et de du des en avec pour une un que elle il au"),
    "it": _set("il lo la gli le è sono fu e di del della con per una un che nell sotto"),
    "pt": _set("o a os as é são foi e de do da em com por para uma um que atravessa"),
    "nl": _set("de het een is zijn was en van met voor op niet werd geen"),
}
_NEGATIONS = _set(
    """
    not no never cannot can't won't don't doesn't didn't isn't aren't wasn't weren't hasn't
    haven't hadn't couldn't shouldn't wouldn't mustn't neither nor none nobody nothing nowhere
    unable
    nicht kein keine keinen keinem keiner nie niemals
    nunca jamás ni ningún ninguna
    ne pas jamais aucun aucune
    non mai nessun nessuna
    não nem nenhum nenhuma
    niet geen nooit
    """
)
#: "no more than", "not only": a negation word that bounds or adds rather than denies.
_NOT_DENIAL = _set("more less fewer later earlier sooner longer only just")

#: Spelled-out figures ("one" is left out: "one of the founders" is not a count).
_SPELLED = "zero _ two three four five six seven eight nine ten eleven twelve thirteen fourteen"
_SPELLED += " fifteen sixteen seventeen eighteen nineteen twenty"
_WORD_NUMBERS = {w: float(i) for i, w in enumerate(_SPELLED.split()) if w != "_"} | {
    "thirty": 30.0,
    "forty": 40.0,
    "fifty": 50.0,
    "sixty": 60.0,
    "hundred": 100.0,
}
_MONTHS = {
    m: i
    for i, names in enumerate(
        (
            "january januar enero janvier gennaio janeiro januari",
            "february februar febrero février febbraio fevereiro februari",
            "march märz marzo mars março maart",
            "april abril avril aprile",
            "may mai mayo maggio maio mei",
            "june juni junio juin giugno junho",
            "july juli julio juillet luglio julho",
            "august agosto août augustus",
            "september septiembre septembre settembre setembro",
            "october oktober octubre octobre ottobre outubro",
            "november noviembre novembre novembro",
            "december dezember diciembre décembre dicembre dezembro",
        ),
        start=1,
    )
    for m in names.split()
}
_UNITS = {
    "m": "m metre metres meter meters metern metros mètres metri",
    "km": "km kilometre kilometres kilometer kilometers kilometern kilómetros kilomètres",
    "mi": "mi mile miles",
    "ft": "ft foot feet",
    "kg": "kg kilogram kilograms kilo kilos",
    "g": "g gram grams gramme grammes",
    "mg": "mg milligram milligrams",
    "kmh": "km/h kph",
    "mph": "mph",
    "c": "°c celsius",
    "f": "°f fahrenheit",
    "%": "% percent per cent prozent por ciento pour cent",
    "eur": "€ euro euros",
    "usd": "$ dollar dollars",
    "gbp": "£ pound pounds",
}
_UNIT_OF = {word: unit for unit, words in _UNITS.items() for word in words.split()}
_SEASONS = _set(
    "spring summer autumn winter frühling sommer herbst primavera verano otoño invierno"
)
_SCALE = _set("thousand million billion trillion millionen milliarden millones millions")

_TOKEN = re.compile(r"\d+(?:[.,:]\d+)*|km/h|°[cf]|[%€$£]|[^\W\d_]+(?:['’][^\W\d_]+)*", re.I)
_SPLIT_EN = re.compile(
    r"\s*;\s*|,\s+(?=(?:not|when|where|after|before|until)\b)|,?\s+(?:even though|although)\s+"
    r"|,\s+(?:but|though)\s+|,?\s+and\s+(?=(?:their|its|his|her|they|it|he|she)\s)",
    re.I,
)
_AND = {"de": "und", "es": "y", "fr": "et", "it": "e", "pt": "e", "nl": "en"}
_SPLIT_OTHER = {
    lang: re.compile(
        rf"\s*;\s*|,?\s+(?:aber|sondern|pero|mais|ma|mas|maar)\s+|\s+{word}\s+(?=\w+\s+\w)",
        re.I,
    )
    for lang, word in _AND.items()
}
_ACRONYM = re.compile(r"^[A-Z]{2,5}$")


def language(text: str) -> str:
    """The language whose common words the text uses most ("en" when none stands out)."""
    words = [w.lower() for w in re.findall(r"[^\W\d_]+", text)]
    scores = {lang: sum(w in common for w in words) for lang, common in _LANGUAGE_WORDS.items()}
    best = max(scores, key=lambda lang: scores[lang])
    return best if scores[best] > scores["en"] else "en"


def clauses(sentence: str) -> list[str]:
    """A sentence's clauses for alignment: coordinated clauses with their subject restored
    (English), cut again at semicolons, "..., not X", "..., when" and contrastive conjunctions."""
    lang = language(sentence)
    english = lang == "en"
    parts = (split_statements(sentence) or [sentence]) if english else [sentence]
    cut = _SPLIT_EN if english else _SPLIT_OTHER[lang]
    out: list[str] = []
    for part in parts:
        out += [p.strip(" ,.") for p in cut.split(part) if re.search(r"\w", p)]
    return out


@dataclass(frozen=True)
class Facts:
    """What the cues compare: negations, names, numbers with their units, months."""

    language: str
    negations: int
    names: frozenset[str]
    stems: frozenset[str]
    numbers: tuple[tuple[frozenset[float], str | None], ...]
    months: frozenset[int]
    seasons: frozenset[str]
    capitals: tuple[str, ...]
    hedged: bool


@lru_cache(maxsize=8192)
def facts(text: str) -> Facts:
    """Cached: a retrieval context is read once per statement of the expected answer."""
    tokens = _TOKEN.findall(text)
    lowered = [t.lower() for t in tokens]
    lower_seen = {t for t in tokens if t.islower()}
    names: set[str] = set()
    stems: set[str] = set()
    numbers: list[tuple[frozenset[float], str | None]] = []
    negations = 0
    for i, (token, low) in enumerate(zip(tokens, lowered, strict=True)):
        after = lowered[i + 1] if i + 1 < len(lowered) else ""
        if low in _NEGATIONS and after not in _NOT_DENIAL and not after.endswith("ing"):
            negations += 1
        if low.endswith("n't") and low not in _NEGATIONS:
            negations += 1
        values = _values(token) if token[0].isdigit() else _word_number(low)
        if values:
            numbers.append((values, _unit_after(lowered, i)))
            continue
        if low in STOPWORDS or not token[0].isalpha():
            continue
        stems.add(stem(token))
        if token[0].isupper() and low not in _MONTHS and (i > 0 or low not in lower_seen):
            names.add(stem(token))
    hedged = bool(set(lowered) & _HEDGES)
    months = frozenset(_MONTHS[w] for w in lowered if w in _MONTHS and w != "may")
    seasons = frozenset(w for w in lowered if w in _SEASONS)
    capitals = tuple(t for t in tokens if t[:1].isupper())
    return Facts(
        language(text),
        negations,
        frozenset(names),
        frozenset(stems),
        tuple(numbers),
        months,
        seasons,
        capitals,
        hedged,
    )


_HEDGES = _set("about around roughly nearly almost approximately some circa rund etwa unos cerca")


@dataclass(frozen=True)
class Cues:
    """How a claim disagrees with one clause; ``reason`` names the first hard cue, if any."""

    negation: bool = False
    swap: str | None = None
    """The claim's name the clause replaces with another, when the context names it elsewhere."""
    other_name: bool = False
    """The clause names someone or somewhere else and lacks a name of the claim (alias or swap)."""
    number: bool = False
    unit: bool = False
    cross_lingual: bool = False
    numbers_found: bool = False
    """The claim has figures and the clause's sentence has every one: evidence for support."""

    @property
    def reason(self) -> str | None:
        if self.negation:
            return "negated on one side only"
        if self.swap:
            return f"names another entity where the statement has '{self.swap}'"
        if self.number:
            return "a number or date disagrees"
        if self.unit:
            return "the same number with another unit"
        return None


def compare(claim: Facts, clause: Facts, sentence: Facts, context: Facts) -> Cues:
    """The cues of ``claim`` against one ``clause``. Figures and dates are compared with the
    clause's whole ``sentence`` (a date may sit in another clause); ``context`` is all passages.
    A swap needs the claim's name to be a name elsewhere in the context ("Lyon" is the
    third-largest city) and about as many names in its place; otherwise the clause may be using
    an alias ("the Big Apple"), which only lowers the probability (``other_name``)."""
    cross = claim.language != clause.language
    negation = claim.negations % 2 != clause.negations % 2
    swap: str | None = None
    other = False
    if not cross:
        order = [stem(c) for c in claim.capitals]
        names = sorted(claim.names, key=lambda n: order.index(n) if n in order else len(order))
        missing = [n for n in names if not _named(n, claim, clause)]
        extra = [n for n in clause.names if not _named(n, clause, claim)]
        if missing and extra:
            elsewhere = [n for n in missing if n in context.names]
            if elsewhere and len(extra) <= 2 * len(missing) + 1:
                swap = elsewhere[0]
            other = swap is None
    number, unit = _numbers_disagree(claim, sentence)
    dates = any(
        bool(mine) and bool(theirs) and not mine & theirs
        for mine, theirs in ((claim.months, sentence.months), (claim.seasons, clause.seasons))
    )
    found = bool(claim.numbers) and all(
        any(_same(values, v, claim.hedged) for v, _ in sentence.numbers)
        for values, _ in claim.numbers
    )
    return Cues(negation, swap, other, number or dates, unit, cross, found)


def _named(name: str, side: Facts, other: Facts) -> bool:
    """Is ``name`` (a stem of ``side``) in ``other``: as a word, or through an acronym
    ("EU" for "European Union", "JFK" for "John F. Kennedy"), either way round?"""
    if name in other.stems:
        return True
    caps = side.capitals
    acronyms = [a for a in other.capitals if _ACRONYM.match(a)]
    for i, word in enumerate(caps):
        if stem(word) != name:
            continue
        if _ACRONYM.match(word) and word in "".join(c[0] for c in other.capitals):
            return True
        for acronym in acronyms:
            for start in range(max(0, i - len(acronym) + 1), i + 1):
                if "".join(w[0] for w in caps[start : start + len(acronym)]) == acronym:
                    return True
    return False


def _numbers_disagree(claim: Facts, clause: Facts) -> tuple[bool, bool]:
    clause_values = [values for values, _ in clause.numbers]
    number = unit = False
    for values, claim_unit in claim.numbers:
        match = [u for v, u in clause.numbers if _same(values, v, claim.hedged)]
        if not match:
            if any(not any(_same(v, c, False) for c, _ in claim.numbers) for v in clause_values):
                number = True
        elif claim_unit and all(u and u != claim_unit for u in match):
            unit = True
    return number, unit


def _same(left: frozenset[float], right: frozenset[float], hedged: bool) -> bool:
    if left & right:
        return True
    if not hedged:
        return False
    return any(a and a % 100 == 0 and abs(a - b) <= 0.03 * abs(a) for a in left for b in right)


def _values(token: str) -> frozenset[float]:
    """Every reading of a figure: "2.962" is 2962 in German and 2.962 in English."""
    readings: set[float] = set()
    if ":" in token:
        hours, _, minutes = token.partition(":")
        return frozenset({float(hours) * 60 + float(minutes.split(":")[0] or 0)})
    if re.fullmatch(r"\d{1,3}(?:[.,]\d{3})+", token):
        readings.add(float(re.sub(r"[.,]", "", token)))
    if token.count(".") + token.count(",") == 1:
        readings.add(float(token.replace(",", ".")))
    if not readings and re.fullmatch(r"\d+", token):
        readings.add(float(token))
    return frozenset(readings)


def _word_number(word: str) -> frozenset[float]:
    value = _WORD_NUMBERS.get(word)
    return frozenset() if value is None else frozenset({value})


def _unit_after(lowered: list[str], index: int) -> str | None:
    """The unit within the two words after a number ("4.2 billion euros", "120 km/h")."""
    for word in lowered[index + 1 : index + 4]:
        if word in _SCALE:
            continue
        if word == "km" and index + 3 < len(lowered) and lowered[index + 2] in ("per", "an"):
            return "kmh"
        if word in ("kilometres", "kilometers") and "per" in lowered[index + 2 : index + 3]:
            return "kmh"
        if word in ("miles",) and "per" in lowered[index + 2 : index + 3]:
            return "mph"
        if word in ("degrees", "grad", "grados", "degrés"):
            continue
        return _UNIT_OF.get(word)
    return None
