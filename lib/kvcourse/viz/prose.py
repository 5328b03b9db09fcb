"""The small words a page glues into its prose, in English and in Chinese.

A page computes its numbers and glues them into sentences; some of those values are phrases
rather than numbers: the physical blocks a block table lists (``1, 4 and 7``), the block counts a
sliding window keeps (``65 or 66``), a range of copy-on-write counts (``2 to 8``). The Chinese
edition re-uses the English execution, so a page glues each such phrase twice, as ``key`` for the
English prose and as ``key_zh`` for the Chinese catalog, both from the same values and from the
functions here:

>>> listed([1, 4, 7]), listed([1, 4, 7], "zh")
('1, 4 and 7', '1、4 和 7')
>>> either([65, 66]), either([65, 66], "zh")
('65 or 66', '65 或 66')
>>> span(2, 8), span(2, 8, "zh")
('2 to 8', '2 到 8')

Chinese follows the catalogs' conventions: the enumeration comma ``、`` between items, and a
half-width space between a Chinese word and a number or code, none next to Chinese text or
punctuation.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Iterable

from kvcourse._checks import check_count

__all__ = ["LANGUAGES", "check_language", "either", "listed", "ordinal", "span", "yes_no"]

#: The languages a phrase can be written in: the book's English and its Chinese edition.
LANGUAGES = ("en", "zh")

# The joining words of each language: between items, and before the last one for "and" and "or".
_SEPARATOR = {"en": ", ", "zh": "、"}
_AND = {"en": "and", "zh": "和"}
_OR = {"en": "or", "zh": "或"}
_TO = {"en": "to", "zh": "到"}
_YES_NO = {"en": ("yes", "no"), "zh": ("是", "否")}


def check_language(language: object) -> str:
    """``language`` if it is one of :data:`LANGUAGES`; ``TypeError``/``ValueError`` otherwise."""
    if not isinstance(language, str):
        raise TypeError(
            f"language must be a string, 'en' or 'zh', got {language!r} ({type(language).__name__})"
        )
    if language not in LANGUAGES:
        raise ValueError(
            f"language must be 'en' (the English book) or 'zh' (its Chinese edition), "
            f"got {language!r}"
        )
    return language


def _wide(character: str) -> bool:
    """Whether a character is full-width: a Chinese character or Chinese punctuation (``）``)."""
    return unicodedata.east_asian_width(character) in ("W", "F")


def _between(left: str, word: str, right: str, language: str) -> str:
    """``left word right`` with the spaces the language puts around a joining word: always in
    English; in Chinese only next to half-width text (``2 到 8``, ``（槽位 0 1）和 `[5 6]```)."""
    if language == "en":
        return f"{left} {word} {right}"
    before = "" if not left or _wide(left[-1]) else " "
    after = "" if not right or _wide(right[0]) else " "
    return f"{left}{before}{word}{after}{right}"


def _joined(items: Iterable[object], last: dict[str, str], language: str, what: str) -> str:
    language = check_language(language)
    if isinstance(items, (str, bytes)):
        raise TypeError(f"{what}() takes a list of items, got the single string {items!r}")
    words = [str(item) for item in items]
    if not words:
        raise ValueError(f"{what}() needs at least one item, got none")
    if len(words) == 1:
        return words[0]
    return _between(_SEPARATOR[language].join(words[:-1]), last[language], words[-1], language)


def listed(items: Iterable[object], language: str = "en") -> str:
    """Items as one phrase joined by "and": the block ids a block table holds, the blocks whose
    hashes change.

    One item is itself, two are joined by "and" (``和``), more are separated by commas (``、``)
    with "and" before the last. Each item is written with ``str``, so block ids, formatted
    numbers and Markdown (```[1 2]```) all work. An empty list is a ``ValueError``: a sentence
    that lists nothing needs other words.

    >>> listed([3]), listed([1, 4]), listed(["512", "1,024", "2,048"])
    ('3', '1 and 4', '512, 1,024 and 2,048')
    >>> listed([1, 4], "zh"), listed(["512", "1,024", "2,048"], "zh")
    ('1 和 4', '512、1,024 和 2,048')
    """
    return _joined(items, _AND, language, "listed")


def either(items: Iterable[object], language: str = "en") -> str:
    """Items as one phrase joined by "or": the values a quantity moves between, such as the
    blocks a sliding window holds once it is full.

    Written like :func:`listed`, with "or" (``或``) before the last item.

    >>> either([65, 66]), either([1, 2, 3]), either([65, 66], "zh"), either([1, 2, 3], "zh")
    ('65 or 66', '1, 2 or 3', '65 或 66', '1、2 或 3')
    """
    return _joined(items, _OR, language, "either")


def span(low: object, high: object, language: str = "en") -> str:
    """A range of values as a phrase, ``2 to 8`` (``2 到 8``): from the first of a sweep to its
    last, or from the fewest copy-on-writes a run made to the most.

    Both ends are written with ``str`` and always both shown, even when they are equal, so the
    sentence around it reads the same for every run.

    >>> span(2, 8), span(35, 47, "zh")
    ('2 to 8', '35 到 47')
    """
    language = check_language(language)
    return _between(str(low), _TO[language], str(high), language)


def yes_no(flag: bool, language: str = "en") -> str:
    """A yes-or-no answer, such as whether an access page-faults: ``yes``/``no`` (``是``/``否``).

    >>> yes_no(True), yes_no(False), yes_no(False, "zh")
    ('yes', 'no', '否')
    """
    language = check_language(language)
    if not isinstance(flag, bool):
        raise TypeError(f"flag must be True or False, got {flag!r} ({type(flag).__name__})")
    yes, no = _YES_NO[language]
    return yes if flag else no


def ordinal(n: int, language: str = "en") -> str:
    """The ordinal of a count, the *n*-th block of a sequence: ``22nd`` in English.

    In Chinese an ordinal is ``第`` before the number and a measure word after it (``第 22 块``,
    the 22nd block); the word depends on the noun, so the phrase here stops before it
    (``第 22``) and the sentence adds it.

    >>> ordinal(1), ordinal(2), ordinal(3), ordinal(11), ordinal(12), ordinal(22), ordinal(113)
    ('1st', '2nd', '3rd', '11th', '12th', '22nd', '113th')
    >>> ordinal(22, "zh")
    '第 22'
    """
    language = check_language(language)
    n = check_count("n", n)
    if language == "zh":
        return f"第 {n}"
    last_digit = 0 if n // 10 % 10 == 1 else n % 10  # 11th, 12th, 13th
    suffix = {1: "st", 2: "nd", 3: "rd"}.get(last_digit, "th")
    return f"{n}{suffix}"
