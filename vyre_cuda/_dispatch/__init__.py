"""Dispatch paths: prepared programs, host, resident, pipelines, sequences, graphs, coarsening policy."""
