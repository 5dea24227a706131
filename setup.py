"""The optional C extension: built where a C compiler is, else skipped (``optional=True``),
and catalog/tfrecord/native.py falls back to Python with the same results. Everything else
about the package is in pyproject.toml."""

from setuptools import Extension, setup

setup(ext_modules=[Extension("catalog.tfrecord._native", ["catalog/tfrecord/_native.c"], optional=True)])
