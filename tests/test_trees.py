"""Treebank reading, linearisation round trips, repair, and the PCFG sampler."""

import random
from pathlib import Path

import pytest
from pcfg import Grammar, GrammarError, generate_treebank

from transduce.data.trees import (
    PLACEHOLDER,
    Tree,
    TreeError,
    delinearise,
    linearise,
    parse_trees,
    read_treebank,
    repair,
)

GRAMMAR = Grammar.parse((Path(__file__).parent / "data" / "toy.pcfg").read_text())


@pytest.fixture(scope="module")
def treebank():
    return generate_treebank(GRAMMAR, 500, seed=7, max_words=25)


def test_reading_handles_outer_bracket_traces_function_tags_and_multiline(tmp_path):
    text = """( (S (NP-SBJ-1 (DT The) (NN dog))
    (VP (VBD wanted)
      (S (NP-SBJ (-NONE- *-1)) (VP (TO to) (VP (VB bark)))))
    (. .)) )
(TOP (S (NP=2 (PRP It)) (VP (VBZ is) (ADJP (JJ -LRB-odd-RRB-))) (-NONE- *T*)))
"""
    path = tmp_path / "wsj.mrg"
    path.write_text(text)
    first, second = read_treebank(path)
    assert str(first) == (
        "(S (NP (DT The) (NN dog)) (VP (VBD wanted) (S (VP (TO to) (VP (VB bark))))) (. .))"
    )
    assert first.words() == ["The", "dog", "wanted", "to", "bark", "."]
    assert str(second) == "(S (NP (PRP It)) (VP (VBZ is) (ADJP (JJ -LRB-odd-RRB-))))"
    assert str(parse_trees("(S (-LRB- -LRB-) (NP (NN x)))")[0]) == "(S (-LRB- -LRB-) (NP (NN x)))"


def test_malformed_treebank_errors_name_file_and_line(tmp_path):
    path = tmp_path / "bad.trees"
    path.write_text("(S (NP (NN a)))\n(S (NP (NN b))\n")
    with pytest.raises(TreeError, match=r"bad.trees:2: tree not closed"):
        read_treebank(path)
    path.write_text("(S (NN a)))\n")
    with pytest.raises(TreeError, match=r"bad.trees:1: '\)' without"):
        read_treebank(path)
    path.write_bytes(b"(S (NN \xff))\n")
    with pytest.raises(TreeError, match="not UTF-8"):
        read_treebank(path)


def test_linearise_matches_the_documented_form():
    tree = parse_trees("(S (NP (DT the) (NN dog)) (VP (VBD barked)))")[0]
    assert " ".join(linearise(tree, words=False, tags=False)) == "(S (NP XX XX )NP (VP XX )VP )S"
    assert " ".join(linearise(tree)) == "(S (NP (DT the )DT (NN dog )NN )NP (VP (VBD barked )VBD )VP )S"


def without_tags(tree: Tree) -> Tree:
    """The tree a tag-free linearisation stands for: every POS tag replaced by the placeholder."""
    if tree.is_preterminal:
        return Tree(PLACEHOLDER, list(tree.children))
    return Tree(tree.label, [without_tags(c) for c in tree.children])


def test_round_trip_on_every_generated_tree(treebank):
    for tree in treebank:
        assert delinearise(linearise(tree)) == tree
        words = tree.words()
        assert delinearise(linearise(tree, words=False, tags=False), words, tags=False) == without_tags(tree)
        assert delinearise(linearise(tree, words=True, tags=False), tags=False) == without_tags(tree)
        assert parse_trees(str(tree)) == [tree]


def test_delinearise_rejects_ill_formed_sequences():
    for bad in ("(S XX )NP", "(S XX", "XX", "(S XX )S )S", "(S XX )S (S XX )S"):
        with pytest.raises(TreeError):
            delinearise(bad.split(), ["w"] * 2, tags=False)
    with pytest.raises(TreeError, match="1 leaves for 2 words"):
        delinearise(["(S", "XX", ")S"], ["a", "b"], tags=False)


def well_formed(tree: Tree) -> bool:
    return all(isinstance(c, str) or (c.children and well_formed(c)) for c in tree.children)


def test_repair_gives_a_valid_tree_over_the_words_for_random_corruptions(treebank):
    rng = random.Random(0)
    labels = ["(S", "(NP", "(VP", "(PP", ")NP", ")VP", ")S", PLACEHOLDER]
    for tree in treebank[:300]:
        words = tree.words()
        tokens = linearise(tree, words=False, tags=False)
        for _ in range(3):
            corrupt = list(tokens)
            for _ in range(rng.randint(1, 4)):
                op = rng.choice(["drop", "insert", "swap"])
                i = rng.randrange(len(corrupt)) if corrupt else 0
                if op == "drop" and corrupt:
                    del corrupt[i]
                elif op == "insert":
                    corrupt.insert(i, rng.choice(labels))
                elif corrupt:
                    j = rng.randrange(len(corrupt))
                    corrupt[i], corrupt[j] = corrupt[j], corrupt[i]
            fixed = repair(corrupt, words)
            assert fixed.words() == words
            assert well_formed(fixed)
            assert parse_trees(str(fixed)) == [fixed]  # printable and readable again
        assert repair(tokens, words) == without_tags(tree)  # well-formed input is kept as is
    assert repair([], ["a", "b"]).words() == ["a", "b"]


def test_pcfg_sampling_is_seeded_and_grammar_errors_are_named():
    a = generate_treebank(GRAMMAR, 20, seed=3)
    assert a == generate_treebank(GRAMMAR, 20, seed=3) and a != generate_treebank(GRAMMAR, 20, seed=4)
    assert {t.label for t in a} == {"S"}  # S@top is labelled S
    with pytest.raises(GrammarError, match=r"'VP' \(in a rule of S\) has no rules"):
        Grammar.parse("S -> NP VP\nNP -> 'a'")
    with pytest.raises(GrammarError, match="line 1"):
        Grammar.parse("S NP VP")
