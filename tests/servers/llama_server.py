"""``python -m tests.servers.llama_server ARGS``: ``python -m llama_cpp.server ARGS`` with
llama.cpp's extra buffer types (weight repacking) off.

Why: on a CPU with AMX (the machine this tier was built on: AVX512 + AMX_INT8, a VM), the
llama-cpp-python 0.3.36 wheel compiled there repacks SmolLM2's Q4_1 weights for AMX and then
dies in its first completion (general protection fault in libggml-cpu.so, exit 139), in the
server and in ``Llama.create_chat_completion`` alike; with ``use_extra_bufts = False`` it
answers. The server has no option for it, so the default model parameters are patched before
the server starts. ``LLAMA_EXTRA_BUFTS=1`` keeps them on (to check a newer build).
"""

from __future__ import annotations

import os
import runpy
from typing import Any


def main() -> None:
    if os.environ.get("LLAMA_EXTRA_BUFTS") != "1":
        import llama_cpp.llama_cpp as native

        default_params = native.llama_model_default_params

        def params() -> Any:
            p = default_params()
            p.use_extra_bufts = False
            return p

        native.llama_model_default_params = params  # read by llama_cpp.Llama at load time
    runpy.run_module("llama_cpp.server", run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main()
