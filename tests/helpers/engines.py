"""The engines a test decodes a run with: torch, and ONNX Runtime in fp32 where it is installed
(the run exported first)."""

import pytest


def engines(run) -> list[str]:
    pytest.importorskip("onnxruntime")
    from nmt.inference.onnx_export import export_run

    export_run(run)
    return ["torch", "onnx-fp32"]
