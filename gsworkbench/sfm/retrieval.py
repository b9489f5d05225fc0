"""Which photos to match by retrieval: each photo with the photos that look most like it, by a
vocabulary tree built from the photo set's own SIFT descriptors (nothing is downloaded).

:func:`build_vocab_tree` samples up to :data:`TREE_DESCRIPTORS` descriptors from COLMAP's database,
clusters them into visual words (pycolmap's ``VisualIndex``, faiss k-means) and writes the tree into
the work folder; :func:`most_similar` indexes every photo in it and ranks the others by their TF-IDF
score (pycolmap's ``VocabTreePairGenerator``); :func:`retrieval_pairs` turns the rankings and the
photos' name order into the pair list that the matcher verifies.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

import numpy as np

from gsworkbench.sfm.colmap_run import cancellable

TREE_DESCRIPTORS = 50_000  # descriptors sampled for the tree's k-means
POINTS_PER_WORD = 40  # faiss warns below 39 training points per centroid
MIN_WORDS, MAX_WORDS = 64, 512
# one k-means run of 10 iterations (pycolmap's defaults: the best of 3 runs of 100): the words only
# rank the photos of one scene, and ranked them as well in docs/capture.md's measurements
TREE_ITERATIONS, TREE_ROUNDS = 10, 1
# with more threads the tree and the rankings differ from run to run (each worker thread draws its own
# random numbers); one thread gives the same pairs for the same photos, for a second of a minute's matching
DETERMINISTIC_THREADS = 1


class TooFewDescriptors(ValueError):  # noqa: N818 (a ValueError, named for its cause)
    """The database holds too few SIFT descriptors to cluster into :data:`MIN_WORDS` words."""


def tree_words(num_descriptors: int) -> int:
    """Visual words for a tree trained on ``num_descriptors`` descriptors: the largest power of two with
    :data:`POINTS_PER_WORD` descriptors each, within [:data:`MIN_WORDS`, :data:`MAX_WORDS`]."""
    words = MIN_WORDS
    while words * 2 <= min(MAX_WORDS, num_descriptors // POINTS_PER_WORD):
        words *= 2
    return words


@contextlib.contextmanager
def _stderr_to(path: Path) -> Iterator[None]:
    """The process's file descriptor 2 into ``path`` while the block runs: faiss prints its k-means
    warnings (too few points for the coarse quantiser of the words) straight to it, between the bars."""
    saved = os.dup(2)
    try:
        with open(path, "ab") as f:
            os.dup2(f.fileno(), 2)
            yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)


def build_vocab_tree(db: Path, path: Path, seed: int = 0) -> dict[str, int]:
    """A vocabulary tree of the SIFT descriptors in COLMAP's database ``db``, written to ``path``
    (``seed``: the descriptor sample's and the k-means').

    The descriptors are converted as COLMAP converts them when it indexes and queries (uint8 SIFT to
    float32 in 0..255, ``FeatureDescriptors.to_float``), so the tree's words and the queries agree.
    Returns ``{"descriptors": sampled, "words": visual words}``; raises :class:`TooFewDescriptors`
    below a quarter of :data:`MIN_WORDS` x :data:`POINTS_PER_WORD` descriptors."""
    import pycolmap

    with pycolmap.Database.open(str(db)) as d:
        images = sorted(d.read_all_images(), key=lambda im: im.name)  # ids follow the extraction's threads
        blocks = [d.read_descriptors(im.image_id).to_float().data for im in images]
    every = np.concatenate([b for b in blocks if len(b)]) if any(len(b) for b in blocks) else np.zeros((0, 128))
    if len(every) < MIN_WORDS * POINTS_PER_WORD // 4:
        raise TooFewDescriptors(f"only {len(every)} SIFT descriptors in {db}: too few for a vocabulary tree")
    pick = np.random.default_rng(seed).choice(len(every), min(len(every), TREE_DESCRIPTORS), replace=False)
    sample = np.ascontiguousarray(every[np.sort(pick)], dtype=np.float32)
    words = tree_words(len(sample))
    options = pycolmap.VisualIndex.BuildOptions()
    options.num_visual_words = words
    options.num_iterations = TREE_ITERATIONS
    options.num_rounds = TREE_ROUNDS
    options.num_threads = DETERMINISTIC_THREADS
    index = pycolmap.VisualIndex.create(128, 64)  # SIFT's 128 dimensions; COLMAP's 64-bit Hamming embedding

    def build(cancellation_token: object = None) -> None:  # k-means takes no token: Ctrl-C waits for its end
        pycolmap.set_random_seed(seed)  # the k-means' initial centres: the same pairs on every run
        index.build(options, pycolmap.FeatureDescriptorsFloat(pycolmap.FeatureExtractorType.SIFT, sample))
        index.write(str(path))

    with _stderr_to(path.with_suffix(".log")):
        cancellable(build)
    return {"descriptors": len(sample), "words": words}


def most_similar(db: Path, tree: Path, k: int) -> dict[str, list[str]]:
    """Each photo's ``k`` most similar other photos by name, most similar first, by the vocabulary tree
    at ``tree`` (TF-IDF scores over its visual words)."""
    import pycolmap

    options = pycolmap.VocabTreePairingOptions()
    options.vocab_tree_path = str(tree)
    options.num_images = k + 1  # a photo is its own best match
    options.num_threads = DETERMINISTIC_THREADS

    def rank(cancellation_token: object = None) -> tuple[dict[int, str], list[tuple[int, int]]]:
        with pycolmap.Database.open(str(db)) as d:
            names = {im.image_id: im.name for im in d.read_all_images()}
            return names, pycolmap.VocabTreePairGenerator(options, d).all_pairs()

    names, pairs = cancellable(rank)
    ranked: dict[str, list[str]] = {n: [] for n in names.values()}
    for query, found in pairs:  # in the generator's order: by score, per query
        if found != query and len(ranked[names[query]]) < k:
            ranked[names[query]].append(names[found])
    return ranked


def retrieval_pairs(
    names: Sequence[str], ranked: Mapping[str, Sequence[str]], k: int, sequential: Sequence[tuple[str, str]]
) -> list[tuple[str, str]]:
    """The pairs to match: each photo with its first ``k`` photos in ``ranked`` (most similar first),
    and the ``sequential`` pairs (name order: captures are mostly taken in order). Each pair once, in
    name order within the pair and then sorted; no photo with itself; names not in ``names`` ignored."""
    known = set(names)
    pairs: set[tuple[str, str]] = set()
    for a in names:
        for b in list(ranked.get(a, ()))[:k]:
            if b != a and b in known:
                pairs.add((min(a, b), max(a, b)))
    for a, b in sequential:
        if a != b and a in known and b in known:
            pairs.add((min(a, b), max(a, b)))
    return sorted(pairs)


def neighbour_pairs(names: Sequence[str], neighbours: int) -> list[tuple[str, str]]:
    """Each photo in name order with its next ``neighbours`` photos."""
    order = sorted(names)
    return [(order[i], order[j]) for i in range(len(order)) for j in range(i + 1, min(i + 1 + neighbours, len(order)))]


__all__ = ["TooFewDescriptors", "build_vocab_tree", "most_similar", "neighbour_pairs", "retrieval_pairs", "tree_words"]
