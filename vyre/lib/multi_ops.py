"""Library calls over every device of a host: ``reduce``, ``histogram``, ``inclusive_scan``, ``sort``.

Each takes a host array (split into one contiguous part per device, results assembled on the
host) or a ``Sharded`` value / list of per-device arrays (results stay on the devices, in the
same form), and runs the one-device ``vyre.lib`` function on every part at once (one thread per
device, or on device parts launched in turn from the calling thread, see below), with
``backend=`` that device's backend:

- ``reduce``: per-device reductions, the partials combined (see below).
- ``histogram``: per-device counts, summed (u32, wrapping like the device).
- ``inclusive_scan``: per-device totals, each device's carry (the totals before it) combined,
  then each device scans its part starting from its carry (below).
- ``sort``: sample sort: splitters from a sample of every part, each device cuts its part into
  one piece per destination (keys in ``[splitter[j-1], splitter[j])``), the pieces move by peer
  copies, each device sorts what it received with ``vyre.lib.sort``. Device ``j`` ends with the
  j-th range of the sorted keys (parts of unequal length).

Partials (``reduce``, ``histogram``) are combined on a device when every part is a device array
(``cuda``; a host input is first copied to the devices, as ``sort`` does): every device's call is
queued in turn from the calling thread with no host wait, then the other devices' partials go
to the first device by peer copies and are combined there (``device_arrays.combine_on``); only
the final result crosses to the host, and only for a host input. ``inclusive_scan`` passes its
carries the same way: device k's carry is made on device k from the totals of the devices before
it (peer copies, ordered through events, on the stream its scan runs on) and its scan reads it
there (``init=`` a device array), so no device waits on the host. Parts that are numpy arrays
(backends without devices: the oracle) have their partials and carries combined on the host with
numpy.

Integer results equal numpy's exactly; float32 sums combine partials in another order than one
device does.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from vyre.driver.errors import InvalidProgram
from vyre.lib import _histogram, _scan, _select, _sort
from vyre.lib.multi_devices import UFUNCS, backends_for
from vyre.lib.multi_devices import each as _each
from vyre.lib.sharded import (
    Sharded,
    as_sharded,
    concat_on,
    device_index,
    device_ops,
    fetch_into,
    is_device_array,
    put,
    same_kind,
    to_host,
)

SAMPLE_PER_PART = 4096  # keys sampled from each part to choose the sort's splitters


class _Split:
    """The parts of one call's input, their backends, and how to give results back."""

    def __init__(self, x: object, devices: Sequence[object] | None, what: str) -> None:
        sharded, self.as_list = as_sharded(x)
        self.sharded = sharded
        if sharded is not None:
            if devices is not None and len(devices) != len(sharded.parts):
                raise InvalidProgram(f"devices= names {len(devices)} devices but {what}'s input has "
                                     f"{len(sharded.parts)} parts",
                                     "leave devices=None: a sharded input brings its own.")
            self.parts = list(sharded.parts)
            self.backends = backends_for(sharded.devices)
            return
        if is_device_array(x):
            raise InvalidProgram(f"{what} got a single device array", f"pass a host array, multi.shard(x) or a list of "
                                 f"per-device arrays; for one device call vyre.lib.{what.split('.')[-1]} directly.")
        host = np.asarray(x)
        if host.ndim != 1:
            raise InvalidProgram(f"{what} takes a 1-D array, got shape {host.shape}", "flatten it with x.ravel().")
        self.backends = backends_for(devices)
        self.parts = [host[lo:hi] for lo, hi in bounds(host.size, len(self.backends), 1)]
        self.host = host

    @property
    def on_host(self) -> bool:
        return self.sharded is None

    def pairs(self) -> list[tuple[Any, Any]]:
        return list(zip(self.backends, self.parts))

    @property
    def on_devices(self) -> bool:
        """Every part is a device array: the calls are queued in turn and combined on the devices."""
        return all(is_device_array(p) for p in self.parts)

    def each(self, call: Any, *per_part: Sequence[Any]) -> list[Any]:
        """``call(part, backend, *extras)`` per device (``extras``: that part's item of each of
        ``per_part``), at once, each with its part's device current."""
        return _each(_rows(self, per_part), lambda row: _on_device_of(row[1], lambda: call(row[1], row[0], *row[2:])))

    def to_devices(self) -> None:
        """A host input's parts onto their devices, through each backend's pinned chunk ring
        (they stay numpy on backends without devices)."""
        if self.on_host:
            self.parts = _each(self.pairs(), lambda bp: put(*bp))

    def partials(self, call: Any, *per_part: Sequence[Any]) -> list[Any]:
        """``call(part, backend, *extras)`` per device (as ``each``). When every part is a device
        array: in turn from the calling thread with the part's device current, each call queued on
        that device's current stream with no host wait (so the devices run at once); else one
        thread per device."""
        if not self.on_devices:
            return self.each(call, *per_part)
        return [_on_device_of(row[1], lambda row=row: call(row[1], row[0], *row[2:])) for row in _rows(self, per_part)]

    def combine(self, partials: Sequence[Any], ufunc: np.ufunc) -> Any:
        """Equal-shaped per-device partials combined elementwise with ``ufunc``: on the first
        device when all are device arrays (peer copies, then the ufunc there: a device array of
        that device, no host wait), else on the host with numpy (integers wrap)."""
        if all(is_device_array(p) for p in partials):
            return device_ops(self.backends[0]).combine_on(list(partials), [device_index(p) for p in partials],
                                                           ufunc.__name__)
        stacked = np.stack([to_host(p) for p in partials])
        return ufunc.reduce(stacked, axis=0, dtype=stacked.dtype)

    def carries(self, totals: Sequence[Any], ufunc: np.ufunc) -> list[Any]:
        """Per part, the totals of the parts before it combined in order with ``ufunc`` (None for
        an empty part or one with none before it; a None total, an empty part's, is skipped). On the devices
        when every part is a device array: part k's carry is a device array of its device, made
        there by peer copies and the ufunc on the stream its calls run on (``combine_on``), with
        no host wait; else a numpy scalar."""
        carries: list[Any] = []
        before: list[Any] = []
        for part, total in zip(self.parts, totals, strict=True):
            carries.append(self._carry(before, part, ufunc) if before and int(part.shape[0]) else None)
            if total is not None:
                before.append(total)
        return carries

    def _carry(self, totals: list[Any], part: Any, ufunc: np.ufunc) -> Any:
        if self.on_devices:
            return device_ops(self.backends[0]).combine_on(totals, [device_index(t) for t in totals], ufunc.__name__,
                                                           to=device_index(part), like=part)
        running = to_host(totals[0])  # 1-element arrays: integers wrap silently, as on the device
        for total in totals[1:]:
            running = ufunc(running, to_host(total))
        return running[0]

    def fetch(self, value: Any) -> np.ndarray:
        """A combined value as a host array (a device one downloaded through the first backend)."""
        if not is_device_array(value):
            return np.asarray(value)
        out = np.empty(int(value.shape[0]), np.dtype(str(value.dtype)))
        fetch_into(self.backends[0], value, out)
        return out

    def result(self, parts: Sequence[Any]) -> Any:
        """Per-device results as the input came: one host array, a ``Sharded`` or a list."""
        if self.on_host:
            out = np.empty(sum(int(p.shape[0]) for p in parts), np.dtype(str(parts[0].dtype)))
            offsets = np.cumsum([0] + [int(p.shape[0]) for p in parts])
            _each(list(range(len(parts))),
                  lambda k: fetch_into(self.backends[k], parts[k], out[offsets[k]:offsets[k + 1]]))
            return out
        return same_kind(Sharded(parts, self.sharded.devices), self.as_list)


def _rows(split: _Split, per_part: Sequence[Sequence[Any]]) -> list[tuple[Any, ...]]:
    """``(backend, part, *extras)`` per device: ``extras`` that part's item of each of ``per_part``."""
    return list(zip(split.backends, split.parts, *per_part))


def _on_device_of(part: Any, work: Any) -> Any:
    """``work()`` with ``part``'s device current (CuPy kernels and allocations run there)."""
    index = device_index(part) if is_device_array(part) else None
    if index is None:
        return work()
    return device_ops().run_on(index, work)


def bounds(n: int, parts: int, align: int) -> list[tuple[int, int]]:
    """``n`` elements as ``parts`` contiguous ranges, each starting at a multiple of ``align``."""
    per = -(-n // parts // align) * align if n else 0
    return [(min(k * per, n), n if k == parts - 1 else min((k + 1) * per, n)) for k in range(parts)]


def shard(x: object, devices: Sequence[object] | None = None, *, align: int = 256) -> Sharded:
    """The host array ``x`` as a ``Sharded`` value: one contiguous part per device (every part but
    the last a multiple of ``align`` elements, e.g. the workgroup size of the programs it feeds),
    each copied to its device (numpy parts on backends without devices)."""
    if isinstance(align, bool) or not isinstance(align, int) or align < 1:
        raise InvalidProgram(f"align={align!r} is not a positive element count", "pass align=256 (a workgroup size).")
    if is_device_array(x):
        x = to_host(x)
    host = np.ascontiguousarray(x)
    if host.ndim != 1:
        raise InvalidProgram(f"multi.shard takes a 1-D array, got shape {host.shape}", "flatten it with x.ravel().")
    ids = list(devices) if devices is not None else None
    backends = backends_for(ids)
    parts = _each(list(zip(backends, bounds(host.size, len(backends), align))),
                  lambda item: put(item[0], host[item[1][0]:item[1][1]]))
    return Sharded(parts, ids if ids is not None else backends)


def reduce(x: object, op: str = "add", *, devices: Sequence[object] | None = None) -> np.generic:
    """``op`` over every element (as ``vyre.lib.reduce``), a numpy scalar."""
    split = _Split(x, devices, "multi.reduce")
    split.to_devices()
    partials = split.partials(lambda part, backend: _scan.reduce(part, op, backend=backend).reshape(1))
    dtype = np.dtype(str(partials[0].dtype).replace("torch.", ""))
    ufunc = {"min": np.fmin, "max": np.fmax}.get(op, UFUNCS[op]) if dtype.kind == "f" else UFUNCS[op]
    return split.fetch(split.combine(partials, ufunc))[0]


def histogram(x: object, bins: int, *, devices: Sequence[object] | None = None) -> Any:
    """u32 counts of each value in ``[0, bins)`` (as ``vyre.lib.histogram``): numpy for a host
    input, an array of the first device for a sharded one (CuPy on ``cuda``)."""
    split = _Split(x, devices, "multi.histogram")
    split.to_devices()
    counts = split.combine(split.partials(lambda part, backend: _histogram.histogram(part, bins, backend=backend)),
                           np.add)
    if split.on_host:
        return split.fetch(counts)
    return counts if is_device_array(counts) else put(split.backends[0], counts)


def inclusive_scan(x: object, op: str = "add", *, devices: Sequence[object] | None = None) -> Any:
    """``out[i] = x[0] op ... op x[i]`` (as ``vyre.lib.inclusive_scan``), in the input's form.

    Every device but the last reduces its part; each device's carry is the combination of the
    totals before it (``_Split.carries``: on that device for device parts); every device then
    scans its part with its carry folded in (``init=``, a device array for device parts): no
    extra pass over the data and, for device parts, no host wait."""
    split = _Split(x, devices, "multi.inclusive_scan")
    split.to_devices()
    ufunc = UFUNCS[op]
    needed = [k < len(split.parts) - 1 for k in range(len(split.parts))]  # the last part's total: unused
    totals = split.partials(lambda part, backend, need: _scan.reduce(part, op, backend=backend).reshape(1)
                            if need and int(part.shape[0]) else None, needed)
    carries = split.carries(totals, ufunc)  # every carry queued before any scan: no device waits on another's scan
    scans = split.partials(lambda part, backend, carry: _scan.inclusive_scan(part, op, init=carry, backend=backend),
                           carries)
    return split.result(scans)


def sort(x: object, *, devices: Sequence[object] | None = None) -> Any:
    """The keys in ascending order (as ``vyre.lib.sort``: u32, i32, f32): a host array for a host
    input; for a sharded input a sharded result whose part ``j`` is the j-th range of the sorted
    keys, on device ``j`` (the parts' lengths follow the data)."""
    split = _Split(x, devices, "multi.sort")
    split.to_devices()
    if len(split.parts) == 1:
        return split.result(split.each(lambda part, backend: _sort.sort(part, backend=backend)))
    splitters = _splitters(split.parts)
    pieces = split.each(lambda part, backend: _cut(part, splitters, len(split.parts), backend))
    homes = [device_index(p) for p in split.parts]
    received = _each(list(range(len(homes))), lambda j: concat_on(homes[j], [row[j] for row in pieces]))
    pieces.clear()  # the sent pieces are no longer needed: free them before the local sorts
    split.parts = received
    return split.result(split.each(lambda part, backend: _sort.sort(part, backend=backend)))


def _splitters(parts: Sequence[Any]) -> np.ndarray:
    """``len(parts) - 1`` keys cutting the sorted keys into ranges of about equal size (from a
    sample of every part; NaN never chosen). Any splitters give exact results; good ones balance."""
    samples = []
    for part in parts:
        n = int(part.shape[0])
        if n:
            samples.append(to_host(part[::max(1, n // SAMPLE_PER_PART)]))
    dtype = np.dtype(str(parts[0].dtype))
    sample = np.sort(np.concatenate(samples)) if samples else np.zeros(0, dtype)
    if sample.dtype.kind == "f":
        sample = sample[~np.isnan(sample)]
    if not sample.size:
        return np.zeros(0, dtype)
    return sample[[len(sample) * j // len(parts) for j in range(1, len(parts))]]


def _cut(part: Any, splitters: np.ndarray, parts: int, backend: Any) -> list[Any]:
    """``part``'s keys in ``parts`` pieces, one per destination: piece j holds the keys that are
    not below splitter j-1 and are below splitter j (NaN is below nothing: it goes to the last).
    Device parts are cut by the library's stable compactions (one read of the part per piece)."""
    if not splitters.size:  # nothing to sample (empty or all NaN): everything goes to the last device
        return [part[:0]] * (parts - 1) + [part]
    if isinstance(part, np.ndarray):
        return _pieces(part, splitters)
    lows = [_lowest(splitters.dtype), *splitters[:-1]]
    pieces = [_select.select_if(part, lo, hi, backend=backend) for lo, hi in zip(lows, splitters)]
    rest = ~(part < splitters[-1])  # not below the last splitter, NaN included
    pieces.append(_select.select(part, rest.view(np.uint8), backend=backend))
    return pieces


def _lowest(dtype: np.dtype) -> Any:
    """The least value of ``dtype`` (-inf for floats): ``lo`` of the first piece."""
    return dtype.type(-np.inf) if dtype.kind == "f" else np.iinfo(dtype).min


def _pieces(part: np.ndarray, splitters: np.ndarray) -> list[np.ndarray]:
    pieces, below_prev = [], None
    for s in splitters:
        below = part < s
        pieces.append(part[below if below_prev is None else below & ~below_prev])
        below_prev = below
    pieces.append(part[~below_prev])
    return pieces


__all__ = ["bounds", "histogram", "inclusive_scan", "reduce", "shard", "sort"]
