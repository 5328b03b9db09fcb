"""The Chinese edition speaks the lecture's language: where the lecture gives a term (or keeps it
in English), every catalog uses that term, never a coinage of ours. A new page that writes
预填充 or 分页注意力 fails here with the entry and the word to use instead.

The terms come from the lecture (``shared/seeds``): it writes prefill and decode in English
throughout and never 预填充; it names systems and components by their names (PagedAttention,
RadixAttention, H2O, Messenger); it says 每 token 延迟, 零头, 一等公民, 集中式调度器 and 本讲.
"""

import re
from pathlib import Path

import pytest
from babel.messages import pofile
from catalogs import LOCALE

# A coinage, and what the lecture writes instead.
BANNED = {
    "预填充": "prefill",
    "分页注意力": "PagedAttention",
    "基数树注意力": "RadixAttention",
    "重击者预言机": "H2O",
    "传输组件": "Messenger",
    "归一化延迟": "每 token 延迟",
    "空闲块队列": "空闲队列 (one name for vLLM's free queue)",
    "中央调度器": "集中式调度器",
    "一等资源": "一等公民",
    "本单元": "本讲",
    "分块（tile）": "tile (分块 means chunked: 分块 prefill)",
}
# 解码 alone means the decode phase, which the lecture writes "decode"; it keeps 解码 for decoding
# methods (解码方式, 贪心解码) and the model half (解码器); a quoted “解码” is the word itself.
DECODE_COINAGE = re.compile(r"(?<!“)(?<!贪心)解码(?!器|方式|方法|还原|”)")
# A name may carry a gloss in brackets right after it: H2O（重击者预言机）.
GLOSS = re.compile(r"(?:PagedAttention|RadixAttention|H2O|Messenger)（[^）]*）")

CATALOGS = sorted(LOCALE.rglob("*.po"))


def _name(path: Path) -> str:
    return str(path.relative_to(LOCALE))


def test_there_are_catalogs_to_check():
    assert len(CATALOGS) >= 20, f"expected the Chinese edition's catalogs under {LOCALE}"


@pytest.mark.parametrize("path", CATALOGS, ids=_name)
def test_catalog_uses_the_lectures_terms(path):
    with path.open("rb") as handle:
        messages = [m for m in pofile.read_po(handle) if m.id and m.string]
    problems = []
    for message in messages:
        text = GLOSS.sub("", message.string)
        for coinage, lecture in BANNED.items():
            if coinage in text:
                problems.append(f"{coinage!r} → write {lecture}: {message.id[:70]!r}")
        for match in DECODE_COINAGE.finditer(text):
            around = text[max(0, match.start() - 12) : match.end() + 12]
            problems.append(f"解码 for the phase → write decode: …{around}…")
    assert not problems, f"{_name(path)}:\n" + "\n".join(problems)


def test_the_checks_catch_a_coinage():
    """The rules above, on sentences a translator might write."""
    assert DECODE_COINAGE.search("每个解码步")
    assert not DECODE_COINAGE.search("束搜索这类解码方式")
    assert not DECODE_COINAGE.search("仅解码器模型")
    assert not DECODE_COINAGE.search("贪心解码把提示续写下去")
    assert "重击者预言机" not in GLOSS.sub("", "H2O（重击者预言机）保留")
    assert "重击者预言机" in GLOSS.sub("", "{term}`重击者预言机 <H2O>`")


def test_english_pages_chinese_names_use_the_lectures_terms():
    """The English pages carry Chinese too (``## Paging · 分页``, the glossary's names, the
    sidebar's captions); the same terms hold there."""
    root = LOCALE.parents[2]
    sources = sorted((root / "book").glob("*.md")) + [root / "_toc.yml"]
    problems = []
    for source in sources:
        for number, line in enumerate(source.read_text(encoding="utf-8").splitlines(), 1):
            text = GLOSS.sub("", line)
            for coinage, lecture in BANNED.items():
                if coinage in text:
                    problems.append(f"{source.name}:{number}: {coinage!r} → write {lecture}")
    assert not problems, "\n".join(problems)


# What a formula may spell out: short subscripts and names both editions keep as they are.
MATH_LABELS = {"KV", "RDMA", "mem", "comp", "iter", "prefill"}
DISPLAY_MATH = re.compile(r"\$\$(.+?)\$\$", re.S)
TEXT_LABEL = re.compile(r"\\(?:text|mathrm|textrm|operatorname)\{([^}]*)\}")


def test_display_math_has_no_english_words():
    """A formula names things with symbols and the prose around it says what they are, so the
    Chinese edition never shows an English word inside one (its catalogs carry each formula
    unchanged)."""
    root = LOCALE.parents[2]
    problems = []
    for page in sorted((root / "book").glob("*.md")):
        for formula in DISPLAY_MATH.findall(page.read_text(encoding="utf-8")):
            for label in TEXT_LABEL.findall(formula):
                if label not in MATH_LABELS:
                    problems.append(
                        f"{page.name}: \\text{{{label}}} in $${formula.strip()[:60]}…$$"
                    )
    assert not problems, "name it with a symbol defined in the prose:\n" + "\n".join(problems)
