"""Differential fuzzing of backends against the reference oracle, with shrinking and a corpus."""

from vyre.fuzz.corpus import CorpusCase, History, read_case, read_corpus, write_case
from vyre.fuzz.differential import FuzzReport, fuzz, mismatch, replay
from vyre.fuzz.shrink import shrink

__all__ = ["CorpusCase", "FuzzReport", "History", "fuzz", "mismatch", "read_case", "read_corpus", "replay", "shrink",
           "write_case"]
