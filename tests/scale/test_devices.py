"""``vyre.devices()``: devices of backends whose registration lists them; the oracle is not listed."""

from __future__ import annotations

import pytest

import vyre
from vyre.driver.errors import BackendUnavailable
from vyre.driver.registry import BackendRegistration, get_plugin_manager


class ListingPlugin:
    """A plugin whose backends list devices: two good ones, one with no driver, one broken."""

    @vyre.hookimpl
    def vyre_register_backends(self) -> list[BackendRegistration]:
        def no_driver() -> list:
            raise BackendUnavailable("no driver", "install one.")

        def broken() -> list:
            raise RuntimeError("listing bug")

        def start(device: int | None = None):
            from vyre.reference.backend import ReferenceBackend

            return ReferenceBackend()

        return [
            BackendRegistration("twin", 40, start, devices=lambda: [{"index": 1, "name": "B", "memory_bytes": 2},
                                                                    {"index": 0, "name": "A"}]),
            BackendRegistration("nodriver", 41, start, devices=no_driver),
            BackendRegistration("broken", 42, start, devices=broken),
            BackendRegistration("silent", 43, start, dispatches=False, devices=lambda: [{"index": 0}]),
        ]


@pytest.fixture
def listing_plugin():
    pm = get_plugin_manager()
    plugin = ListingPlugin()
    pm.register(plugin, name="test-listing")
    yield
    pm.unregister(plugin)


def test_no_gpu_machine_lists_no_oracle() -> None:
    assert all(d.backend != "reference" for d in vyre.devices())


def test_listing_backends_and_their_failures(listing_plugin) -> None:
    with pytest.warns(UserWarning, match="broken.*listing bug"):
        found = [d for d in vyre.devices() if d.backend != "cuda"]
    assert [(d.id, d.name, d.memory_bytes) for d in found] == [("twin:1", "B", 2), ("twin:0", "A", None)]
    assert found[0].details["memory_bytes"] == 2
