"""vyre-trace: records every vyre dispatch through the dispatch hooks when ``VYRE_TRACE=1``."""

from vyre_trace.tracer import Tracer, TraceRecord, chrome_trace, records, write_chrome_trace

__all__ = ["TraceRecord", "Tracer", "chrome_trace", "records", "write_chrome_trace"]
