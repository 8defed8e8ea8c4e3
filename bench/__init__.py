"""er's benchmarks: ``python -m bench <name> [args...]`` runs ``bench/bench_<name>.py``."""
