"""Every parse rule of PROTOCOL §3.2 on adversarial answers (expected values worked out by hand)."""

from __future__ import annotations

import pytest

from icl.benchmarks.vlicl.scoring import first_integer, i2t_correct, judge_says_yes, parsed_answer, truncate


@pytest.mark.parametrize("raw, cut", [
    ("dax", "dax"),
    ("  dax  ", "dax"),
    ("dax\nblicket", "dax"),
    ("\n\n dax\nblicket", "dax"),          # leading newlines are stripped first
    ("dax is here\nno", "dax is here"),
    ("dax. blicket", "dax"),              # no newline: cut at the first '.'
    ("3.5", "3"),
    (".dax", ".dax"),                     # '.' at position 0 is not a cut
    ("a.\nb", "a."),                      # a newline wins over an earlier '.'
    ("dax \nfoo", "dax "),                # nothing is stripped after the cut
    ("\n.x.y", ".x.y"),                   # after the strip the first '.' is at 0: nothing is cut
    ("", ""),
    ("   ", ""),
])
def test_truncate(raw: str, cut: str) -> None:
    assert truncate(raw) == cut


def test_first_integer_modes() -> None:
    assert first_integer("-5", "legacy") == "5"
    assert first_integer("-5", "lenient") == "-5"
    assert first_integer("it is 12 or 13", "legacy") == "12"
    assert first_integer("twelve", "lenient") == ""
    assert first_integer("1,000", "lenient") == "1"
    assert first_integer("x-3y", "lenient") == "-3"


@pytest.mark.parametrize("answer, truth, legacy, lenient", [
    ("9", 9, True, True),
    ("The answer is 9.", 9, True, True),
    ("-5", -5, False, True),               # the reference drops the minus sign
    ("5", -5, False, False),
    ("minus 5", -5, False, False),
    ("3 x 4 = 12", 12, False, False),      # the first integer is 3
    ("12\n13", 12, True, True),
    ("no idea", 0, False, False),
    ("0", 0, True, True),
    ("1.0", 1, True, True),                # cut at '.' leaves "1"
])
def test_operator_first_integer(answer: str, truth: int, legacy: bool, lenient: bool) -> None:
    for task in ("operator_induction", "operator_induction_interleaved"):
        assert i2t_correct(task, answer, truth, "legacy") is legacy
        assert i2t_correct(task, answer, truth, "lenient") is lenient


@pytest.mark.parametrize("answer, truth, legacy, lenient", [
    ("3", 3, True, True),
    (" 3 \n", 3, True, True),
    ("3 objects", 3, False, True),          # no number extraction for CLEVR in legacy mode
    ("There are 3.", 3, False, True),
    ("three", 3, False, False),
    ("-3", 3, False, False),
    ("03", 3, False, False),                # strings are compared: "03" != "3"
])
def test_clevr_modes(answer: str, truth: int, legacy: bool, lenient: bool) -> None:
    assert i2t_correct("clevr", answer, truth, "legacy") is legacy
    assert i2t_correct("clevr", answer, truth, "lenient") is lenient


@pytest.mark.parametrize("answer, truth, ok", [
    ("dax", "dax", True),
    ("DAX", "dax", True),                   # case-insensitive
    ("dax.", "dax", True),
    ("a dax", "dax", False),                # equality, not containment
    ("dax \nfoo", "dax", False),            # the kept trailing space breaks equality
    ("dax\nfoo", "dax", True),
    ("", "dax", False),
    ("Hello World", "hello world", True),
])
def test_exact_match(answer: str, truth: str, ok: bool) -> None:
    for mode in ("legacy", "lenient"):
        assert i2t_correct("open_mi", answer, truth, mode) is ok
        assert i2t_correct("textocr", answer, truth, mode) is ok


@pytest.mark.parametrize("answer, truth, ok", [
    ("Yes", "yes", True),
    ("yes, no", "yes", True),
    ("eyes", "yes", True),                  # containment, as the protocol says
    ("no", "yes", False),
    ("", "yes", False),
    ("No\nyes", "yes", False),              # truncation comes first
    ("no", "no", True),
    ("", "no", True),
    ("nope", "no", True),
    ("YES", "no", False),
    ("No. Yes", "no", True),                # cut at the '.'
    ("eyes", "no", False),
])
def test_yes_no(answer: str, truth: str, ok: bool) -> None:
    assert i2t_correct("matching_mi", answer, truth) is ok


def test_yes_no_truth_must_be_yes_or_no() -> None:
    with pytest.raises(ValueError, match="matching_mi"):
        i2t_correct("matching_mi", "yes", "maybe")


@pytest.mark.parametrize("answer, yes", [("yes", True), ("Yes.", True), ("YES", True), ("Eyes", True),
                                         ("no", False), ("", False), ("n o", False), ("ye s", False)])
def test_judge_verdict(answer: str, yes: bool) -> None:
    assert judge_says_yes(answer) is yes


def test_bad_inputs() -> None:
    with pytest.raises(TypeError, match="str"):
        i2t_correct("clevr", 3, 3)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="judge"):
        i2t_correct("cobsat", "yes", "x")
    with pytest.raises(ValueError, match="parse mode"):
        parsed_answer("clevr", "3", "strict")
    with pytest.raises(ValueError, match="unknown VL-ICL task"):
        parsed_answer("vqa", "3")
