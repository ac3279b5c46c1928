"""transduce: Transformer and Universal Transformer sequence transduction."""

__version__ = "0.1.0"
