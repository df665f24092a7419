"""MiniLM's six encoder layers as an ONNX graph run by onnxruntime.

The same products as the NumPy forward pass in :mod:`lessonbank.retrieval.embedders.bert`, built in
memory with the ``onnx`` package from the weight arrays it already loaded (no file is written, nothing
is downloaded), so the vectors are the same within float error and share the model's ``name``.
onnxruntime's CPU kernels run the graph about 1.8 times faster than NumPy on one core
(``bench/embedders.py``: a query in 4.6 ms p50 against 8.3), which is what brings a MiniLM hybrid
recall within its 30 ms target at 100k lessons. The embedding lookup and the mean pooling stay in
NumPy: they cost little.

A session runs on one thread: a query shares the machine with the keyword search that runs beside
it, and document batches get their parallelism from concurrent ``run`` calls, which onnxruntime
allows on one session and which release the GIL.
"""

from __future__ import annotations

import importlib
import importlib.util
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from lessonbank.errors import ConfigError, OnnxBuildError

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    Vectors = npt.NDArray[np.float32]

PACKAGES = ("onnxruntime", "onnx")
_OPSET = 18  # LayerNormalization (17) and Split's num_outputs (18)
_IR_VERSION = 9  # accepted by every onnxruntime that supports opset 18


def onnx_available() -> bool:
    """True when onnxruntime and onnx (to build the graph) are installed."""
    return all(importlib.util.find_spec(name) is not None for name in PACKAGES)


def require_onnx() -> None:
    if not onnx_available():
        raise ConfigError(
            "MiniLMEmbedder(backend='onnx') needs onnxruntime and onnx: pip install onnxruntime onnx "
            "(both in 'lessonbank[embeddings]'), or use backend='numpy'"
        )


class OnnxEncoder:
    """Runs hidden states (batch, length, hidden) after the embedding LayerNorm through the layers."""

    def __init__(
        self, layers: Sequence[Mapping[str, Vectors]], *, hidden: int, heads: int, eps: float
    ) -> None:
        require_onnx()
        ort = importlib.import_module("onnxruntime")
        options = ort.SessionOptions()
        options.intra_op_num_threads = 1
        options.inter_op_num_threads = 1
        # Idle worker threads would otherwise spin and take the core the keyword search runs on.
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        options.log_severity_level = 3
        try:
            model = build_model(layers, hidden=hidden, heads=heads, eps=eps)
            self._session: Any = ort.InferenceSession(model, options, providers=["CPUExecutionProvider"])
        except Exception as exc:
            raise OnnxBuildError(
                f"onnxruntime {getattr(ort, '__version__', '?')} could not load the MiniLM graph "
                f"({type(exc).__name__}: {exc}); upgrade onnxruntime and onnx, or use backend='numpy'"
            ) from exc

    def run(self, x: Vectors, key_bias: Vectors) -> Vectors:
        """``x``: (batch, length, hidden) float32; ``key_bias``: (batch, 1, 1, length), 0 or -1e9."""
        states: Vectors = self._session.run(None, {"x": x, "key_bias": key_bias})[0]
        return states


def build_model(layers: Sequence[Mapping[str, Vectors]], *, hidden: int, heads: int, eps: float) -> bytes:
    """The serialized ONNX model of the encoder layers, with weights laid out as the NumPy path has them."""
    import numpy as np

    onnx = importlib.import_module("onnx")
    helper, numpy_helper = onnx.helper, onnx.numpy_helper
    head_dim = hidden // heads
    initializers: list[Any] = []
    nodes: list[Any] = []

    def const(name: str, value: Any) -> str:
        initializers.append(numpy_helper.from_array(np.ascontiguousarray(value), name))
        return name

    def op(kind: str, *inputs: str, **attributes: Any) -> str:
        output = f"{kind.lower()}_{len(nodes)}"
        nodes.append(helper.make_node(kind, list(inputs), [output], **attributes))
        return output

    def dense(x: str, weight: str, bias: str) -> str:
        return op("Add", op("MatMul", x, weight), bias)

    split_heads = const("split_heads", np.array([0, 0, 3, heads, head_dim], dtype=np.int64))
    merge_heads = const("merge_heads", np.array([0, 0, hidden], dtype=np.int64))
    first_axis = const("first_axis", np.array([0], dtype=np.int64))
    scale = const("scale", np.array(1.0 / np.sqrt(head_dim), dtype=np.float32))
    sqrt2 = const("sqrt2", np.array(np.sqrt(2.0), dtype=np.float32))
    one = const("one", np.array(1.0, dtype=np.float32))
    half = const("half", np.array(0.5, dtype=np.float32))

    x = "x"
    for i, layer in enumerate(layers):
        w = {key: const(f"layer{i}.{key}", value) for key, value in layer.items()}
        qkv = op("Reshape", dense(x, w["qkv_w"], w["qkv_b"]), split_heads)
        qkv = op("Transpose", qkv, perm=[2, 0, 3, 1, 4])  # (3, batch, heads, length, head_dim)
        parts = [f"layer{i}.{name}" for name in ("q", "k", "v")]
        nodes.append(helper.make_node("Split", [qkv], parts, axis=0, num_outputs=3))
        q, k, v = (op("Squeeze", part, first_axis) for part in parts)
        scores = op("MatMul", op("Mul", q, scale), op("Transpose", k, perm=[0, 1, 3, 2]))
        weights = op("Softmax", op("Add", scores, "key_bias"), axis=-1)
        context = op("Reshape", op("Transpose", op("MatMul", weights, v), perm=[0, 2, 1, 3]), merge_heads)
        attended = op("Add", dense(context, w["out_w"], w["out_b"]), x)
        x = op("LayerNormalization", attended, w["ln1_w"], w["ln1_b"], axis=-1, epsilon=eps)
        inner = dense(x, w["ff1_w"], w["ff1_b"])
        # Exact (erf) GELU, as BERT's "gelu" is; onnxruntime fuses this pattern into one kernel.
        gelu = op("Mul", op("Mul", inner, half), op("Add", op("Erf", op("Div", inner, sqrt2)), one))
        x = op(
            "LayerNormalization",
            op("Add", dense(gelu, w["ff2_w"], w["ff2_b"]), x),
            w["ln2_w"],
            w["ln2_b"],
            axis=-1,
            epsilon=eps,
        )
    nodes.append(helper.make_node("Identity", [x], ["states"]))

    float32 = onnx.TensorProto.FLOAT
    graph = helper.make_graph(
        nodes,
        "minilm_encoder",
        [
            helper.make_tensor_value_info("x", float32, ["batch", "length", hidden]),
            helper.make_tensor_value_info("key_bias", float32, ["batch", 1, 1, "length"]),
        ],
        [helper.make_tensor_value_info("states", float32, ["batch", "length", hidden])],
        initializers,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", _OPSET)])
    model.ir_version = _IR_VERSION
    serialized: bytes = model.SerializeToString()
    return serialized
