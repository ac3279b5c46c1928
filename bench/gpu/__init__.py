"""The check for a lent GPU: gpu.sh runs the `gpu` tests, the throughput benchmark and a real run."""
