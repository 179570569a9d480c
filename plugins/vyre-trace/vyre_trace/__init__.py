"""vyre-trace: records every vyre dispatch through the dispatch hooks when ``VYRE_TRACE=1``."""

from vyre_trace.tracer import Tracer, TraceRecord, records

__all__ = ["TraceRecord", "Tracer", "records"]
