"""The config's schema: its sections as pydantic models, their bounds and cross-field checks,
and the comparisons other modules make between configs. Loading (files, presets, overrides) is
config/parsing.py; the presets are config/presets.toml."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, model_validator


class ConfigError(ValueError):
    """A configuration that cannot be loaded; the message names the key at fault."""


# Upper bounds refuse absurd values when the config is loaded, before they become an allocation
# that fails deep inside PyTorch or a loop that never ends. They sit well above any real use.
WIDTH_MAX = 65536  # d_model, d_ff: 5x GPT-3's d_model (12288); T5-11B's d_ff is 65536
DEPTH_MAX = 64  # layers per stack
POSITIONS_MAX = 65536  # sequence positions: learned tables, windows, decode lengths
COUNT_MAX = 10**9  # steps and step intervals (bench/mt/vs_marian.py runs "1e8 steps" under a time budget)
TOKENS_MAX = 1 << 20  # tokens in one batch
SEED_MAX = 2**32 - 1  # a 32-bit seed, which every numpy and torch generator takes
TASK_LEN_MAX = 1000  # generated-task lengths (the Universal Transformer paper tests up to 400)
TASK_SYMBOLS_BUDGET = 2 * 10**8  # symbols a generated task may write: under a minute to generate


class _Section(BaseModel):
    # allow_inf_nan: an inf or nan never means anything in a config, and passes `gt` checks
    model_config = ConfigDict(extra="forbid", validate_assignment=True, allow_inf_nan=False)


Beta = Annotated[float, Field(ge=0.0, lt=1.0)]  # Adam's decay rates; torch refuses others


class ModelConfig(_Section):
    """Architecture hyper-parameters (SPEC section 1 and 2)."""

    arch: Literal["transformer", "universal"] = "transformer"
    kind: Literal["encoder_decoder", "encoder", "decoder"] = "encoder_decoder"
    d_model: int = Field(512, ge=8, le=WIDTH_MAX, description=f"model width; 8..{WIDTH_MAX}")
    heads: int = Field(8, ge=1, le=1024, description="attention heads, dividing d_model; 1..1024")
    d_ff: int = Field(2048, ge=1, le=WIDTH_MAX, description=f"feed-forward width; 1..{WIDTH_MAX}")
    encoder_layers: int = Field(6, ge=0, le=DEPTH_MAX, description=f"0..{DEPTH_MAX}")
    decoder_layers: int = Field(6, ge=0, le=DEPTH_MAX, description=f"0..{DEPTH_MAX}")
    dropout: float = Field(0.1, ge=0.0, lt=1.0)
    attention_dropout: float = Field(0.0, ge=0.0, lt=1.0)
    ffn_dropout: float = Field(0.0, ge=0.0, lt=1.0)
    norm: Literal["post", "pre"] = "post"
    layer_norm_eps: float = Field(1e-5, gt=0.0, lt=1.0)
    activation: Literal["relu", "gelu", "swish"] = "relu"
    positions: Literal["sinusoidal", "learned"] = "sinusoidal"
    pos_layout: Literal["interleaved", "halves"] = "interleaved"
    pos_frequencies: Literal["paper", "tensor2tensor"] = Field(
        "paper",
        description="sinusoid frequencies: paper (1/10000^(2i/d)) or tensor2tensor (1/10000^(i/(d/2-1)), "
        "from 1 to exactly 1/10000: fairseq's, so M2M100's and NLLB's); sinusoidal positions only",
    )
    position_offset: int = Field(
        0,
        ge=0,
        le=POSITIONS_MAX,
        description="added to every position before its sinusoid is taken: fairseq's models (M2M100, "
        f"NLLB) number the first token padding_idx + 1 = 2; sinusoidal positions only; 0..{POSITIONS_MAX}",
    )
    max_positions: int = Field(
        1024,
        ge=1,
        le=POSITIONS_MAX,
        description=f"rows of the learned position table (positions='learned'); 1..{POSITIONS_MAX}",
    )
    # Positions drawn at random in training, for length generalisation (model/randomised_positions.py)
    position_randomisation: Literal["none", "offset", "offset_range", "subset"] = Field(
        "none",
        description="training positions: none (0..n-1); offset (k..k+n-1, k uniform in [0, n), the UT "
        "paper's); offset_range (k uniform in [0, position_range - n], so that training meets every "
        "position below position_range); subset (n sorted distinct positions of [0, position_range), "
        "Ruoss et al. 2023); evaluation positions: model.position_eval",
    )
    position_eval: Literal["dense", "spread"] = Field(
        "dense",
        description="evaluation positions: dense (0..n-1); spread (0, s, 2s, ... with "
        "s = position_range // n for a source of n tokens, each sentence its own s, its target the "
        "source's s: over the range that 'subset' training drew from, where a sorted random subset "
        "lies on average; needs position_randomisation='subset' and an encoder-decoder with "
        "sinusoidal positions)",
    )
    position_draw: Literal["shared", "per_stack", "per_step"] = Field(
        "shared",
        description="who draws randomised positions: shared (one draw per training pass; the encoder and "
        "the decoder take its first positions, so source and target position i match), per_stack "
        "(each stack its own) or per_step (a Universal Transformer's every recurrent step its own, "
        "as tensor2tensor does; per_stack for other stacks)",
    )
    position_range: int = Field(
        2048,
        ge=1,
        le=POSITIONS_MAX,
        description="positions 'subset' and 'offset_range' draw from, far beyond the training lengths; "
        f"1..{POSITIONS_MAX}",
    )
    scale_embeddings: bool = True
    tie_embeddings: Literal["none", "decoder", "all"] = "all"
    final_logits_bias: bool = Field(
        False,
        description="a fixed (never trained) output bias, as OPUS-MT models carry; "
        "`import marian` sets it (Marian's bias, and a mask on BOS, which repeats Marian's start row)",
    )
    decoder_start_row: Literal["bos", "eos"] = Field(
        "bos",
        description="the embedding row the decoder's start token (BOS) reads: its own, or EOS's, as "
        "fairseq's models (M2M100, NLLB) start decoding from </s>, so that fine-tuning trains one row for "
        "both, as theirs does; `import m2m100` sets eos",
    )
    local_window: int | None = Field(None, ge=0, le=POSITIONS_MAX, description=f"0..{POSITIONS_MAX}")
    num_classes: int | None = Field(None, ge=2, le=TOKENS_MAX, description=f"2..{TOKENS_MAX}")
    classifier: Literal["sequence", "token"] = "sequence"
    transition: Literal["ffn", "conv"] = "ffn"
    conv_kernel: int = Field(3, ge=1, le=64)
    # Syntax-aware encoder self-attention from source trees (model/syntax.py)
    syntax_mask: Literal["none", "hard", "standard", "inverse", "given"] = "none"
    syntax_apply: Literal["additive", "multiplicative"] = "multiplicative"
    omega_max: int = Field(1, ge=0, le=POSITIONS_MAX, description=f"tree distance; 0..{POSITIONS_MAX}")
    syntax_layers: list[int] | None = None
    syntax_heads: list[int] | None = None
    # Factored source tokens word|tag1|...: how word and tag embeddings are combined
    factor_combine: Literal["sum", "ffn1", "ffn2"] = "sum"
    # Universal Transformer (arch = "universal"): one shared layer per stack, applied for steps
    encoder_steps: int = Field(6, ge=1, le=100)
    decoder_steps: int = Field(6, ge=1, le=100)
    act: bool = False
    act_epsilon: float = Field(0.01, gt=0.0, lt=1.0)
    act_tau: float = Field(0.01, ge=0.0, le=1.0, description="ponder cost weight; 0..1")
    # What may keep ACT recurring (issue 91; docs/universal-transformer.md)
    act_halt_bias: float = Field(
        1.0,
        ge=-20.0,
        le=20.0,
        description="the halting unit's initial bias: 1 (tensor2tensor's) halts every position after "
        "two steps at first, -3 (p ~ 0.05) runs every position through every step; -20..20",
    )
    act_min_steps: int = Field(
        1,
        ge=1,
        le=100,
        description="steps every position takes before ACT may halt it: the halting unit is read from "
        "this step on (earlier steps weigh 0 in the output); at most each ACT stack's steps; 1..100",
    )
    act_tau_encoder: float | None = Field(
        None, ge=0.0, le=1.0, description="the encoder's ponder cost weight (default act_tau); 0..1"
    )
    act_tau_decoder: float | None = Field(
        None, ge=0.0, le=1.0, description="the decoder's ponder cost weight (default act_tau); 0..1"
    )
    act_tau_start: int = Field(
        0, ge=0, le=COUNT_MAX, description=f"updates trained without the ponder cost; 0..{COUNT_MAX}"
    )
    act_tau_ramp: int = Field(
        0,
        ge=0,
        le=COUNT_MAX,
        description="updates after act_tau_start over which the ponder cost weight rises linearly from "
        f"0 to its value (0: at once); 0..{COUNT_MAX}",
    )
    act_halt_detach: bool = Field(
        False,
        description="the halting unit reads the step's state without its gradient: what asks for "
        "fewer or more steps (the task loss through the halting weights, the ponder cost) trains the "
        "halting unit alone, not the shared layer",
    )
    act_halt_lr: float = Field(
        1.0,
        gt=0.0,
        le=100.0,
        description="the halting units' learning rate, a multiple of the schedule's (Adam moves a "
        "parameter by about the rate whatever its gradient's size); (0, 100]",
    )

    @model_validator(mode="after")
    def _heads_divide_width(self) -> ModelConfig:
        if self.d_model % self.heads:
            raise ValueError(
                f"model.d_model ({self.d_model}) must be divisible by model.heads ({self.heads})"
            )
        if self.arch == "universal" and self.kind != "encoder_decoder":
            raise ValueError("model.arch='universal' needs model.kind='encoder_decoder'")
        if self.arch == "universal" and self.act:
            fewest = min(self.encoder_steps, self.decoder_steps)
            if self.act_min_steps > fewest:
                raise ValueError(
                    f"model.act_min_steps ({self.act_min_steps}) must not exceed a stack's steps "
                    f"(encoder_steps {self.encoder_steps}, decoder_steps {self.decoder_steps}); "
                    f"allowed: 1..{fewest}"
                )
        if (
            self.arch == "transformer"
            and self.positions == "learned"
            and self.position_randomisation in ("offset_range", "subset")
            and self.position_range > self.max_positions
        ):
            raise ValueError(
                f"model.position_range ({self.position_range}) must not exceed model.max_positions "
                f"({self.max_positions}): position_randomisation='{self.position_randomisation}' indexes "
                "the learned position "
                f"table with positions up to position_range - 1; allowed: model.position_range "
                f"1..{self.max_positions}"
            )
        if self.position_eval == "spread" and (
            self.position_randomisation != "subset"
            or self.kind != "encoder_decoder"
            or (self.arch == "transformer" and self.positions != "sinusoidal")
        ):
            raise ValueError(
                "model.position_eval='spread' spreads evaluation positions over the range that "
                "model.position_randomisation='subset' trains on, with sinusoidal positions in an "
                "encoder-decoder; allowed here: model.position_eval=dense"
            )
        if self.kind == "encoder" and self.num_classes is None:
            raise ValueError("model.kind='encoder' needs model.num_classes (an integer >= 2)")
        for kind, key, depth in (
            ("encoder", "encoder_layers", self.encoder_layers),
            ("decoder", "decoder_layers", self.decoder_layers),
        ):
            if self.kind == kind and depth < 1:
                raise ValueError(f"model.kind='{kind}' needs model.{key} >= 1: it is its only stack")
        if self.syntax_mask != "none" and self.kind != "encoder_decoder":
            raise ValueError(
                f"model.syntax_mask='{self.syntax_mask}' needs model.kind='encoder_decoder' (source trees "
                "mask the encoder of an encoder-decoder)"
            )
        depth = self.encoder_steps if self.arch == "universal" else self.encoder_layers
        ranges = [
            ("syntax_layers", self.syntax_layers, depth),
            ("syntax_heads", self.syntax_heads, self.heads),
        ]
        for key, values, bound in ranges:
            bad = [v for v in values or [] if not 0 <= v < bound]
            if bad:
                raise ValueError(f"model.{key}: {bad} out of range; allowed: 0..{bound - 1}")
        return self

    @model_validator(mode="after")
    def _sinusoid_options(self) -> ModelConfig:
        """The offset and the frequencies shape the embedding's sinusoids; a learned table or a
        Universal Transformer's per-step signal would silently ignore them."""
        if (self.position_offset or self.pos_frequencies != "paper") and (
            self.arch != "transformer" or self.positions != "sinusoidal"
        ):
            raise ValueError(
                "model.position_offset and model.pos_frequencies='tensor2tensor' shape the sinusoids of "
                "model.positions='sinusoidal' with model.arch='transformer'; allowed here: "
                "model.position_offset=0, model.pos_frequencies=paper"
            )
        return self

    @property
    def d_head(self) -> int:
        return self.d_model // self.heads


TaskName = Literal[  # the generated tasks (data/tasks.py; the lte_ programs: data/programs.py)
    "copy",
    "reverse",
    "double",
    "addition",
    "addition_le",
    "lte",
    "majority",
    "updown",
    "repeat",
    "lte_program",
    "lte_control",
    "lte_addition",
]
PROGRAM_TASKS = ("lte_program", "lte_control", "lte_addition")  # Learning to Execute's program evaluation


class DataConfig(_Section):
    """Where examples come from: a prepared dataset directory or a generated task."""

    dataset: str | None = None
    task: TaskName | None = None
    task_symbols: int = Field(
        10,
        ge=2,
        le=1000,
        description="alphabet of copy, reverse, double, majority, updown and repeat; 2..1000",
    )
    task_train_min_len: int = Field(
        1, ge=1, le=TASK_LEN_MAX, description=f"shortest length of train/dev/test; 1..{TASK_LEN_MAX}"
    )
    task_train_max_len: int = Field(20, ge=1, le=TASK_LEN_MAX, description=f"1..{TASK_LEN_MAX}")
    task_test_min_len: int | None = Field(
        None,
        ge=1,
        le=TASK_LEN_MAX,
        description=f"test_long's shortest length; 1..{TASK_LEN_MAX}; default task_train_max_len + 1",
    )
    task_test_max_len: int | None = Field(
        None,
        ge=2,
        le=TASK_LEN_MAX,
        description=f"test_long's longest length, above task_train_max_len; 2..{TASK_LEN_MAX}; "
        "default twice task_train_max_len",
    )
    task_train_size: int = Field(20000, ge=1, le=10**7, description="examples; 1..10^7")
    task_eval_size: int = Field(500, ge=1, le=10**6, description="examples per eval split; 1..10^6")
    task_nesting: int = Field(2, ge=1, le=6)
    seed: int = Field(1234, ge=0, le=SEED_MAX, description=f"0..{SEED_MAX}")
    max_tokens: int = Field(4096, ge=1, le=TOKENS_MAX, description=f"tokens per batch; 1..{TOKENS_MAX}")
    max_len: int = Field(256, ge=1, le=POSITIONS_MAX, description=f"1..{POSITIONS_MAX}")
    pad_to_multiple: int = Field(
        1,
        ge=1,
        le=1024,
        description="training batches padded to a multiple of this many positions on each side (few "
        "distinct shapes for cuDNN's and cuBLAS's plans); 1 (off)..1024",
    )
    pair_temperature: float = Field(
        1.0,
        gt=0.0,
        le=100.0,
        description="a multilingual dataset: each epoch draws language pair i's share of the examples "
        "in proportion to its size n_i to the power 1/T (T = 1: every example once; larger T evens the "
        "pairs out, small pairs repeated); above 0, at most 100",
    )

    @property
    def long_max_len(self) -> int:
        """The longest length of `test_long`."""
        return self.task_test_max_len or 2 * self.task_train_max_len

    @property
    def long_min_len(self) -> int:
        """The shortest length of `test_long`."""
        return self.task_test_min_len or self.task_train_max_len + 1

    @model_validator(mode="after")
    def _one_source(self) -> DataConfig:
        """Both set used to train on the task and silently ignore the dataset."""
        if self.task is not None and self.dataset is not None:
            raise ValueError(
                f"data.task ('{self.task}') and data.dataset ('{self.dataset}') are both set; a run trains "
                "on one of them: set the other to null"
            )
        return self

    @model_validator(mode="after")
    def _task_within_budget(self) -> DataConfig:
        if self.long_max_len <= self.task_train_max_len:
            raise ValueError(
                f"data.task_test_max_len ({self.long_max_len}) must exceed data.task_train_max_len "
                f"({self.task_train_max_len}): test_long holds the longer lengths"
            )
        ranges = [
            ("task_train_min_len", self.task_train_min_len, "task_train_max_len", self.task_train_max_len),
            ("task_test_min_len", self.long_min_len, "task_test_max_len", self.long_max_len),
        ]
        for low_key, low, high_key, high in ranges:
            if low > high:
                raise ValueError(f"data.{low_key} ({low}) must not exceed data.{high_key} ({high})")
        if self.task == "addition_le" and self.task_train_max_len < 3:
            raise ValueError(
                f"data.task 'addition_le' needs data.task_train_max_len >= 3 (got "
                f"{self.task_train_max_len}): its shortest input is a digit, the separator and a digit"
            )
        if self.task is not None and self.task_symbol_estimate() > TASK_SYMBOLS_BUDGET:
            raise ValueError(
                f"data.task '{self.task}' would generate about {self.task_symbol_estimate():,} symbols; "
                f"allowed: {TASK_SYMBOLS_BUDGET:,} (lower data.task_train_size, data.task_eval_size "
                "or the task_*_max_len lengths)"
            )
        return self

    def task_symbol_estimate(self) -> int:
        """A rough count of the symbols in the task's four splits, from the longest lengths: copy,
        reverse, addition_le, majority, updown and repeat write at most 2 per unit of length (and a
        separator or a label), double and addition 3, lte 2^(nesting+1) per digit; an lte_ program
        about (length + 12) * 4^nesting symbols (constants of `length` digits, ~12 symbols of code
        around each, up to 4 operands an operation)."""
        if self.task in PROGRAM_TASKS:
            per_example = (self.task_train_max_len + 12) * 4**self.task_nesting
            return per_example * (self.task_train_size + 3 * self.task_eval_size)
        growth = (
            2 ** (self.task_nesting + 1)
            if self.task == "lte"
            else 3
            if self.task in ("addition", "double")
            else 2
        )
        evals = self.task_eval_size * (2 * self.task_train_max_len + self.long_max_len)
        return growth * (self.task_train_size * self.task_train_max_len + evals)


class TrainConfig(_Section):
    """The optimisation recipe (SPEC section 5)."""

    seed: int = Field(1, ge=0, le=SEED_MAX, description=f"0..{SEED_MAX}")
    steps: int = Field(100000, ge=1, le=COUNT_MAX, description=f"1..{COUNT_MAX}")
    lr_scale: float = Field(
        1.0, gt=0.0, le=100.0, description="multiplies the paper's schedule; above 0, at most 100"
    )
    warmup: int = Field(4000, ge=1, le=COUNT_MAX, description=f"1..{COUNT_MAX}")
    adam_betas: tuple[Beta, Beta] = (0.9, 0.98)
    adam_eps: float = Field(1e-9, gt=0.0, le=1.0)
    weight_decay: float = Field(0.0, ge=0.0, le=1.0)
    label_smoothing: float = Field(0.1, ge=0.0, lt=1.0)
    accumulate: int = Field(1, ge=1, le=1024, description="batches per step; 1..1024")
    clip_norm: float | None = Field(None, gt=0.0)
    precision: Literal["fp32", "bf16", "fp16"] = "fp32"
    master_weights: bool = Field(
        False,
        description="with precision=bf16: bf16 weights for the forward and backward passes and fp32 "
        "master weights in Adam, instead of autocast casting fp32 weights at every step",
    )
    attention_kernel: Literal["efficient", "flash", "cudnn", "math"] = Field(
        "efficient",
        description="on CUDA, the scaled-dot-product-attention kernel tried first (the others after it, "
        "where it refuses a call): efficient (memory-efficient attention: no per-shape plan), flash, "
        "cudnn (PyTorch's own first choice on Hopper GPUs, which builds a plan for each new batch shape), "
        "math (slow; the only one whose backward pass adds in the same order on every run, for GPU runs "
        "repeatable bit for bit); no effect on the CPU",
    )
    compile: bool = Field(
        False,
        description="torch.compile the model for the training passes (default mode; a second batch shape "
        "compiles once more with symbolic sizes, which serve the rest)",
    )
    prefetch: int | None = Field(
        None,
        ge=0,
        le=64,
        description="optimizer steps' batches collated ahead on a background thread (and copied to the "
        "GPU ahead of the step); 0 (off)..64; none: 2 on a GPU, 0 on the CPU (where the thread takes "
        "cores from the step: 7-10% slower measured)",
    )
    validate_every: int = Field(1000, ge=1, le=COUNT_MAX)
    validate_every_minutes: float | None = Field(None, gt=0.0)
    max_minutes: float | None = Field(None, gt=0.0)
    save_every: int = Field(1000, ge=1, le=COUNT_MAX)
    save_every_minutes: float | None = Field(None, gt=0.0)
    keep_last: int = Field(5, ge=1, le=COUNT_MAX)
    average_last: int | None = Field(
        None,
        ge=1,
        le=COUNT_MAX,
        description="at the end of training, average the last N checkpoints past the warmup into "
        "<run>/averaged, kept if it scores on dev at least as well as the best checkpoint; "
        f"none (off) or 1..{COUNT_MAX}, at most keep_last",
    )
    max_bad_steps: int = Field(5, ge=1, le=COUNT_MAX)
    log_every: int = Field(50, ge=1, le=COUNT_MAX)
    threads: int | None = Field(None, ge=1, le=1024)
    best_metric: Literal["loss", "ppl", "bleu", "chrf", "char_acc", "seq_acc", "f1", "acc"] = Field(
        "loss",
        description="the dev metric that picks the best checkpoint and drives early stopping: loss or "
        "ppl (any data), bleu or chrf (text), char_acc or seq_acc (generated tasks), f1 (parsing), "
        "acc (labels)",
    )
    best_pair: str | None = Field(
        None,
        pattern=r"^[A-Za-z][A-Za-z0-9_]{0,15}-[A-Za-z][A-Za-z0-9_]{0,15}$",
        description="a multilingual dataset: the language pair (SRC-TGT, e.g. en-de) whose dev bleu or "
        "chrf picks the best checkpoint and drives early stopping, instead of the mean over the pairs; "
        "none (the mean) or one of the dataset's pairs",
    )
    patience: int | None = Field(
        None,
        ge=1,
        le=COUNT_MAX,
        description="stop after this many validations without a better best_metric; "
        f"none (never) or 1..{COUNT_MAX}",
    )

    @model_validator(mode="after")
    def _best_pair_by_translation_scores(self) -> TrainConfig:
        if self.best_pair is not None and self.best_metric not in ("bleu", "chrf"):
            raise ValueError(
                f"train.best_pair={self.best_pair} picks the best by that pair's dev bleu or chrf; set "
                f"train.best_metric=bleu or chrf (not {self.best_metric}), or leave best_pair out"
            )
        return self

    @property
    def best_key(self) -> str:
        """The name validation logs the best metric under, less its `dev_` (bleu, bleu_en-de)."""
        return self.best_metric if self.best_pair is None else f"{self.best_metric}_{self.best_pair}"

    @model_validator(mode="after")
    def _master_weights_in_bf16(self) -> TrainConfig:
        if self.master_weights and self.precision != "bf16":
            raise ValueError(
                f"train.master_weights=true keeps bf16 weights beside fp32 ones; it needs "
                f"train.precision=bf16 (not {self.precision}), or set train.master_weights=false"
            )
        return self

    @model_validator(mode="after")
    def _average_within_kept(self) -> TrainConfig:
        if self.average_last is not None and self.average_last > self.keep_last:
            raise ValueError(
                f"train.average_last ({self.average_last}) must not exceed train.keep_last "
                f"({self.keep_last}): only the last keep_last checkpoints are kept"
            )
        return self


class DecodeConfig(_Section):
    """Search and sampling settings (SPEC section 6)."""

    beam: int = Field(4, ge=1, le=1000, description="beam size; 1..1000")
    alpha: float = Field(0.6, ge=0.0, le=10.0, description="length penalty; 0..10")
    max_len_a: float = Field(1.0, ge=0.0, le=100.0, description="output length per source token; 0..100")
    max_len_b: int = Field(
        50, ge=0, le=POSITIONS_MAX, description=f"output length beyond max_len_a's; 0..{POSITIONS_MAX}"
    )
    min_len: int = Field(
        0,
        ge=0,
        le=POSITIONS_MAX,
        description=f"minimum output length (EOS blocked before it); 0..{POSITIONS_MAX}",
    )
    nbest: int = Field(1, ge=1, description="outputs per input, best first; 1..beam")
    max_tokens: int = Field(4096, ge=1, le=TOKENS_MAX, description=f"1..{TOKENS_MAX}")
    # How outputs are found: beam search (decode/beam.py), greedy search, or sampling
    # (decode/sampling.py), to which beam, alpha and nbest do not apply.
    search: Literal["beam", "greedy", "sample"] = Field(
        "beam",
        description="beam (beam search), greedy (the most probable token at each step) or sample "
        "(draw outputs at random)",
    )
    temperature: float = Field(1.0, gt=0.0, le=100.0, description="sampling temperature; 0 < t <= 100")
    top_k: int = Field(
        0, ge=0, le=TOKENS_MAX, description=f"sample among the k most probable tokens; 0 (off)..{TOKENS_MAX}"
    )
    top_p: float = Field(
        1.0, gt=0.0, le=1.0, description="sample in the smallest set of tokens with mass >= p; 0 < p <= 1"
    )
    seed: int | None = Field(
        None, ge=0, le=SEED_MAX, description=f"sampling seed (none: torch's global RNG); 0..{SEED_MAX}"
    )
    num_samples: int = Field(1, ge=1, le=1000, description="samples per input; 1..1000")
    # decode/static.py: fixed-shape caches, and on CUDA the decoder step replayed as a CUDA graph.
    static_cache: bool = Field(
        False,
        description="fixed-shape decoder caches; on CUDA one captured graph per step (plain Transformers)",
    )

    @model_validator(mode="before")
    @classmethod
    def _sample_flag(cls, data: Any) -> Any:
        """`sample = true`, the spelling before `search` (saved in older checkpoints and configs),
        reads as `search = "sample"`; `sample = false` as the default search."""
        if isinstance(data, dict) and "sample" in data:
            data = dict(data)
            flag = data.pop("sample")
            if not isinstance(flag, bool):
                raise ValueError(f'sample: true or false, not {flag!r} (or give search = "sample")')
            if flag and data.setdefault("search", "sample") != "sample":
                raise ValueError(
                    f"sample = true and search = {data['search']!r} exclude each other; choose one"
                )
        return data

    @property
    def sample(self) -> bool:
        """Whether outputs are drawn at random (search = "sample")."""
        return self.search == "sample"

    @property
    def greedy(self) -> bool:
        """Whether each step takes the most probable token (search = "greedy")."""
        return self.search == "greedy"

    @model_validator(mode="after")
    def _nbest_within_beam(self, info: ValidationInfo) -> DecodeConfig:
        """Names the fields as the config does, or as the validation context's `name` does."""
        if self.nbest > self.beam:
            name = (info.context or {}).get("name", lambda field: f"decode.{field}")
            raise ValueError(f"{name('nbest')} ({self.nbest}) must not exceed {name('beam')} ({self.beam})")
        return self


class Config(_Section):
    """The whole configuration; saved inside every checkpoint."""

    model: ModelConfig = ModelConfig()
    data: DataConfig = DataConfig()
    train: TrainConfig = TrainConfig()
    decode: DecodeConfig = DecodeConfig()


# Model settings that change training only, not the parameters or what they compute at test time.
TRAINING_ONLY_MODEL_KEYS = (
    *("dropout", "attention_dropout", "ffn_dropout"),
    *("act_tau", "act_tau_encoder", "act_tau_decoder", "act_tau_start", "act_tau_ramp"),
    *("act_halt_bias", "act_halt_lr", "act_halt_detach"),  # what a step computes is the same
)


def architecture_differences(a: ModelConfig, b: ModelConfig) -> list[str]:
    """'key: a vs b' for every model setting that differs, training-only ones left out."""
    left, right = a.model_dump(), b.model_dump()
    return [
        f"model.{key}: {left[key]!r} vs {right[key]!r}"
        for key in left
        if key not in TRAINING_ONLY_MODEL_KEYS and left[key] != right[key]
    ]


def check_positions(model: ModelConfig, longest: int, where: str, trained: int | None = None) -> None:
    """Refuse data longer than the learned position table, or than position randomisation can
    place, before training reaches such a batch (sinusoids extend to any length). `longest` counts
    a sequence with its EOS or BOS; `trained` is the longest training sequence (default
    `longest`): randomised positions are drawn in training only, evaluation takes 0..n-1."""
    trained = longest if trained is None else trained
    if model.position_randomisation in ("offset_range", "subset") and trained > model.position_range:
        raise ConfigError(
            f"{where} has training sequences of {trained} positions (with EOS/BOS) but "
            f"model.position_randomisation='{model.position_randomisation}' draws them from "
            "model.position_range="
            f"{model.position_range}; allowed: model.position_range from {trained} to {POSITIONS_MAX}"
        )
    # a random offset k < n shifts a training sequence of n positions up to position 2n - 2
    needed = max(2 * trained - 1 if model.position_randomisation == "offset" else trained, longest)
    if model.positions == "learned" and model.arch == "transformer" and needed > model.max_positions:
        shifted = " shifted by model.position_randomisation='offset'" if needed > longest else ""
        raise ConfigError(
            f"{where} has sequences of {longest} positions (with EOS/BOS){shifted}, needing {needed}, "
            f"but the learned position table holds model.max_positions={model.max_positions}; allowed: "
            f"model.max_positions from {needed} to {POSITIONS_MAX}, or model.positions='sinusoidal'"
        )
