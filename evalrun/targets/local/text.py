"""Text handling for the ``local`` judge: sentences, atomic statements, lexical evidence.

Everything here is rule-based (no model): the judge needs statements without an LLM, and
embeddings alone cannot tell "released in 1991" from "released in 1989", so decisions also look
at which content words, numbers and names of a claim a passage actually contains.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass


def _set(words: str) -> frozenset[str]:
    return frozenset(words.split())


_ABBREVIATIONS = {
    "e.g", "i.e", "etc", "vs", "mr", "mrs", "ms", "dr", "prof", "st", "jr", "sr", "inc", "ltd",
    "co", "corp", "no", "fig", "approx", "ca", "cf", "al", "gen", "gov", "sen", "rep", "mt",
    "u.s", "u.k", "a.d", "b.c", "jan", "feb", "mar", "apr", "jun", "jul", "aug", "sep", "sept",
    "oct", "nov", "dec",
}  # fmt: skip

_SENTENCE_END = re.compile(r"(?<=[.!?])[\"')\]]*\s+(?=[\"'(\[]?[A-Z0-9À-Þ¿¡])")
_BULLET = re.compile(r"^\s*(?:[-*•]|\d+[.)])\s+")

STOPWORDS = _set(
    """
    a an the and or but nor so yet of in on at to for from by with without about as into onto
    over under between through during before after above below up down out off than then there
    here this that these those it its it's itself he him his she her hers they them their theirs
    we us our you your i me my is are was were be been being am do does did doing has have had
    having can could will would shall should may might must not no yes very also just only too
    what which who whom whose when where why how whether if while whereas because since until
    although though all any both each few more most other some such same own s t don't doesn't
    isn't aren't wasn't weren't roughly approximately around nearly almost about some many much
    several typically usually generally often technically mainly mostly largely one two three
    four five six seven eight nine ten
    """
)

_AUX = _set(
    """
    is are was were be been being am has have had does do did can could will would shall should
    may might must
    """
)
_BE_HAVE = _set("is are was were be been am has have had")
_IRREGULAR = _set(
    """
    built made written wrote born known found became become began begun grew grown led won held
    kept left lost met paid ran said sold sent shown spent stood taught told thought took taken
    brought bought caught chose chosen came drove fell felt fought flew gave given got gotten
    went gone hid hung knew laid meant rose risen saw seen shot sang sat slept spoke spoken
    stole struck swam threw thrown wore worn drew drawn ate eaten dug sank sunk broke broken
    froze frozen forgot forgotten sprang spun stuck swore sworn woke woken wound dealt lent bent
    bound fed fled sought sped
    """
)
_BASE_VERBS = _set(
    """
    live lives make makes use uses run runs contain contains include includes produce produces
    provide provides collect collects store stores help helps play plays become becomes grow
    grows cause causes carry carries form forms create creates need needs eat eats hold holds
    lie lies sit sits stand stands flow flows cover covers reach reaches remain remains consist
    consists allow allows let lets support supports require requires offer offers give gives
    take takes keep keeps serve serves build builds work works lead leads mean means represent
    represents measure measures describe describes belong belongs rise rises spans span
    stretches stretch
    """
)
_ADVERBS = _set(
    """
    first later also then subsequently eventually originally still now often mainly widely
    primarily officially not never recently initially finally soon once again largely mostly
    partly usually sometimes always already only just formally famously currently generally
    typically briefly successfully
    """
)
_NOT_ED_VERBS = _set(
    """
    red bed need seed speed feed hundred united indeed naked wicked sacred kindred shed bred
    deed reed weed heed greed breed steed tweed
    """
)
_NOUN_CONTEXT = _set(
    """
    a an the this that these those its his her their our your my of in on at to for from by with
    as into over under between through about per each every many several some no and or
    """
)
#: Past forms that are active, not passive, after "was born in X, moved to Y".
_INTRANSITIVE = _set(
    """
    moved died lived worked studied returned emigrated retired graduated arrived travelled
    traveled stayed remained went came appeared occurred happened competed resigned fled settled
    """
)
_RELATIVE = _set("which who whom whose that where when")
_PRONOUNS = _set("it he she they")
_POSSESSIVES = _set("its his her their")
_COORDINATION = re.compile(
    r"\s*(;|,\s+(?:and|but|while|whereas|yet)\b|\b(?:and|but|while|whereas)\b|,(?=\s))\s*"
)

_WORD = re.compile(r"[^\W_]+(?:[.,'’][^\W_]+)*")
_TOKEN = re.compile(r"[-−]?\d+(?:[.,]\d+)*|[^\W_]+(?:['’.][^\W_]+)*|[.!?:;]")
_HEDGES = _set("about around roughly nearly almost approximately over some approx circa under")
_NUMBER = re.compile(r"[-−]?\d+(?:[.,]\d+)*")


def sentences(text: str) -> list[str]:
    """Split prose (and bullet lists) into sentences, keeping abbreviations and decimals whole."""
    out: list[str] = []
    for line in text.splitlines():
        line = _BULLET.sub("", line).strip()
        if not line:
            continue
        start = 0
        for match in _SENTENCE_END.finditer(line):
            before = line[start : match.start()].rstrip("\"')]")
            last = before.rsplit(None, 1)[-1] if before.split() else ""
            word = last.rstrip(".").lower()
            if word in _ABBREVIATIONS or (len(word) == 1 and word.isalpha()):
                continue
            out.append(line[start : match.start()].strip())
            start = match.end()
        tail = line[start:].strip()
        if tail:
            out.append(tail)
    return [s for s in out if _WORD.search(s)]


def split_statements(text: str) -> list[str]:
    """Atomic statements: sentences, then coordinated clauses with the shared subject restored.

    "X was created by A and first released in 1991." -> ["X was created by A",
    "X was first released in 1991"]. Noun coordination ("Nepal and Tibet") is left alone, and a
    clause opening with he/she/it/they gets the subject it stands for.
    """
    statements: list[str] = []
    subject: list[str] = []
    for sentence in sentences(text):
        for words in _split_clauses(sentence.rstrip(" .!?")):
            opens_with_pronoun = words[0].lower() in _PRONOUNS
            if opens_with_pronoun and subject and _main_verb(words) == 1 + _skip_adverbs(words[1:]):
                words = subject + words[1:]
            own = _subject(words)
            if own and own[0].lower() not in _PRONOUNS:
                subject = own
            statement = _tidy(" ".join(words))
            if len(_WORD.findall(statement)) >= 2 and statement not in statements:
                statements.append(statement)
    return statements


def resolve_pronouns(passages: Sequence[str]) -> list[list[str]]:
    """Each passage's sentences, with an opening he/she/it/they (or its/his/her/their) replaced
    by the subject of the sentence before it, which may end the previous passage.

    Retrieved chunks often continue one document ("It was completed in 1889."), and without the
    subject neither the embedding nor the word overlap can tell what the sentence is about.
    """
    resolved: list[list[str]] = []
    subject: list[str] = []
    for passage in passages:
        out: list[str] = []
        for sentence in sentences(passage):
            words = sentence.split()
            opening = words[0].lower()
            if subject and opening in _PRONOUNS and _main_verb(words) is not None:
                sentence = " ".join(subject + words[1:])
            elif subject and opening in _POSSESSIVES:
                sentence = " ".join([*subject[:-1], subject[-1] + "'s", *words[1:]])
            own = _subject(sentence.split())
            if own and own[0].lower() not in _PRONOUNS | _POSSESSIVES:
                subject = own
            out.append(sentence)
        resolved.append(out)
    return resolved


@dataclass(frozen=True)
class Lexical:
    """The content stems, numbers and names of a text, for overlap checks."""

    stems: frozenset[str]
    numbers: frozenset[float]
    names: frozenset[str]
    hedged: bool = False
    words: tuple[str, ...] = ()
    """Surface forms of the content words, one per stem, for word-level embedding checks."""


def lexical(text: str) -> Lexical:
    stems: set[str] = set()
    names: set[str] = set()
    numbers: set[float] = set()
    surface: dict[str, str] = {}
    opening = True
    for match in _TOKEN.finditer(text):
        token = match.group()
        if token in ".!?:;":
            opening = True
            continue
        if _NUMBER.fullmatch(token):
            value = _number(token)
            if value is not None:
                numbers.add(value)
        elif token.lower() not in STOPWORDS:
            stems.add(stem(token))
            surface.setdefault(stem(token), token)
            internal_caps = any(c.isupper() for c in token[1:]) or any(c.isdigit() for c in token)
            if token[:1].isupper() and (not opening or internal_caps):
                names.add(stem(token))
        opening = False
    words = {w.lower() for w in _WORD.findall(text)}
    return Lexical(
        frozenset(stems),
        frozenset(numbers),
        frozenset(names),
        bool(words & _HEDGES),
        tuple(surface.values()),
    )


def coverage(claim: Lexical, source: Lexical) -> tuple[float, float, float]:
    """Share of the claim's content stems and numbers found in the source, and conflict.

    Conflict is 1 when the claim puts a number or name where the source has a different one
    ("born in Paris" against "born in Warsaw"), the typical same-topic wrong fact.
    """
    numbers = [n for n in claim.numbers if _number_in(n, source.numbers, claim.hedged)]
    missing_numbers = len(numbers) < len(claim.numbers)
    extra_numbers = any(not _number_in(n, claim.numbers, False) for n in source.numbers)
    missing_names = bool(claim.names - source.names - source.stems)
    extra_names = bool(source.names - claim.names - claim.stems)
    conflict = (missing_numbers and extra_numbers) or (missing_names and extra_names)
    return (
        _share(claim.stems, source.stems),
        len(numbers) / len(claim.numbers) if claim.numbers else 1.0,
        float(conflict),
    )


def stem(word: str) -> str:
    """A crude, language-agnostic stem: enough to match created/creates/creator."""
    w = word.lower().replace("’", "'")
    if w.endswith("'s"):
        w = w[:-2]
    for suffix, keep in (("ies", 4), ("ing", 5), ("ed", 4), ("es", 4), ("ly", 5), ("s", 3)):
        if w.endswith(suffix) and len(w) > keep and not w.endswith("ss"):
            w = w[: -len(suffix)] + ("y" if suffix == "ies" else "")
            break
    return w[:6]


def _number(text: str) -> float | None:
    text = text.replace("−", "-")
    if re.fullmatch(r"-?\d{1,3}(?:,\d{3})+(?:\.\d+)?", text):
        text = text.replace(",", "")
    try:
        return float(text.replace(",", "."))
    except ValueError:
        return None


def _number_in(value: float, pool: frozenset[float], hedged: bool) -> bool:
    """Exact match, or within 3% when the claim hedges a round figure ("nearly 11,000")."""
    if value in pool:
        return True
    if not hedged or value == 0 or value % 100:
        return False
    return any(abs(value - other) <= 0.03 * abs(value) for other in pool)


def _share(part: frozenset[str], whole: frozenset[str]) -> float:
    return 1.0 if not part else len(part & whole) / len(part)


def _tidy(text: str) -> str:
    text = re.sub(r"\s+([,;:])", r"\1", text).strip(" ,;:")
    return text[:1].upper() + text[1:] if text else text


def _split_clauses(sentence: str) -> list[list[str]]:
    """Cut at coordinators when the right side is a predicate or a clause of its own."""
    pieces = _COORDINATION.split(sentence)
    segments = [pieces[0].split()]
    joiners = pieces[1::2]
    for joiner, piece in zip(joiners, pieces[2::2], strict=True):
        segments.append([joiner.strip(), *piece.split()])

    clauses: list[list[str]] = [segments[0]]
    for segment in segments[1:]:
        joiner, right = segment[0], segment[1:]
        left = clauses[-1]
        built = _coordinate(clauses[0], left, right) if right else None
        if built is None:
            glue = [joiner + ","] if joiner == "," else ([joiner] if joiner != ";" else [";"])
            if joiner in {",", ";"} and left:
                left[-1] = left[-1] + joiner
                glue = []
            clauses[-1] = left + glue + right
        else:
            clauses.append(built)
    return [c for c in clauses if c]


def _coordinate(first: list[str], left: list[str], right: list[str]) -> list[str] | None:
    """The right conjunct as a statement, or None when it is neither a clause nor a predicate."""
    verb_left = _main_verb(left)
    if verb_left is None:
        return None
    start = _skip_adverbs(right)
    if start >= len(right):
        return None
    verb_right = _main_verb(right)
    if verb_right is not None and verb_right > start and _looks_like_subject(right[:verb_right]):
        return right
    subject = _subject(first) or _subject(left)
    if not subject:
        return None
    head = right[start].strip(",").lower()
    left_verb = left[verb_left].strip(",").lower()
    after_left_verb = left[verb_left + 1 + _skip_adverbs(left[verb_left + 1 :]) :]
    passive = left_verb in _BE_HAVE and bool(after_left_verb) and _is_participle(after_left_verb[0])
    if head in _AUX:
        return subject + right
    if _is_participle(head):
        if left_verb in _AUX and not (passive and head in _INTRANSITIVE):
            return subject + [left[verb_left].strip(",")] + right
        return subject + right
    if head in _BASE_VERBS or (
        head.endswith("s") and left_verb.endswith("s") and left_verb not in _AUX
    ):
        return subject + right
    return None


def subject_of(sentence: str) -> list[str]:
    """The words before the sentence's main verb ("The Berlin Wall" in "The Berlin Wall fell")."""
    return _subject(sentence.split())


def predicate_of(statement: str) -> str:
    """The statement without its subject ("was built over centuries"), or all of it.

    The subject dominates a sentence embedding; the predicate carries the fact being checked.
    """
    words = statement.rstrip(" .!?").split()
    subject = _subject(words)
    if subject and len(words) - len(subject) >= 2:
        return " ".join(words[len(subject) :])
    return statement


def _subject(words: list[str]) -> list[str]:
    verb = _main_verb(words)
    if not verb:
        return []
    return [w.rstrip(",") for w in words[:verb]]


def _main_verb(words: list[str]) -> int | None:
    """Index of the first verb outside a ", which ..." aside; None if the words hold no verb."""
    aside = False
    for i, word in enumerate(words):
        bare = word.strip(",;:()\"'").lower()
        if bare in _RELATIVE and i > 0 and words[i - 1].endswith(","):
            aside = True
            continue
        if aside:
            if word.endswith(","):
                aside = False
            continue
        if i == 0 and bare not in _AUX:
            continue
        previous = words[i - 1].strip(",").lower() if i else ""
        if bare in _AUX or bare in _IRREGULAR and previous not in _NOUN_CONTEXT:
            return i
        if word[:1].isupper():
            continue
        if _is_participle(bare) and previous not in _NOUN_CONTEXT:
            return i
        if _is_finite(bare) and previous not in _NOUN_CONTEXT and previous not in _ADVERBS - {
            "also", "often", "still", "usually", "sometimes", "always", "mainly", "mostly", "now",
            "typically", "generally", "only", "first", "later", "then", "never",
        }:  # fmt: skip
            return i
    return None


def _looks_like_subject(words: list[str]) -> bool:
    if not words or words[-1].endswith(","):
        return False
    first = words[0].lower()
    return (
        first in _PRONOUNS
        or first in {"the", "a", "an", "its", "his", "her", "their"}
        or (words[0][:1].isupper() and len(words) <= 4)
    )


def _skip_adverbs(words: list[str]) -> int:
    i = 0
    while i < len(words) and words[i].strip(",").lower() in _ADVERBS:
        i += 1
    return i


def _is_participle(word: str) -> bool:
    word = word.lower()
    if word in _IRREGULAR:
        return True
    return len(word) >= 4 and word.endswith("ed") and word not in _NOT_ED_VERBS and word.isalpha()


def _is_finite(word: str) -> bool:
    return word.lower() in _BASE_VERBS or _is_participle(word) or word.lower() in _AUX
