"""The local judge's contradiction cues (evalrun/targets/local/cues.py): rules only, no model."""

from __future__ import annotations

import pytest

from evalrun.targets.local.cues import Cues, clauses, compare, facts, language


def cues(claim: str, clause: str, context: str | None = None, sentence: str | None = None) -> Cues:
    return compare(facts(claim), facts(clause), facts(sentence or clause), facts(context or clause))


@pytest.mark.parametrize(
    ("text", "lang"),
    [
        ("Die Zugspitze ist der höchste Berg Deutschlands.", "de"),
        ("La Sagrada Familia fue diseñada por Antoni Gaudí.", "es"),
        ("La tour Eiffel a été achevée en 1889.", "fr"),
        ("De Afsluitdijk werd in 1932 voltooid.", "nl"),
        ("The Zugspitze is the highest mountain in Germany.", "en"),
        ("Revenue rose 12% in 2023.", "en"),
    ],
)
def test_language_of_short_texts(text: str, lang: str) -> None:
    assert language(text) == lang


def test_clauses_cut_where_a_second_fact_begins() -> None:
    assert clauses("Penguins are birds that cannot fly, but they are strong swimmers.") == [
        "Penguins are birds that cannot fly",
        "Penguins are strong swimmers",
    ]
    assert clauses("Bats are mammals, not birds, even though many of them fly.")[:2] == [
        "Bats are mammals",
        "not birds",
    ]
    assert clauses("Pinguine können nicht fliegen, aber sie schwimmen sehr gut.") == [
        "Pinguine können nicht fliegen",
        "sie schwimmen sehr gut",
    ]
    assert len(clauses("Microsoft was founded by Bill Gates and Paul Allen in 1975.")) == 1


def test_negation_on_one_side_only() -> None:
    assert cues("Penguins can fly.", "Penguins are birds that cannot fly").negation
    assert cues("Penguins can fly.", "Pinguine können nicht fliegen").negation
    assert not cues("Penguins are unable to fly.", "Penguins cannot fly").negation
    assert not cues("The daily maximum is 4 grams.", "No more than 4 grams a day").negation
    assert not cues("Sleep loss weakens immunity.", "Not sleeping enough weakens immunity").negation


def test_a_name_swapped_for_one_the_context_uses_elsewhere() -> None:
    context = "Lyon is France's third-largest city, while Paris serves as the national capital."
    swapped = cues(
        "Lyon is the capital of France.", "Paris serves as the national capital", context
    )
    assert swapped.swap == "lyon" and swapped.reason and "lyon" in swapped.reason
    alone = cues("Kyoto is the capital of Japan.", "Tokyo is the capital of Japan.")
    assert alone.swap is None and alone.other_name and alone.reason is None


def test_acronyms_and_other_languages_are_not_swaps() -> None:
    jfk = cues("John F. Kennedy was killed in Dallas.", "JFK was assassinated in Dallas.")
    assert not jfk.other_name and jfk.swap is None
    german = cues("Berlin is the capital of Germany.", "Berlin ist die Hauptstadt Deutschlands.")
    assert german.cross_lingual and german.swap is None and not german.other_name


def test_numbers_dates_and_units_must_agree() -> None:
    assert cues("The Titanic sank in 1915.", "The Titanic sank on 15 April 1912.").number
    assert not cues("The Titanic sank in April 1912.", "The Titanic sank on 15 April 1912.").number
    assert cues("It was adopted in August 1776.", "It was adopted on 4 July 1776.").number
    assert cues("A marathon is 42.195 miles.", "The marathon is 42.195 kilometres.").unit
    assert cues("The limit is 50 mph.", "In towns it drops to 50 km/h.").unit
    assert not cues("The limit is 120 kilometres per hour.", "The limit is 120 km/h.").unit
    assert cues("Apple trees flower in autumn.", "Apple trees flower in spring").number


def test_figures_are_read_in_every_locale_and_in_words() -> None:
    german = cues("The Zugspitze is 2,962 metres tall.", "Die Zugspitze ist 2.962 Meter hoch.")
    assert not german.number and not german.unit and german.numbers_found
    assert cues("The Zugspitze is 3,962 metres tall.", "Die Zugspitze ist 2.962 Meter hoch.").number
    assert cues("Teams have nine players.", "Each team has eleven players.").number
    assert not cues("Water freezes at 0 °C.", "Water freezes at zero degrees Celsius.").unit


def test_the_date_may_sit_in_another_clause_of_the_sentence() -> None:
    sentence = "The physician who discovered penicillin, Alexander Fleming, noticed it in 1928."
    found = cues("Fleming discovered penicillin in 1938.", "Alexander Fleming", sentence=sentence)
    assert found.number
