#!/usr/bin/env python3
"""The expected scores of the fulltext conformance cases, computed apart from Vev's code.

BM25 as docs/fulltext.md defines it (k1 = 1.2, b = 0.75, Lucene's idf), over the documents a
case's view shows. The documents of these cases are ASCII words, spaces and punctuation, so
the analyzer is the runs of ASCII letters and digits, lower-cased. Each scenario names its documents, the scoring terms (the query's
positive terms and phrase words, and the document terms its prefixes match) and the
documents that match; `python3 bm25.py` prints each matching document's score, which the
cases give as `#approx`.
"""

import math
import re

K1 = 1.2
B = 0.75


def terms_of(text):
    return re.findall(r"[a-z0-9]+", text.lower())


def scores(docs, scoring_terms, matching):
    """Scores of the documents `matching` (texts) among `docs` (every document of the view)."""
    analyzed = [terms_of(d) for d in docs]
    n = len(docs)
    avg_len = sum(len(t) for t in analyzed) / n
    idf = {}
    for term in scoring_terms:
        df = sum(1 for t in analyzed if term in t)
        idf[term] = math.log1p((n - df + 0.5) / (df + 0.5))
    out = {}
    for text in matching:
        terms = terms_of(text)
        score = 0.0
        for term in sorted(set(scoring_terms)):
            tf = terms.count(term)
            if tf:
                norm = len(terms) / avg_len
                score += idf[term] * tf * (K1 + 1) / (tf + K1 * (1 - B + B * norm))
        out[text] = score
    return out


SCENARIOS = {
    # scoring.edn
    "one term, three documents": (
        ["love love", "love song here now", "other"],
        ["love"],
        ["love love", "love song here now"],
    ),
    "two terms add up": (
        ["apple pie", "apple kiwi tart", "kiwi", "pear"],
        ["apple", "kiwi"],
        ["apple kiwi tart"],
    ),
    "OR scores every group's terms": (
        ["apple pie", "apple kiwi tart", "kiwi", "pear"],
        ["apple", "kiwi"],
        ["apple pie", "apple kiwi tart", "kiwi"],
    ),
    "prefix expands against the vocabulary": (
        ["apple pie", "apple apply now", "application form", "pear"],
        ["apple", "application", "apply"],
        ["apple pie", "apple apply now", "application form"],
    ),
    "phrase words score wherever they are": (
        ["apple pie and apple tart", "apple pie", "pie chart"],
        ["apple", "pie"],
        ["apple pie and apple tart", "apple pie"],
    ),
    "documents without terms count": (
        ["apple", "apple pear", "---"],
        ["apple"],
        ["apple", "apple pear"],
    ),
    # time.edn: the same documents seen by four views.
    "as of tx2": (["love one", "love two"], ["love"], ["love one", "love two"]),
    "current": (["love three"], ["love"], ["love three"]),
    "history": (
        ["love one", "love two", "love three"],
        ["love"],
        ["love one", "love two", "love three"],
    ),
    # retraction.edn
    "before the retraction": (
        ["red apple", "green apple", "red wine glass"],
        ["red"],
        ["red apple", "red wine glass"],
    ),
    "after the retraction": (
        ["red apple", "green apple"],
        ["red"],
        ["red apple"],
    ),
    # cardinality.edn: each value of a cardinality-many attribute is a document.
    "values of one entity": (
        ["rock", "rock live", "jazz"],
        ["rock"],
        ["rock", "rock live"],
    ),
}


if __name__ == "__main__":
    for name, (docs, terms, matching) in SCENARIOS.items():
        print(name)
        for text, score in scores(docs, terms, matching).items():
            print(f"  {text!r}: {score!r}")
