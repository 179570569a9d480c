"""SAXPY kernel variants side by side with torch: why the emitter loads ``y`` through the read-only cache.

Run on a GPU machine: ``python benchmarks/saxpy_variants.py``. For coarsening factors 1, 2, 4 and
8 it times the emitted SAXPY kernel as it is, the same PTX with the load of ``y`` forced to plain
``ld.global`` (what codegen 1 emitted), and a hand-written PTX kernel that issues all loads of its
K elements before any store; torch's ``y.add_(x, alpha=a)`` and the device copy run in the same
process. Each variant's result is checked against numpy, and the order of global loads (LDG) and
stores (STG) in its SASS is printed when ``cuobjdump`` is installed. Files go to ``$OUT`` (or a
temporary directory). See docs/benchmarks.md.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from vyre_cuda import emit_ptx, entry_name, param_block_layout  # noqa: E402
from vyre_cuda.bench import device_ms, saxpy_program  # noqa: E402
from vyre_cuda.testing import param_name  # noqa: E402

N = 1 << 26
BLOCK = 256
REPS = 30


def coherent_y(ptx: str) -> str:
    """The PTX with every read-only-cache load of a buffer turned back into a plain one, except x/alpha."""
    lines = ptx.split("\n")
    y_base = next(ln.split()[1].rstrip(",") for ln in lines if "cvta.to.global.u64" in ln
                  and ln.rstrip(";").endswith(_param_register(lines, 2)))
    return "\n".join(ln.replace("ld.global.nc.u32", "ld.global.u32") if _addresses(ln, y_base, lines) else ln
                     for ln in lines)


def _param_register(lines: list[str], index: int) -> str:
    return next(ln.split()[1].rstrip(",") for ln in lines if f"[{param_name(index)}]" in ln)


def _addresses(line: str, base: str, lines: list[str]) -> bool:
    """Whether a predicated load's address register was computed from ``base`` (add.s64 d, base, off)."""
    m = re.search(r"ld\.global\.nc\.u32 %r\d+, \[(%rd\d+)\]", line)
    if not m or not line.strip().startswith("@"):
        return False
    return any(ln.strip().startswith(f"add.s64 {m.group(1)}, {base},") for ln in lines)


def hoisted(k: int) -> str:
    """Hand-written coarsened SAXPY: the K iterations unrolled, every load issued before any store."""
    out = [".version 7.8", ".target sm_90", ".address_size 64",
           f".visible .entry {entry_name(saxpy_program())}(",
           ".param .u64 p0, .param .u64 p1, .param .u64 p2, .param .u64 p3)", "{",
           ".reg .pred %p<64>;", ".reg .b32 %r<200>;", ".reg .b64 %rd<100>;", ".reg .f32 %f<100>;",
           "ld.param.u64 %rd1, [p3]; cvta.to.global.u64 %rd1, %rd1;",
           "ld.param.u64 %rd2, [p0]; cvta.to.global.u64 %rd2, %rd2;",
           "ld.param.u64 %rd3, [p1]; cvta.to.global.u64 %rd3, %rd3;",
           "ld.param.u64 %rd4, [p2]; cvta.to.global.u64 %rd4, %rd4;",
           "ld.global.nc.u32 %r1, [%rd1+16]; ld.global.nc.u32 %r2, [%rd1+8];",
           "ld.global.nc.u32 %r3, [%rd1+12]; ld.global.nc.u32 %r9, [%rd1+4];",
           "mov.u32 %r4, %ctaid.x; mov.u32 %r5, %ntid.x; mov.u32 %r6, %tid.x;",
           f"mul.lo.u32 %r7, %r4, {k};",
           "setp.gt.u32 %p60, %r9, 0; mov.f32 %f0, 0f00000000; @%p60 ld.global.nc.f32 %f0, [%rd2];"]
    for j in range(k):
        out += [f"add.u32 %r{20 + j}, %r7, {j};", f"setp.lt.u32 %p{j}, %r{20 + j}, %r1;",
                f"mad.lo.u32 %r{40 + j}, %r{20 + j}, %r5, %r6;",
                f"setp.lt.u32 %p{20 + j}, %r{40 + j}, %r2;", f"and.pred %p{20 + j}, %p{20 + j}, %p{j};",
                f"setp.lt.u32 %p{40 + j}, %r{40 + j}, %r3;", f"and.pred %p{40 + j}, %p{40 + j}, %p{j};",
                f"mul.wide.u32 %rd{10 + j}, %r{40 + j}, 4;", f"add.s64 %rd{30 + j}, %rd3, %rd{10 + j};",
                f"add.s64 %rd{50 + j}, %rd4, %rd{10 + j};",
                f"mov.f32 %f{10 + j}, 0f00000000;", f"@%p{20 + j} ld.global.nc.f32 %f{10 + j}, [%rd{30 + j}];",
                f"mov.f32 %f{30 + j}, 0f00000000;", f"@%p{40 + j} ld.global.f32 %f{30 + j}, [%rd{50 + j}];"]
    for j in range(k):
        out += [f"mul.rn.f32 %f{50 + j}, %f0, %f{10 + j};", f"add.rn.f32 %f{70 + j}, %f{50 + j}, %f{30 + j};",
                f"@%p{40 + j} st.global.f32 [%rd{50 + j}], %f{70 + j};"]
    return "\n".join([*out, "ret;", "}", ""])


def variants() -> dict[str, tuple[str, int]]:
    """name -> (PTX, coarsening factor)."""
    program = saxpy_program()
    out: dict[str, tuple[str, int]] = {}
    for k in (1, 2, 4, 8):
        ptx = emit_ptx(program, sm="90", ptx_version="7.8", coarsen=k)
        out[f"emitted x{k}"] = (ptx, k)
        out[f"emitted x{k}, plain ld of y"] = (coherent_y(ptx), k)
    for k in (2, 4, 8):
        out[f"hand-hoisted x{k}"] = (hoisted(k), k)
    return out


def sass_order(ptx_path: Path) -> str:
    """``LDG``/``STG`` sequence of the kernel's SASS ('' without ptxas or cuobjdump)."""
    if not (shutil.which("ptxas") and shutil.which("cuobjdump")):
        return ""
    cubin = ptx_path.with_suffix(".cubin")
    subprocess.run(["ptxas", "--gpu-name", "sm_90", "-o", str(cubin), str(ptx_path)], check=True)
    text = subprocess.run(["cuobjdump", "-sass", str(cubin)], capture_output=True, text=True, check=True).stdout
    return " ".join(m.group(1) for m in re.finditer(r"\s(LDG|STG)\.", text))


def main() -> None:
    import cupy
    import torch

    out_dir = Path(os.environ.get("OUT") or tempfile.mkdtemp())
    rng = np.random.default_rng(1)
    alpha = cupy.asarray(np.array([1.5], np.float32))
    x = cupy.asarray(rng.standard_normal(N).astype(np.float32))
    y0 = rng.standard_normal(N).astype(np.float32)
    y = cupy.asarray(y0)
    expect = cupy.asarray(np.float32(1.5) * x.get() + y0)
    stream = cupy.cuda.Stream(non_blocking=True)
    gx = N // BLOCK
    words = {"elements": N, "count:alpha": 1, "count:x": N, "count:y": N, "grid_x": gx}
    rows = []
    for name, (ptx, k) in variants().items():
        path = out_dir / (re.sub(r"\W+", "_", name) + ".ptx")
        path.write_text(ptx)
        fn = cupy.RawModule(path=str(path)).get_function(entry_name(saxpy_program()))
        layout = param_block_layout(saxpy_program(), k) if name.startswith("emitted") else list(words)
        params = cupy.asarray(np.array([words[w] for w in layout], np.uint32))
        grid = (-(-gx // k),)

        def run(fn=fn, grid=grid, params=params) -> None:
            fn(grid, (BLOCK,), (alpha, x, y, params), stream=stream)

        y[...] = cupy.asarray(y0)
        run()
        stream.synchronize()
        ok = bool(cupy.array_equal(y, expect))
        rows.append((name, device_ms(run, stream, REPS), ok, sass_order(path)))
    xt, yt = torch.as_tensor(x, device="cuda"), torch.as_tensor(y, device="cuda")
    torch_stream = cupy.cuda.ExternalStream(torch.cuda.current_stream().cuda_stream)
    torch_ms = [device_ms(lambda: yt.add_(xt, alpha=1.5), torch_stream, REPS) for _ in range(3)]
    src = cupy.ones(N, cupy.uint32)
    dst = cupy.empty_like(src)
    copy_ms = device_ms(lambda: dst.__setitem__(Ellipsis, src), cupy.cuda.get_current_stream(), REPS)
    print(f"{torch.cuda.get_device_name()}: SAXPY over {N} f32, median of {REPS}")
    print(f"torch y.add_: {', '.join(f'{t:.4f}' for t in torch_ms)} ms; "
          f"copy of the same bytes: {copy_ms * 1.5:.4f} ms (3 x {N * 4 >> 20} MiB at copy bandwidth)")
    for name, ms, ok, sass in rows:
        print(f"{name:30s} {ms:.4f} ms  {min(torch_ms) / ms * 100:5.1f}% of torch  correct={ok}  {sass[:80]}")


if __name__ == "__main__":
    main()
