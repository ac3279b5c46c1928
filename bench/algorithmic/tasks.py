"""The grid's tasks and the paper's numbers beside which its results stand (bench.algorithmic.grid
trains them; the results page, bench.results, tables them). No torch here: the page reads it."""

from __future__ import annotations

import argparse
from dataclasses import dataclass

LABELS = {"transformer": "Transformer", "ut": "UT", "ut_act": "UT+ACT"}
# tensor2tensor's tiny sizes, the paper's models: the grid's defaults, and the only settings the
# headline sets beside the paper; each model's depth is the one size of the two it reads
TINY = {"width": 128, "d_ff": 512, "heads": 4, "layers": 2, "ut_steps": 8}
DEPTH = {"transformer": "layers", "ut": "ut_steps", "ut_act": "ut_steps"}
# The paper's Table 3 (char acc, seq acc at length 400) and its LTE table; one "Universal Transformer"
# row, which the paper does not say is with or without ACT, so it stands beside both of ours.
PAPER = {
    "copy": {"transformer": (0.53, 0.03), "ut": (0.91, 0.35)},
    "reverse": {"transformer": (0.13, 0.06), "ut": (0.96, 0.46)},
    "addition": {"transformer": (0.07, 0.00), "ut": (0.34, 0.02)},
    # Learning to Execute memorisation at length 55 (the paper's LTE table)
    "lte_copy": {"transformer": (0.98, 0.63), "ut": (1.0, 1.0)},
    "lte_double": {"transformer": (0.94, 0.55), "ut": (1.0, 1.0)},
    "lte_reverse": {"transformer": (0.81, 0.26), "ut": (1.0, 1.0)},
    # Learning to Execute program evaluation, nesting 2, length 5 (the paper's Table 6)
    "lte_program": {"transformer": (0.71, 0.29), "ut": (0.89, 0.63)},
    "lte_control": {"transformer": (0.93, 0.66), "ut": (1.0, 1.0)},
    "lte_addition": {"transformer": (1.0, 1.0), "ut": (1.0, 1.0)},
}
PAPER_LSTM = {  # the LSTM rows of the paper's LTE tables, for the program evaluation table
    "lte_program": (0.53, 0.12),
    "lte_control": (0.68, 0.21),
    "lte_addition": (0.83, 0.11),
}


@dataclass(frozen=True)
class Task:
    """A benchmark task: the generated task it trains on, and where its headline comes from."""

    data_task: str
    lte: bool = False  # Learning to Execute: one length, tested in distribution
    program: bool = False  # its program evaluation: constants of --program-len digits, --program-nesting

    def data_overrides(self, args: argparse.Namespace) -> list[str]:
        extra = []
        if self.program:  # every split at the mix strategy's bounds; test_long is not reported
            lengths = [args.program_len] * 2 + [args.program_len + 1] * 2
            extra = [f"data.task_nesting={args.program_nesting}"]
        elif self.lte:  # test_long is not reported; one length past training keeps it cheap
            lengths = [args.lte_len] * 2 + [args.lte_len + 1] * 2
        else:
            lengths = [1, args.train_len, args.test_len, args.test_len]
        keys = ("task_train_min_len", "task_train_max_len", "task_test_min_len", "task_test_max_len")
        return [
            f"data.task={self.data_task}",
            *extra,
            *(f"data.{k}={v}" for k, v in zip(keys, lengths, strict=True)),
        ]

    @property
    def headline(self) -> str:
        """The split whose accuracy is the task's result."""
        return "dev" if self.lte else "test_long"


TASKS = {
    "copy": Task("copy"),
    "reverse": Task("reverse"),
    "addition": Task("addition_le"),
    "lte_copy": Task("copy", lte=True),
    "lte_double": Task("double", lte=True),
    "lte_reverse": Task("reverse", lte=True),
    "lte_program": Task("lte_program", lte=True, program=True),
    "lte_control": Task("lte_control", lte=True, program=True),
    "lte_addition": Task("lte_addition", lte=True, program=True),
}
