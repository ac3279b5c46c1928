"""OpenNMT-py's `onmt_train` where spaCy is not installed (the lent GPU: its 36 MB wheel does not
fit beside the data a device call may carry).

    python bench/peers/onmt_train.py -config FILE     # as `onmt_train -config FILE`

onmt/transforms/__init__.py imports every transform module, and terminology.py imports spaCy at
its top, so `onmt_train` fails without it even when no transform is used. Where spaCy is missing,
an empty module stands in for that import; the terminology transform is then unusable (and unused
by bench/gpu/peer_trainers.py, which trains on pieces with no transform). Everything else is
OpenNMT-py's own code, unchanged.
"""

import importlib.util
import sys
import types

if importlib.util.find_spec("spacy") is None:
    sys.modules["spacy"] = types.ModuleType("spacy")

from onmt.bin.train import main

if __name__ == "__main__":
    main()
