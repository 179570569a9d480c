"""Entry point ``trace`` (group ``vyre``): the tracer, or a hook-less stand-in when tracing is off."""

from vyre_trace.tracer import from_environment

plugin = from_environment()
