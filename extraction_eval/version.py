"""The package's version, in a module of its own: the library records it with every run
without importing the package root (the public API, above every layer)."""

__version__ = "0.1.0"
