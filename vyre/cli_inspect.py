"""``vyre ops`` and ``vyre plugins``: what the installed plugins contribute, as tables."""

from __future__ import annotations

from vyre.driver import registry
from vyre.ops import OpDef, registered_ops


def op_kind(op: OpDef) -> str:
    """``composed`` (IR expansion, runs everywhere) or ``primitive`` (numpy semantics, needs lowerings)."""
    return "composed" if op.expand is not None else "primitive"


def runs_on(op: OpDef, backend_id: str) -> str:
    """``yes``, ``no`` or ``?``: whether ``backend_id`` runs ``op``.

    A composed op runs on every backend (it is expanded into plain IR). A primitive op runs on the
    reference oracle (through its numpy function) and on each backend whose registration lists it
    in ``supported_ops``; a registration without ``supported_ops`` declares nothing (``?``).
    """
    if op.expand is not None or backend_id == registry.REFERENCE_ID:
        return "yes"
    reg = registry.registration(backend_id)
    if reg is None or reg.supported_ops is None:
        return "?"
    return "yes" if op.id in reg.supported_ops else "no"


def list_ops() -> int:
    """Print every op registered for ``Expr.call``: signature, kind and the backends that run it."""
    ops = sorted(registered_ops().values(), key=lambda op: op.id)
    backends = [b.id for b in registry.registered_backends() if b.dispatches]
    if not ops:
        print("(no ops registered: install an op pack such as plugins/vyre-ops-bits)")
    else:
        width = max(len(op.id) for op in ops)
        print(f"{'op':<{width}}  {'signature':<24} {'kind':<10} " + " ".join(f"{b:<5}" for b in backends) + "  doc")
        for op in ops:
            signature = f"({', '.join(t.value for t in op.arg_types)}) -> {op.result_type.value}"
            cells = " ".join(f"{runs_on(op, b):<{max(5, len(b))}}" for b in backends)
            print(f"{op.id:<{width}}  {signature:<24} {op_kind(op):<10} {cells}  {op.doc}")
    for problem in registry.plugin_errors():
        print(f"warning: {problem}")
    return 0


def plugin_rows() -> list[tuple[str, str, str]]:
    """``(name, distribution, hooks)`` of every plugin the plugin manager knows, disabled ones included."""
    pm = registry.get_plugin_manager()
    dists = {id(plugin): f"{dist.metadata['name']} {dist.version}" for plugin, dist in pm.list_plugin_distinfo()}
    rows = []
    for name, plugin in sorted(pm.list_name_plugin(), key=lambda item: item[0]):
        if plugin is None:
            rows.append((name, "-", "(disabled by VYRE_DISABLE_PLUGINS)"))
            continue
        if name not in registry.BUILTIN_PLUGINS and id(plugin) not in dists:
            continue  # registered at run time by code in this process, not an installed plugin
        hooks = sorted(caller.name for caller in pm.get_hookcallers(plugin) or ())
        dist = dists.get(id(plugin), "built-in")
        rows.append((name, dist, ", ".join(hooks) or "(no hooks)"))
    return rows


def list_plugins() -> int:
    """Print every loaded plugin with its distribution and the hooks it implements."""
    rows = plugin_rows()
    name_w = max([len("plugin")] + [len(r[0]) for r in rows])
    dist_w = max([len("distribution")] + [len(r[1]) for r in rows])
    print(f"{'plugin':<{name_w}}  {'distribution':<{dist_w}}  hooks")
    for name, dist, hooks in rows:
        print(f"{name:<{name_w}}  {dist:<{dist_w}}  {hooks}")
    for problem in registry.plugin_errors():
        print(f"warning: {problem}")
    return 0


__all__ = ["list_ops", "list_plugins", "op_kind", "plugin_rows", "runs_on"]
