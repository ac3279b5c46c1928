"""The UT paper's algorithmic tasks: length generalisation of the Transformer, UT and UT+ACT."""
