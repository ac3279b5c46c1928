"""The run directory over a training run's life: the best checkpoint, the automatic average, the
progress display, why a run stopped, and a disk that fills while it saves."""

import json
import shutil

from tiny import tiny_config, train_tiny

from transduce.train.trainer import Trainer


def scripted_validation(monkeypatch, losses: list[float]) -> None:
    """Each validation returns the next dev loss of `losses` (the model is not decoded)."""
    sequence = iter(losses)

    def validate(self):
        return {"step": self.state.step, "dev_loss": next(sequence), "dev_seq_acc": 0.0}

    monkeypatch.setattr(Trainer, "validate", validate)


def test_a_missing_best_is_replaced_by_the_best_of_the_later_validations(tmp_path, monkeypatch):
    """The best checkpoint (step 2, dev loss 3.0) deleted behind the run's back: the validations
    after the resume are worse than it (4.0, then 4.5), and the better of them becomes the best."""
    run = train_tiny(tmp_path / "r", 2)
    checkpoints = run / "checkpoints"
    shutil.copytree(checkpoints / "ckpt-00000002", checkpoints / "ckpt-00000003")  # step 2, best 2
    shutil.rmtree(checkpoints / "ckpt-00000002")
    state = json.loads((checkpoints / "ckpt-00000003" / "trainer.json").read_text())["state"]
    assert state["best_step"] == 2 and state["best_value"] < 4.0  # the real best was better
    scripted_validation(monkeypatch, [4.0, 4.5])
    cfg = tiny_config("train.steps=4", "train.validate_every=1", "train.save_every=100")
    trainer = Trainer(cfg, run, show_progress=False)
    trainer.fit(resume=True)
    assert trainer.state.best_step == 3 and trainer.state.best_value == 4.0
    assert json.loads((run / "best.json").read_text()) == {"step": 3}
    assert (checkpoints / "ckpt-00000003").exists()
