"""Whether a conversation states any number: a number argument needs one to come from.

Asked "What is the temperature in Seoul in Fahrenheit?", the 1.5B model's first call was
``convert_units(25, "celsius", "fahrenheit")``; asked for a customer's balance in won,
``convert_currency(1000, "USD", "KRW")``: amounts from nowhere, where another tool would have
given them (benchmarks/README.md, "Made-up numbers, the tool that gives a made-up value"). A number
can be written in many ways ("50만 원", "1万円", "two hours", "a dozen"), so only a
conversation that holds none at all is taken as stating no number: no digit or other numeric
character (CJK numerals ``三``, ``万`` are numeric), no English number word, no Korean
native number word, no Japanese number in kana. The words are matched loosely, so that a
doubtful text counts as stating a number and the call is left alone.
"""

from __future__ import annotations

import re

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
