"""CUDA runtime: device, errors, caches, module loading, memory pools, launch, telemetry, profiler."""
