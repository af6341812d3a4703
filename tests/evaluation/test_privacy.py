"""Privacy: exact copy measures, and the copying generator gets flagged."""

from __future__ import annotations

import numpy as np
from evaluation.constructed import chain_trace

from tracesynth.evaluation import privacy
from tracesynth.evaluation.windows import Vocabulary, encode
from tracesynth.generators.copy import Copy
from tracesynth.generators.markov import Markov


def test_longest_common_substring_exact():
    train = [np.array([1, 2, 3, 4, 5, 6, 7, 8, 9])]
    candidate = [np.array([9, 9, 3, 4, 5, 6, 0, 7, 8])]
    assert privacy.longest_common_substring(candidate, train) == 4
    assert privacy.longest_common_substring([np.array([0, 0])], train) == 0


def _measure(candidate, train, holdout):
    vocab = Vocabulary.from_traces([train, holdout])
    enc_train = [encode(train, vocab)]
    hashes = privacy.training_hashes(enc_train)
    cand = privacy.measure([encode(candidate, vocab)], enc_train, hashes)
    hold = privacy.measure([encode(holdout, vocab)], enc_train, hashes)
    return cand, hold, privacy.flag(cand, hold)


def test_copy_generator_is_flagged_and_markov_is_not():
    train, holdout = chain_trace(30_000, seed=1), chain_trace(20_000, seed=2)
    copied = Copy(chunk_length=2048, random_state=0).fit([train]).sample(20_000)
    cand, hold, verdict = _measure(copied, train, holdout)
    assert verdict["flagged"] and cand["kgram_copy_share"]["256"] > 0.8
    assert cand["longest_common_substring"] >= 2048 > 10 * hold["longest_common_substring"]
    assert cand["dcr"]["exact_share"] > 0.9 and hold["dcr"]["exact_share"] < 0.1
    # copied chunks are training 8-grams except at the chunk seams
    assert cand["unseen_kgram_share"]["8"] < 0.01

    markov = Markov(order=1, random_state=0).fit([train]).sample(20_000)
    cand, hold, verdict = _measure(markov, train, holdout)
    assert not verdict["flagged"], verdict


def test_unseen_8gram_share_is_zero_for_training_and_high_for_shuffled_events():
    train = chain_trace(5_000, seed=1)
    vocab = Vocabulary.from_traces([train])
    enc = encode(train, vocab)
    hashes = privacy.training_hashes([enc])
    assert privacy.measure([enc], [enc], hashes)["unseen_kgram_share"]["8"] == 0.0
    shuffled = enc.tokens.copy()
    np.random.default_rng(0).shuffle(shuffled)
    share = privacy.measure([type(enc)(**{**enc.__dict__, "tokens": shuffled})], [enc], hashes)["unseen_kgram_share"]["8"]
    assert share > 0.5
