"""JoeyNMT 2.3.0's command line on torch 2.13 (run by bench/mt/toolkits.py inside bench/.toolkits):

    python bench/peers/joeynmt_compat.py train|test|translate CONFIG [joeynmt's options]

JoeyNMT 2.3.0 (its last release) builds its "plateau" scheduler as
ReduceLROnPlateau(..., verbose=False). torch deprecated `verbose` in 2.2 and removed it in 2.7, so
the call raises TypeError there. False was the default, so dropping the argument changes nothing:
this wrapper accepts and ignores it, then runs `python -m joeynmt` unchanged. No environment
variable or older dependency can help: the argument is gone from torch itself.
"""

import runpy

import torch.optim.lr_scheduler as lr_scheduler


class ReduceLROnPlateau(lr_scheduler.ReduceLROnPlateau):
    def __init__(self, *args, verbose: bool = False, **kwargs) -> None:
        super().__init__(*args, **kwargs)


lr_scheduler.ReduceLROnPlateau = ReduceLROnPlateau  # before joeynmt.builders imports the name
runpy.run_module("joeynmt", run_name="__main__", alter_sys=True)
