"""Differential fuzzing of backends against the reference oracle, with shrinking and a corpus."""

from vyre.fuzz.corpus import CorpusCase, read_corpus, write_case
from vyre.fuzz.differential import FuzzReport, fuzz, mismatch
from vyre.fuzz.shrink import shrink

__all__ = ["CorpusCase", "FuzzReport", "fuzz", "mismatch", "read_corpus", "shrink", "write_case"]
