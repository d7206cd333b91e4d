"""ehrbench: reproducible EHR agent benchmarks."""
