"""The keys and recordings of repeated library calls (``vyre.lib.repeat``), on the CPU: what makes
two calls the same, and when a call can be repeated at all. (Repeats running on CuPy and torch
arrays are GPU tests: ``tests/gpu/test_lib_inplace.py``.)"""

from __future__ import annotations

import numpy as np

from vyre.lib.repeat import Ran, describe, record


def test_scalars_are_keyed_by_type_and_value():
    assert describe((1, "add"), {}) == describe((1, "add"), {})
    assert describe((1,), {}) != describe((True,), {})  # 1 == True, but not the same argument
    assert describe((1,), {}) != describe((1.0,), {})
    assert describe((0.0,), {}) != describe((-0.0,), {})  # equal floats that differ in sign
    assert describe((float("nan"),), {}) == describe((float("nan"),), {})
    assert describe((), {"op": "add"}) != describe(("add",), {})  # by keyword or by position
    assert describe((np.dtype(np.uint32),), {}) == describe((np.dtype(np.uint32),), {})


def test_tuples_of_plain_values_are_keyed_by_value_and_element_types():
    assert describe((), {"key_range": (0, 256)}) == describe((), {"key_range": (0, 256)})
    assert describe((), {"key_range": (0, 256)}) != describe((), {"key_range": (0, 257)})
    assert describe(((1, 2),), {}) != describe(((True, 2),), {})  # equal tuples of other types
    assert describe(((0.5, 1),), {}) is None  # floats inside a tuple: not described
    assert describe((((1,),),), {}) is None  # nor nested tuples


def test_stream_is_left_to_the_caller():
    assert describe((1,), {"stream": object()}) == describe((1,), {})


def test_host_data_and_other_objects_are_not_described():
    assert describe((np.zeros(4, np.uint32),), {}) is None
    assert describe(([1, 2],), {}) is None
    assert describe((object(),), {}) is None
    assert describe((np.uint32(3),), {}) is None  # numpy scalars: not plain values


def test_record_needs_the_compiled_result_and_every_array_among_the_arguments():
    a, b, out = object(), object(), object()
    ran = Ran(entry="entry", shape=list, result=out, data=(a, b))
    repeat = record(ran, out, (a,), {"values": b})
    assert repeat is not None and repeat.positions == (0, "values") and repeat.pick is None
    assert record(ran, object(), (a,), {"values": b}) is None  # the function returned something else
    assert record(ran, out, (a,), {}) is None  # an array the call made itself, not an argument
    assert record(None, out, (a, b), {}) is None


def test_record_of_one_item_of_a_tuple_result():
    a, first, second = object(), object(), object()
    ran = Ran(entry="entry", shape=tuple, result=(first, second), data=(a,))
    assert record(ran, second, (a,), {}).pick == 1
    assert record(ran, ran.result, (a,), {}).pick is None
    assert record(ran, (first, second), (a,), {}) is None  # an equal tuple the function made itself


def test_resident_arrays_are_keyed_by_dtype_and_length_never_by_handle():
    """Two ``ResidentArray``s of one dtype and length over different handles make one key (the
    compiled call re-points at each); another length or dtype makes another; a resident array with
    host data beside it is not described (the full path copies the host data)."""
    from vyre.lib import ResidentArray
    from vyre.reference import ReferenceBackend

    be = ReferenceBackend()
    a, b = be.allocate_resident(4096), be.allocate_resident(8192)
    first = describe((ResidentArray(a, np.uint32, 1000), "add"), {})
    assert first is not None and first[2] is True and len(first[1]) == 1
    assert describe((ResidentArray(b, np.uint32, 1000), "add"), {})[0] == first[0]
    assert describe((ResidentArray(b, np.uint32, 1001), "add"), {})[0] != first[0]
    assert describe((ResidentArray(a, np.int32, 1000), "add"), {})[0] != first[0]
    with_init = describe((ResidentArray(a, np.uint32, 10),), {"init": ResidentArray(b, np.uint32, 1)})
    assert with_init is not None and with_init[2] and len(with_init[1]) == 2
    assert describe((ResidentArray(a, np.uint32, 10), np.zeros(10, np.uint32)), {}) is None
    assert describe((None, 1), {})[2] is False  # None is a plain value, not a ResidentArray
