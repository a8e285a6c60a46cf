"""bucketd's benchmarks: measured side by side with the machine's limits, in one run."""
