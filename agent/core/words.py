"""Words of a text, and the runs of a passage's sentences nearest a statement.

Grading and the citation check share these, so the benchmark's faithfulness and the check a
run delivers read a passage the same way: the answer grader's SQuAD normalisation and function
words, and :func:`support_windows`, the few sentences of a long passage a statement rests on.
"""

from __future__ import annotations

import re
import string

from agent.core.prompts import sentences

__all__ = ["STOPWORDS", "WINDOWS_JUDGED", "WINDOW_SENTENCES", "content_words", "normalize", "support_windows"]

_ARTICLES = re.compile(r"\b(a|an|the)\b")
_PUNCT = str.maketrans("", "", string.punctuation)
# Function words that carry no answer content; articles are already gone after normalize().
_FUNCTION_WORDS = (
    "and or but of in on at to for from by with as is are was were be been being it its this that "
    "these those which who whom whose what when where why how not no than then there their they "
    "them he she his her we our you your i also can could may might will would should has have had "
    "do does did into onto over under between about such both each other more most very"
)
STOPWORDS = frozenset(_FUNCTION_WORDS.split())

# A statement is judged against runs of this many consecutive sentences, the runs sharing the
# most words with it, instead of the whole passage: see :func:`support_windows`.
WINDOW_SENTENCES = 3
WINDOWS_JUDGED = 2


def normalize(text: str) -> list[str]:
    """SQuAD's answer normalisation, as tokens: lower-case, no punctuation, no articles."""
    text = text.lower().translate(_PUNCT)
    return _ARTICLES.sub(" ", text).split()


def content_words(text: str) -> set[str]:
    """Words that carry content, numbers and units included ("31 kb" is often the fact)."""
    return {w for w in normalize(text) if w not in STOPWORDS and (len(w) > 1 or w.isdigit())}


def support_windows(
    passage: str, statement: str, size: int = WINDOW_SENTENCES, top: int = WINDOWS_JUDGED
) -> list[str]:
    """The ``top`` runs of ``size`` consecutive sentences of ``passage`` that share the most
    content words with ``statement`` (rare ones in the passage weighing most), in passage
    order; the passage itself when it is that short.

    Shown a whole 1,800-character chunk, the 1.5B judge misses a statement that one of its
    sentences holds word for word (COVID-QA: "The Sphere Handbook … is the foremost authority on
    minimum standards …"), the way SummaC found NLI models fail on long premises; shown the few
    sentences nearest it, it does (``benchmarks/support_split.py`` measures both).
    """
    cut = [x.strip() for x in sentences(passage) if x.strip()]
    if len(cut) <= size:
        return [passage]
    bags = [content_words(x) for x in cut]
    words = content_words(statement)
    # A word in every sentence (the paper's subject) says little about where the claim rests;
    # one the passage says once ("31 kb") says much: each shared word weighs 1 / its sentences.
    seen = {w: sum(w in bag for bag in bags) for w in words}
    weight = [sum(1 / seen[w] for w in words & bag) for bag in bags]
    starts = range(len(cut) - size + 1)
    ranked = sorted(starts, key=lambda i: (-sum(weight[i : i + size]), i))
    return [" ".join(cut[i : i + size]) for i in sorted(ranked[:top])]
