"""Prompt and generation speed of the local model under each llama.cpp weight layout.

Each layout runs in its own child process, so a layout that faults (llama.cpp's AMX kernels on
some virtual machines) is recorded as the signal that killed it instead of ending the run:

- ``extra``: llama.cpp's default, the extra buffer types (AMX tiles where the build has them,
  else repacked blocks);
- ``plain``: no extra buffer types (what ``llm.local.extra_buffers = off`` loads);
- ``repack``: only the repacked q4_K layout, forced on the q4_K matrices (AMX builds only: the
  one way to run repacked blocks without AMX there).

Children run in turns (extra, plain, repack, extra, …) to spread machine noise; each loads the
model, evaluates a ~600-token prompt three times from an empty cache, then generates 48 tokens
one at a time. Reports the median tok/s per layout and its ratio to ``plain``.

    python benchmarks/llama_layouts.py [--model qwen2.5-coder-1.5b] [--repeats 3] [--out FILE]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

from common import write_report  # benchmarks/common.py

from agent.core.settings import load_settings
from agent.llm.local_kernels import build_has_amx
from agent.llm.local_models import resolve_model_path

# The child: argv = model path, layout. Prints one JSON line.
_CHILD = r"""
import ctypes, json, os, statistics, sys, time
from pathlib import Path
import llama_cpp, llama_cpp.llama as llama_module

path, layout = sys.argv[1], sys.argv[2]
original = llama_module.llama_cpp.llama_model_default_params
keep = []

def repack_overrides():
    lib = Path(llama_cpp.__file__).parent / "lib"
    ggml = ctypes.CDLL(str(lib / "libggml.so"))
    base = ctypes.CDLL(str(lib / "libggml-base.so"))
    ggml.ggml_backend_dev_by_type.restype = ctypes.c_void_p
    ggml.ggml_backend_dev_by_type.argtypes = [ctypes.c_int]
    ggml.ggml_backend_dev_backend_reg.restype = ctypes.c_void_p
    ggml.ggml_backend_dev_backend_reg.argtypes = [ctypes.c_void_p]
    ggml.ggml_backend_reg_get_proc_address.restype = ctypes.c_void_p
    ggml.ggml_backend_reg_get_proc_address.argtypes = [ctypes.c_void_p, ctypes.c_char_p]
    base.ggml_backend_buft_name.restype = ctypes.c_char_p
    base.ggml_backend_buft_name.argtypes = [ctypes.c_void_p]
    llama_cpp.llama_backend_init()
    dev = ggml.ggml_backend_dev_by_type(0)  # the CPU
    reg = ggml.ggml_backend_dev_backend_reg(dev)
    fn = ggml.ggml_backend_reg_get_proc_address(reg, b"ggml_backend_dev_get_extra_bufts")
    bufts = ctypes.CFUNCTYPE(ctypes.POINTER(ctypes.c_void_p), ctypes.c_void_p)(fn)(dev)
    by_name, i = {}, 0
    while bufts[i]:
        by_name[base.ggml_backend_buft_name(bufts[i]).decode()] = bufts[i]
        i += 1
    class Override(ctypes.Structure):
        _fields_ = [("pattern", ctypes.c_char_p), ("buft", ctypes.c_void_p)]
    # the matrices a Q4_K_M file stores as q4_K; q6_K and 1-D tensors stay where they were
    pattern = rb"blk\.\d+\.(attn_q|attn_k|attn_output|ffn_gate|ffn_up)\.weight"
    table = (Override * 2)(Override(pattern, by_name["CPU_REPACK"]), Override(None, None))
    keep.append(table)
    return ctypes.cast(table, ctypes.c_void_p).value

def params():
    p = original()
    if layout != "extra":
        p.use_extra_bufts = False
    if layout == "repack":
        p.tensor_buft_overrides = repack_overrides()
    return p

llama_module.llama_cpp.llama_model_default_params = params
threads = len(os.sched_getaffinity(0))
m = llama_module.Llama(model_path=path, n_ctx=2048, n_threads=threads, verbose=False)
text = (b"Question: How long is the incubation period of MERS-CoV?\n\n<passage>\nThe median "
        b"incubation period was 5.2 days (95% CI 1.9-14.7), and the serial interval was 7.6 days. "
        b"Household contacts of index cases were followed for 14 days after the last exposure.\n"
        b"</passage>\n") * 8
tokens = m.tokenize(text)
prompt = []
for _ in range(3):
    m.reset()
    t0 = time.perf_counter()
    m.eval(tokens)
    prompt.append(len(tokens) / (time.perf_counter() - t0))
t0 = time.perf_counter()
for i in range(48):
    m.eval([tokens[i]])
gen = 48 / (time.perf_counter() - t0)
print(json.dumps({"prompt_tokens": len(tokens), "prompt_tps": statistics.median(prompt), "gen_tps": gen}))
"""


def run_child(model: Path, layout: str) -> dict[str, Any]:
    proc = subprocess.run(
        [sys.executable, "-c", _CHILD, str(model), layout], capture_output=True, timeout=600, check=False
    )
    if proc.returncode != 0:
        how = f"signal {-proc.returncode}" if proc.returncode < 0 else f"exit {proc.returncode}"
        return {"layout": layout, "failed": how}
    return {"layout": layout, **json.loads(proc.stdout.decode().strip().splitlines()[-1])}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="qwen2.5-coder-1.5b")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    model = resolve_model_path(args.model, load_settings().models_dir)
    amx = build_has_amx()
    layouts = ["extra", "plain", "repack"] if amx else ["extra", "plain"]
    runs = [run_child(model, layout) for _ in range(args.repeats) for layout in layouts]
    summary: dict[str, Any] = {}
    for layout in layouts:
        ok = [r for r in runs if r["layout"] == layout and "failed" not in r]
        failed = [r["failed"] for r in runs if r["layout"] == layout and "failed" in r]
        summary[layout] = {
            "runs": len(ok),
            "failed": failed,
            "prompt_tps": statistics.median(r["prompt_tps"] for r in ok) if ok else None,
            "gen_tps": statistics.median(r["gen_tps"] for r in ok) if ok else None,
        }
    plain = summary["plain"]
    for row in summary.values():
        for key in ("prompt_tps", "gen_tps"):
            if row[key] is not None and plain[key]:
                row[f"{key}_vs_plain"] = round(row[key] / plain[key], 3)
    report = {"model": model.name, "build_has_amx": amx, "layouts": summary, "runs": runs}
    write_report(report, args.out)


if __name__ == "__main__":
    main()
