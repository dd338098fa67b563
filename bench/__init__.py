"""feedline's benchmarks. A package so that `bench.common` (the helpers every
benchmark script shares) imports by path from any interpreter: a script puts
the repository root first on sys.path, and this regular package wins over
any `bench` module an environment may have installed."""
