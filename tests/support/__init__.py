"""What the suites and the benchmarks share: harness, scenario, generators, fault injection."""
