"""The tiny copy-task setting several tests train on in seconds."""

from pathlib import Path

from transduce.config import Config, load_config

TINY = [
    "model.d_model=32",
    "model.heads=4",
    "model.d_ff=64",
    "model.encoder_layers=1",
    "model.decoder_layers=1",
    "data.task=copy",
    "data.task_train_max_len=6",
    "data.task_test_max_len=8",
    "data.task_train_size=300",
    "data.task_eval_size=20",
    "data.max_tokens=200",
    "train.warmup=10",
    "train.lr_scale=0.5",
    "train.validate_every=1000",
    "train.log_every=1000",
]


# A Universal Transformer with ACT (4 steps a stack at most) on a tiny copy task
TINY_ACT = [
    "model.arch=universal",
    "model.act=true",
    "model.d_model=32",
    "model.heads=4",
    "model.d_ff=64",
    "model.encoder_steps=4",
    "model.decoder_steps=4",
    "data.task=copy",
    "data.task_train_max_len=5",
    "data.task_test_max_len=7",
    "data.task_train_size=100",
    "data.task_eval_size=10",
    "data.max_tokens=200",
]


def tiny_config(*extra: str) -> Config:
    return load_config("small", [*TINY, *extra])


def train_tiny(run: Path, steps: int, *extra: str) -> Path:
    """Train the tiny model for `steps` steps (validated and saved at the end) into `run`."""
    from transduce.train.trainer import Trainer

    cfg = tiny_config(
        f"train.steps={steps}", f"train.save_every={steps}", f"train.validate_every={steps}", *extra
    )
    Trainer(cfg, run, show_progress=False).fit()
    return run
