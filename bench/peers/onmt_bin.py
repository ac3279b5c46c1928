"""OpenNMT-py's commands where spaCy is not installed (the lent GPU: its 36 MB wheel does not fit
beside the data a device call may carry).

    python bench/peers/onmt_bin.py train -config FILE            # as `onmt_train -config FILE`
    python bench/peers/onmt_bin.py translate -model M -src S ...  # as `onmt_translate ...`
    python bench/peers/onmt_bin.py average_models -models A B -output C

onmt/transforms/__init__.py imports every transform module, and terminology.py imports spaCy at
its top, so each command fails without it even when no transform is used. Where spaCy is missing,
an empty module stands in for that import; the terminology transform is then unusable (and unused
by bench/gpu/peer_trainers.py's onmt and onmt-ttq peers, which work on pieces with no transform).
Everything else is OpenNMT-py's own code, unchanged.
"""

import importlib
import importlib.util
import sys
import types

COMMANDS = ("train", "translate", "average_models")

if __name__ == "__main__":
    if len(sys.argv) < 2 or sys.argv[1] not in COMMANDS:
        sys.exit(f"usage: onmt_bin.py {{{','.join(COMMANDS)}}} ARGS...")
    if importlib.util.find_spec("spacy") is None:
        sys.modules["spacy"] = types.ModuleType("spacy")
    command = sys.argv.pop(1)
    sys.argv[0] = f"onmt_{command}"
    importlib.import_module(f"onmt.bin.{command}").main()
