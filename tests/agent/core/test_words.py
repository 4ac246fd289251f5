"""The runs of a passage's sentences nearest a statement, which the judges read instead of a chunk."""

from __future__ import annotations

from agent.core.words import WINDOW_SENTENCES, WINDOWS_JUDGED, content_words, support_windows

FILLER = [f"Sentence {n} reports an unrelated measurement of ward occupancy in spring." for n in range(8)]
FACT = "The Sphere Handbook is the foremost authority on minimum standards for humanitarian assistance."
PASSAGE = " ".join([*FILLER[:5], FACT, *FILLER[5:]])


def test_windows_are_the_runs_sharing_most_words_with_the_statement_in_passage_order() -> None:
    windows = support_windows(
        PASSAGE, "The Sphere Handbook sets minimum standards for humanitarian assistance."
    )
    assert len(windows) == WINDOWS_JUDGED
    assert all(FACT in w for w in windows)  # both best runs hold the sentence with the fact
    assert all(len([s for s in w.split(". ") if s]) == WINDOW_SENTENCES for w in windows)
    assert PASSAGE.index(windows[0][:40]) < PASSAGE.index(windows[1][:40])


def test_a_passage_of_few_sentences_is_judged_whole() -> None:
    short = f"{FILLER[0]} {FACT}"
    assert support_windows(short, FACT) == [short]


def test_numbers_and_units_rank_the_window_that_holds_them() -> None:
    # COVID-QA: "The size of bovine coronavirus is approximately 31 kb." rests on "Its genome is …
    # RNA of around 31 kb"; ranked on long words only, the title lines naming the virus won.
    header = (
        "Bovine coronavirus from France. A bovine coronavirus was sequenced. "
        "The bovine coronavirus is common."
    )
    fact = "Its genome is a single-stranded RNA of around 31 kb."
    body = " ".join([*FILLER[:4], fact, *FILLER[4:]])
    windows = support_windows(f"{header} {body}", "The size of bovine coronavirus is approximately 31 kb.")
    assert any("31 kb" in w for w in windows)


def test_content_words_keep_numbers_and_drop_function_words() -> None:
    assert content_words("The genome is 31 kb of RNA.") == {"genome", "31", "kb", "rna"}
