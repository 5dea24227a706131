"""TFRecord Catalog's benchmarks: not part of the test suite, run one as a module from the
repository root (``python -m benchmarks.bench_format --quick``). Every benchmark imports the
shared ``benchmarks.harness`` and no other benchmark; benchmarks/README.md says what each
one measures."""
