"""Bracket scoring against hand-computed EVALB counts."""

import pytest

from transduce.data.trees import parse_trees
from transduce.evalb import brackets, corpus_score, score_tree


def tree(text):
    return parse_trees(text)[0]


GOLD = tree("(S (NP (DT the) (NN dog)) (VP (VBD saw) (NP (DT a) (NN cat))) (. .))")


def test_gold_against_itself_is_perfect():
    score = score_tree(GOLD, GOLD)
    assert (score.matched, score.gold, score.test) == (4, 4, 4)
    assert score.precision == score.recall == score.f1 == 1.0


def test_hand_computed_partial_example():
    # gold brackets (punctuation deleted, preterminals excluded):
    #   S(0,5) NP(0,2) VP(2,5) NP(3,5)
    # test: (S (NP the) (VP dog (VP saw (NP a cat))) .)
    #   S(0,5) NP(0,1) VP(1,5) VP(2,5) NP(3,5)  -> matched S, VP(2,5), NP(3,5) = 3
    test = tree("(S (NP (XX the)) (VP (XX dog) (VP (XX saw) (NP (XX a) (XX cat)))) (XX .))")
    score = score_tree(GOLD, test)
    assert (score.matched, score.gold, score.test) == (3, 4, 5)
    assert score.precision == pytest.approx(3 / 5) and score.recall == pytest.approx(3 / 4)
    assert score.f1 == pytest.approx(2 * 0.6 * 0.75 / 1.35)


def test_punctuation_is_ignored_and_prt_equals_advp():
    gold = tree("(S (NP (PRP he)) (VP (VBD gave) (PRT (RP up))) (. .))")
    # the period attached inside the VP: the same brackets once punctuation is deleted
    test = tree("(S (NP (PRP he)) (VP (VBD gave) (ADVP (RB up)) (. .)))")
    assert score_tree(gold, test).f1 == 1.0
    assert brackets(gold, {3}) == brackets(test, {3})
    assert ("ADVP", 2, 3) in brackets(gold)


def test_unary_chains_count_as_a_multiset_and_corpus_is_micro_averaged():
    gold = tree("(S (VP (VP (VB go))))")
    test = tree("(S (VP (VB go)))")
    assert score_tree(gold, test).matched == 2 and score_tree(gold, test).gold == 3
    total = corpus_score([GOLD, gold], [GOLD, test])
    assert (total.matched, total.gold, total.test) == (6, 7, 6)


def test_word_mismatch_is_an_error():
    with pytest.raises(ValueError, match="differ"):
        score_tree(GOLD, tree("(S (NP (DT the) (NN cat)) (VP (VBD saw) (NP (DT a) (NN cat))) (. .))"))
