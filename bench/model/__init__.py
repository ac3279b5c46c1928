"""The model's own costs: encoder time and memory against length, full and local attention."""
