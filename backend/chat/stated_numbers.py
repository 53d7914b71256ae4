"""Whether a conversation states any number, and which: a number argument needs one to
come from. The digits of a code (``C-4821``) are stated numbers but no quantity
(``states_a_quantity``).

Asked "What is the temperature in Seoul in Fahrenheit?", the 1.5B model's first call was
``convert_units(25, "celsius", "fahrenheit")``; asked for a customer's balance in won,
``convert_currency(1000, "USD", "KRW")``: amounts from nowhere, where another tool would have
given them (benchmarks/README.md, "Made-up numbers, the tool that gives a made-up value"). A number
can be written in many ways ("50만 원", "1万円", "two hours", "a dozen"), so only a
conversation that holds none at all is taken as stating no number: no digit or other numeric
character (CJK numerals ``三``, ``万`` are numeric), no English number word, no Korean
native number word, no Japanese number in kana. The words are matched loosely, so that a
doubtful text counts as stating a number and the call is left alone.

Which numbers a text states (``stated_numbers``, for the optional arguments of
``backend.chat.unstated_options``) is read only where every number it holds is in digits or
an English word up to nineteen; in any other text it may state numbers that cannot be listed.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence

_ENGLISH = (
    "zero|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|thirteen|fourteen|"
    "fifteen|sixteen|seventeen|eighteen|nineteen|twenty|thirty|forty|fifty|sixty|seventy|"
    "eighty|ninety|hundred|thousand|million|billion|trillion|dozen|half|quarter|couple|"
    "once|twice|thrice|double|triple|single|first|second|third|fourth|fifth|tenth|percent"
)
#: Number words matched as substrings: a Korean or Japanese number is often written against
#: its counter ("다섯개", "ふたつめ"), and a word holding one by chance only keeps a call.
_SUBSTRINGS = (
    "하나|둘|셋|넷|다섯|여섯|일곱|여덟|아홉|열|스물|서른|마흔|쉰|예순|일흔|여든|아흔|백|천|만|억|"
    "ひとつ|ふたつ|みっつ|よっつ|いつつ|むっつ|ななつ|やっつ|ここのつ|とお"
)
_NUMBER_WORD = re.compile(rf"\b(?:{_ENGLISH})\b|{_SUBSTRINGS}", re.IGNORECASE)


def states_a_number(text: str) -> bool:
    """Whether ``text`` holds a number in any form ``stated_numbers`` reads."""
    return any(c.isnumeric() for c in text) or _NUMBER_WORD.search(text) is not None


#: A code: Latin letters, an optional hyphen, then a digit and more letters, digits or
#: hyphens (``C-4821``, ``KTX-117``, ``o-1002``, ``P77``). Its digits name a thing.
_CODE = re.compile(r"(?<![A-Za-z0-9])[A-Za-z]+-?\d[A-Za-z0-9-]*")


def states_a_quantity(text: str) -> bool:
    """Whether ``text`` states a number outside codes: asked for customer C-6090's balance in
    yen, the only digits are the id's, which name the customer and are no amount a call
    could turn into another (a rate, a sum, a unit)."""
    return states_a_number(_CODE.sub(" ", text))


#: English number words read as the value they state, where a message writes one.
_WORD_VALUES = {
    word: value
    for value, words in enumerate(
        (
            "zero",
            "one single first once",
            "two second twice double couple",
            "three third thrice triple",
            "four fourth",
            "five fifth",
            "six sixth",
            "seven seventh",
            "eight eighth",
            "nine ninth",
            "ten tenth",
            "eleven",
            "twelve dozen",
            "thirteen",
            "fourteen",
            "fifteen",
            "sixteen",
            "seventeen",
            "eighteen",
            "nineteen",
        )
    )
    for word in words.split()
} | {"half": 0.5, "quarter": 0.25}
_WORD = re.compile(r"\b[a-z]+\b", re.IGNORECASE)
#: Numbers written in digits: ``300,000``, ``6.5``, ``1,5``.
_DIGITS = re.compile(r"\d+(?:[.,]\d+)*")


def stated_numbers(text: str) -> list[float] | None:
    """The numbers ``text`` states: in digits (each read every way its separators allow,
    ``1,500`` as 1500 and as 1.5) and as English words up to nineteen ("four", "a dozen",
    "half"). None where it may state others this cannot read: a numeral other than a digit
    ("三", "万"), a Korean or Japanese number word, or an English word for tens and more
    ("twenty-five", "a hundred", "percent")."""
    if any(c.isnumeric() and not c.isdigit() for c in text):
        return None
    for word in _NUMBER_WORD.finditer(text):
        if word[0].casefold() not in _WORD_VALUES:
            return None
    numbers = [
        _WORD_VALUES[w.casefold()] for w in _WORD.findall(text) if w.casefold() in _WORD_VALUES
    ]
    for written in _DIGITS.findall(text):
        for reading in (written.replace(",", ""), written.replace(",", ".")):
            try:
                numbers.append(float(reading))
            except ValueError:  # more than one decimal point: "1.2.3"
                continue
    return numbers


#: As a percentage: 5 for 0.05 and back.
PERCENTAGE = (1, 100)


def states_value(number: float, value: float, factors: Sequence[int] = PERCENTAGE) -> bool:
    """Whether ``number``, as a message writes it (without its sign, as ``stated_numbers``
    reads it), states ``value``: as it is, or times or divided by one of ``factors`` (a
    percentage, another unit)."""
    return any(
        math.isclose(abs(value), number * factor, rel_tol=1e-9)
        or math.isclose(abs(value) * factor, number, rel_tol=1e-9)
        for factor in factors
    )
