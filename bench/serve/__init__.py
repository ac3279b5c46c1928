"""`transduce serve` under load: throughput, latency under a maximal request, a screenshot."""
