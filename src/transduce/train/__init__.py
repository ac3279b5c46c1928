"""Training: schedule, loss, checkpoints, averaging, the trainer loop."""
