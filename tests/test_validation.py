"""The teacher-forced pass over a split (train/validation.py): its argmax accuracy against a naive
loop, one example and one position at a time."""

import torch
from tiny import tiny_config

from transduce.train.objective import IGNORE
from transduce.train.trainer import Trainer


def test_teacher_forced_accuracy_matches_a_loop_over_examples_and_positions(tmp_path):
    cfg = tiny_config("train.steps=25", "train.save_every=25", "train.validate_every=25")
    trainer = Trainer(cfg, tmp_path / "run", show_progress=False)
    metrics = trainer.fit()
    split = trainer.data.splits["test_long"]
    dev = trainer.validator.dev_loss(split)

    right = scored = exact = 0
    trainer.model.eval()
    with torch.no_grad():
        for i in range(len(split)):
            batch = trainer.objective.collate(split, [i])
            target = trainer.objective.targets(batch)[0]
            logits = trainer.objective.forward(trainer.model, batch.to(trainer.device)).logits[0]
            all_right = True
            for position, token in enumerate(target.tolist()):
                if token == IGNORE:
                    continue
                hit = int(logits[position].argmax()) == token
                right, scored, all_right = right + hit, scored + 1, all_right and hit
            exact += all_right
    assert dev.forced.char == right / scored
    assert dev.forced.sequence == exact / len(split)
    assert 0 < dev.forced.char < 1  # part-trained: the comparison is not between two trivial values
    assert metrics["dev_forced_acc"] == trainer.validator.dev_loss(trainer.data.splits["dev"]).forced.char
