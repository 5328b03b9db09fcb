"""The words pages glue into their prose: the English the book has always shown, and the Chinese
twins the Chinese edition's catalogs use."""

import pytest

from kvcourse.viz import LANGUAGES, either, listed, ordinal, span, yes_no
from kvcourse.viz.prose import check_language


@pytest.mark.parametrize(
    ("items", "english", "chinese"),
    [
        ([7], "7", "7"),
        ([1, 4], "1 and 4", "1 和 4"),
        ([1, 4, 7], "1, 4 and 7", "1、4 和 7"),
        ([0, 2, 3, 5, 6], "0, 2, 3, 5 and 6", "0、2、3、5 和 6"),
        (["512", "1,024", "2,048"], "512, 1,024 and 2,048", "512、1,024 和 2,048"),
        (["[7 8]", "[9 9 9 0]"], "[7 8] and [9 9 9 0]", "[7 8] 和 [9 9 9 0]"),
    ],
)
def test_listed_joins_with_and(items, english, chinese):
    assert listed(items) == english
    assert listed(items, "en") == english
    assert listed(items, language="zh") == chinese


def test_chinese_spaces_only_next_to_half_width_text():
    # A half-width space between Chinese and numbers or code; none next to Chinese text or
    # full-width punctuation. English always has its spaces.
    edges = ["`[1 2]`（槽位 0 1）", "`[3 4]`（槽位 2 3）", "`[5 6 7]`（槽位 4 5 6）"]
    assert (
        listed(edges, "zh") == "`[1 2]`（槽位 0 1）、`[3 4]`（槽位 2 3）和 `[5 6 7]`（槽位 4 5 6）"
    )
    assert listed(["提示", "问题"], "zh") == "提示和问题"
    assert either(["第 1 块", 2], "zh") == "第 1 块或 2"
    assert span("一", "三", "zh") == "一到三"
    assert listed(["提示", "问题"]) == "提示 and 问题"


def test_listed_takes_any_iterable_once():
    # Pages pass generators: the items are read once, in order.
    assert listed(i + 1 for i in range(3)) == "1, 2 and 3"
    assert listed(iter([1, 17]), "zh") == "1 和 17"


@pytest.mark.parametrize(
    ("items", "english", "chinese"),
    [
        ([65], "65", "65"),
        ([65, 66], "65 or 66", "65 或 66"),
        ([1, 2, 3], "1, 2 or 3", "1、2 或 3"),
    ],
)
def test_either_joins_with_or(items, english, chinese):
    assert either(items) == english
    assert either(items, "zh") == chinese


def test_span_shows_both_ends():
    assert span(2, 8) == "2 to 8"
    assert span(35, 47, "zh") == "35 到 47"
    assert span(0, 0) == "0 to 0"
    assert span("1,024", "2,048", "zh") == "1,024 到 2,048"


def test_yes_no():
    assert (yes_no(True), yes_no(False)) == ("yes", "no")
    assert (yes_no(True, "zh"), yes_no(False, "zh")) == ("是", "否")


@pytest.mark.parametrize(
    ("n", "english"),
    [
        (0, "0th"),
        (1, "1st"),
        (2, "2nd"),
        (3, "3rd"),
        (4, "4th"),
        (11, "11th"),
        (12, "12th"),
        (13, "13th"),
        (21, "21st"),
        (22, "22nd"),
        (101, "101st"),
        (111, "111th"),
        (112, "112th"),
    ],
)
def test_ordinal_in_english(n, english):
    assert ordinal(n) == english


def test_ordinal_in_chinese_leaves_the_measure_word_to_the_sentence():
    assert ordinal(22, "zh") == "第 22"
    assert ordinal(1, "zh") == "第 1"


@pytest.mark.parametrize("call", [listed, either])
def test_an_empty_list_is_a_clear_error(call):
    with pytest.raises(ValueError, match="at least one item"):
        call([])


@pytest.mark.parametrize("call", [listed, either])
def test_a_single_string_is_not_a_list_of_letters(call):
    with pytest.raises(TypeError, match="list of items"):
        call("147")


@pytest.mark.parametrize(
    "call",
    [
        lambda language: listed([1, 2], language),
        lambda language: either([1, 2], language),
        lambda language: span(1, 2, language),
        lambda language: yes_no(True, language),
        lambda language: ordinal(3, language),
    ],
)
def test_every_phrase_checks_its_language(call):
    with pytest.raises(ValueError, match=r"'en' \(the English book\) or 'zh'.*got 'fr'"):
        call("fr")
    with pytest.raises(ValueError, match="got 'zh_CN'"):
        call("zh_CN")
    with pytest.raises(TypeError, match="language must be a string"):
        call(None)


def test_languages():
    assert LANGUAGES == ("en", "zh")
    assert [check_language(language) for language in LANGUAGES] == ["en", "zh"]


def test_yes_no_and_ordinal_check_their_values():
    with pytest.raises(TypeError, match="True or False"):
        yes_no(1)
    with pytest.raises(ValueError, match="zero or more"):
        ordinal(-1)
    with pytest.raises(TypeError, match="must be an int"):
        ordinal(2.0)
