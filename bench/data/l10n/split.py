"""From counted pairs to train/dev/test: one translation per source (the most frequent), sources
grouped by a near-duplicate key so that "Open file", "Open File..." and "Open file:" never sit in
two splits, groups ranked by the SHA-256 of their key; test takes the first groups, dev the next
(one representative each), train all the rest. Deterministic for a given set of pairs."""

from __future__ import annotations

import hashlib
import re
import unicodedata
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass

NON_WORD = re.compile(r"[\W_]+", re.UNICODE)
DIGITS = re.compile(r"\d+")


def near_duplicate_key(src: str) -> str:
    """`src` with case, punctuation and numbers ignored (NFKC, casefolded, each run of digits a
    0, each run of non-word characters a space); `src` itself when nothing is left."""
    key = unicodedata.normalize("NFKC", src).casefold()
    key = DIGITS.sub("0", key)
    key = NON_WORD.sub(" ", key).strip()
    return key or src


def sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def most_frequent_translations(counts: dict[str, Counter[str]]) -> tuple[dict[str, str], int]:
    """Each source's most frequent translation (ties: the smallest string), and how many sources
    had more than one."""
    pairs, conflicting = {}, 0
    for src, translations in counts.items():
        conflicting += len(translations) > 1
        pairs[src] = min(translations.items(), key=lambda item: (-item[1], item[0]))[0]
    return pairs, conflicting


@dataclass
class Splits:
    """Sources of each split, each in SHA-256 order, and what the split left out."""

    test: list[str]
    dev: list[str]
    train: list[str]
    groups: int  # near-duplicate groups, reserved ones not counted
    group_mates_dropped: int  # sources of a dev or test group other than its representative
    reserved_dropped: int  # sources whose key a --reserve file holds


def split_sources(
    sources: Iterable[str],
    occurrences: dict[str, int],
    test_size: int,
    dev_size: int,
    reserved: frozenset[str] = frozenset(),
) -> Splits:
    """Split `sources` by near-duplicate group. A dev or test group is represented by its most
    frequent source (`occurrences`; ties: the smallest string) and its other sources are dropped;
    sources whose key is in `reserved` (keys of an earlier build's test set, say) go nowhere."""
    groups: dict[str, list[str]] = {}
    reserved_dropped = 0
    for src in sources:
        key = near_duplicate_key(src)
        if key in reserved:
            reserved_dropped += 1
            continue
        groups.setdefault(key, []).append(src)
    order = sorted(groups, key=sha256)
    held: dict[str, list[str]] = {"test": [], "dev": []}
    mates_dropped = taken = 0
    for name, size in (("test", test_size), ("dev", dev_size)):
        while len(held[name]) < size and taken < len(order):
            members = groups[order[taken]]
            held[name].append(min(members, key=lambda s: (-occurrences[s], s)))
            mates_dropped += len(members) - 1
            taken += 1
    train = [src for key in order[taken:] for src in groups[key]]
    return Splits(
        test=sorted(held["test"], key=sha256),
        dev=sorted(held["dev"], key=sha256),
        train=sorted(train, key=sha256),
        groups=len(groups),
        group_mates_dropped=mates_dropped,
        reserved_dropped=reserved_dropped,
    )
