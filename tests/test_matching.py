"""Which photos are matched (gsworkbench.sfm.retrieval, the matchers of gsworkbench.sfm.pipeline): the
pair selection on a hand-made ranking, the vocabulary tree's size, and a retrieval reconstruction of a
generated photo set against the truth."""

from __future__ import annotations

import json
from pathlib import Path

import pycolmap
import pytest

from gsworkbench.sfm.pipeline import EXHAUSTIVE_MAX, match_pairs, reconstruct
from gsworkbench.sfm.pose_accuracy import model_poses, pose_errors
from gsworkbench.sfm.retrieval import (
    MAX_WORDS,
    MIN_WORDS,
    build_vocab_tree,
    most_similar,
    neighbour_pairs,
    retrieval_pairs,
    tree_words,
)
from gsworkbench.studies.photo_set import write_photos

NAMES = ["a", "b", "c", "d", "e", "f"]
# each photo's others, most similar first (as most_similar returns them): a hand-made similarity
RANKED = {
    "a": ["e", "c", "b", "f"],
    "b": ["f", "a", "d"],
    "c": ["a", "e"],
    "d": ["b", "f", "a"],
    "e": ["a", "c", "d"],
    "f": ["b", "d", "e"],
}


def test_each_photo_gets_its_k_best_and_its_successors_once() -> None:
    pairs = retrieval_pairs(NAMES, RANKED, k=2, sequential=neighbour_pairs(NAMES, 1))
    best = {("a", "e"), ("a", "c"), ("b", "f"), ("a", "b"), ("c", "e"), ("b", "d"), ("d", "f")}
    successors = {("a", "b"), ("b", "c"), ("c", "d"), ("d", "e"), ("e", "f")}
    assert pairs == sorted(best | successors)
    assert len(pairs) == len(set(pairs)) and all(a < b for a, b in pairs)  # once each, no photo with itself
    assert ("a", "f") not in pairs  # a's 4th and f's 4th: beyond k


def test_pairs_skip_self_and_unknown_names_and_k_cuts_the_ranking() -> None:
    ranked = {"a": ["a", "b", "zz", "c"], "b": ["b"], "c": []}
    assert retrieval_pairs(["a", "b", "c"], ranked, k=2, sequential=[]) == [("a", "b")]
    assert retrieval_pairs(["a", "b", "c"], ranked, k=4, sequential=[("c", "c")]) == [("a", "b"), ("a", "c")]


def test_neighbour_pairs_follow_name_order() -> None:
    assert neighbour_pairs(["c", "a", "b", "d"], 2) == [("a", "b"), ("a", "c"), ("b", "c"), ("b", "d"), ("c", "d")]
    assert neighbour_pairs(["a", "b"], 0) == []


def test_the_tree_has_forty_descriptors_a_word_within_bounds() -> None:
    assert tree_words(0) == MIN_WORDS and tree_words(10 * 40 * MIN_WORDS) == 8 * MIN_WORDS
    assert tree_words(10**9) == MAX_WORDS
    for n in (3000, 22_129, 150_000):
        w = tree_words(n)
        assert w & (w - 1) == 0 and (w == MIN_WORDS or w * 40 <= n < w * 80 or w == MAX_WORDS)


def test_retrieval_reconstructs_a_photo_set_from_fewer_pairs(tmp_path: Path) -> None:
    n = 16
    truth = write_photos(tmp_path / "photos", n)
    assert n <= EXHAUSTIVE_MAX  # so that "auto" would not choose retrieval here: it is asked for
    out = reconstruct(tmp_path / "photos", tmp_path / "scene", matcher="retrieval", retrieval_k=3,
                      retrieval_sequential=0, progress=False, log=None)  # fmt: skip
    notes = json.loads((out / "reconstruct.json").read_text())["notes"]
    assert notes["matcher"] == "retrieval" and notes["vocab_tree"]["words"] >= MIN_WORDS
    assert notes["pairs_matched"] <= 3 * n < len(match_pairs(sorted(truth), "exhaustive", 1))
    rec = pycolmap.Reconstruction(str(out / "sparse" / "0"))
    assert len(model_poses(rec)) == n
    e = pose_errors(model_poses(rec), truth).summary()
    assert e["rotation_median_deg"] < 1.0 and e["centre_median_pct"] < 2.0, e
    # the tree, not the name order, found the photos' neighbours on the arc (no sequential pairs asked)
    work = out / "work"
    ranked = most_similar(work / "database.db", work / "vocab_tree.bin", 3)
    assert ranked == most_similar(work / "database.db", work / "vocab_tree.bin", 3)  # the same photos, the same pairs
    again = build_vocab_tree(work / "database.db", tmp_path / "again.bin")
    assert again == notes["vocab_tree"]
    assert (tmp_path / "again.bin").read_bytes() == (work / "vocab_tree.bin").read_bytes()
    names = sorted(truth)
    for a, b in zip(names, names[1:]):
        assert b in ranked[a] or a in ranked[b], (a, b, ranked[a], ranked[b])


@pytest.mark.parametrize(
    ("options", "named"),
    [({"retrieval_k": 0}, "retrieval_k must be"), ({"retrieval_sequential": -1}, "retrieval_sequential must be")],
)
def test_bad_retrieval_options_are_named(tmp_path: Path, options, named) -> None:
    with pytest.raises(ValueError, match=named):
        reconstruct(tmp_path, tmp_path / "scene", progress=False, log=None, **options)
