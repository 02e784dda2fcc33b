"""Derives all-MiniLM-L6-v2 with static int8 arithmetic from the weight-only int8 model.

usage: python3 derive-static-int8-model.py [--fused] SOURCE.onnx CALIBRATION.json DEST.onnx

CALIBRATION.json is scripts/static-int8-calibration.json, computed once on strata demo texts
by scripts/calibrate-static-int8.py and committed: no inference runs here, so the result does
not depend on the CPU (the fetch script checks its sha256). The steps:

1. fold every Cast/Mul chain that feeds a MatMul into one fp32 initializer (as
   derive-int8-model.py does: the numbers ONNX Runtime computed at load time);
2. drop the IsNaN/Where pair after each attention Softmax: the exported graph masks with
   -FLT_MAX, never -inf, so a softmax row is never NaN and the pair is an exact no-op (it cost
   about 15% of the int8 model's time);
3. SmoothQuant with powers of two: each weighted MatMul's activation input X becomes X * 2^-e
   (a Mul per input channel) and the weight's row j is multiplied by 2^e_j, so both products
   are exact. This moves the activations' outlier channels (LayerNorm outputs up to 30 where
   the median channel reaches 2; one GELU channel up to 25) into the weights, which are
   quantized per channel;
4. ONNX Runtime's quantize_static, QDQ format, on the 36 MatMuls with a constant weight
   (int8 weights per output channel, uint8 activations with the committed fixed ranges:
   99.9999th percentile of each smoothed input over the calibration texts' real tokens). The
   attention MatMuls (activation by activation) stay fp32, and MatMul outputs are not
   quantized: ONNX Runtime runs each as MatMulIntegerToFloat.

With --fused, between steps 3 and 4 (all exact rewrites of the fp32 graph; the quantized
MatMuls, their inputs' names and so the committed ranges are the same):

3a. each attention becomes ONNX Runtime's com.microsoft.MultiHeadAttention, fed by the query, key
   and value MatMuls (minilm_graph.fuse_attention: padding masked through a 33rd key channel so
   that the CPU kernel takes its flash path);
3b. each GELU becomes com.microsoft.BiasGelu of the feed-forward MatMul and its bias
   (minilm_graph.fuse_gelu);
3c. the attention output's smoothing Mul moves into the value projection's columns and bias
   (fold_context_smoothing; powers of two, exact).

The ranges are fixed, so a text's vector does not depend on the batch it is embedded with.
Measurements: benches/README.md, "Static int8 (issue 23, eleventh session)" and "Fused attention
(issue 23, twelfth session)".
"""

import json
import logging
import sys
import tempfile
from pathlib import Path

import numpy as np
import onnx
from onnx import helper, numpy_helper
from onnxruntime.quantization import CalibrationMethod, QuantFormat, QuantType, quantize_static
from onnxruntime.quantization.calibrate import TensorData, TensorsData, save_tensors_data

from minilm_graph import fold_weights, fuse_attention, fuse_gelu, keep_nodes

# The smoothing exponents are stored as one digit each, exponent + EXPONENT_OFFSET.
EXPONENT_OFFSET = 3


def drop_softmax_nan_guards(model: onnx.ModelProto) -> int:
    graph = model.graph
    producers = {output: node for node in graph.node for output in node.output}
    dropped, renamed = set(), {}
    for where in graph.node:
        if where.op_type != "Where":
            continue
        isnan = producers.get(where.input[0])
        softmax = producers.get(where.input[2])
        if isnan is None or isnan.op_type != "IsNaN" or softmax is None or softmax.op_type != "Softmax":
            continue
        if isnan.input[0] != where.input[2]:
            continue
        dropped.update((id(where), id(isnan)))
        renamed[where.output[0]] = where.input[2]
    for node in graph.node:
        for index, name in enumerate(node.input):
            if name in renamed:
                node.input[index] = renamed[name]
    keep_nodes(graph, lambda node: id(node) not in dropped)
    return len(renamed)


def smooth(model: onnx.ModelProto, exponents: dict[str, str]) -> int:
    graph = model.graph
    initializers = {init.name: init for init in graph.initializer}
    consumers: dict[str, list[onnx.NodeProto]] = {}
    for node in graph.node:
        if node.op_type == "MatMul" and node.input[1] in initializers:
            consumers.setdefault(node.input[0], []).append(node)
    for source, digits in sorted(exponents.items()):
        if source not in consumers:
            sys.exit(f"derive-static-int8-model: no weighted MatMul reads {source!r}")
        tensor, nodes = source + "_smoothed", consumers[source]
        exponent = np.array([int(digit) - EXPONENT_OFFSET for digit in digits], dtype=np.int32)
        scale = np.ldexp(np.float32(1), exponent).astype(np.float32)
        for node in nodes:
            weight = numpy_helper.to_array(initializers[node.input[1]])
            if weight.shape[0] != scale.size:
                sys.exit(f"derive-static-int8-model: {source!r} has {scale.size} exponents for {weight.shape[0]} rows")
            smoothed = numpy_helper.from_array((weight * scale[:, None]).astype(np.float32), node.input[1] + "_smoothed")
            graph.initializer.append(smoothed)
            node.input[1] = smoothed.name
        inverse = numpy_helper.from_array((np.float32(1) / scale).astype(np.float32), source + "_smooth_scale")
        graph.initializer.append(inverse)
        mul = helper.make_node("Mul", [source, inverse.name], [tensor], name=source + "_smooth")
        graph.node.insert(min(list(graph.node).index(node) for node in nodes), mul)
        for node in nodes:
            node.input[0] = tensor
    used = {name for node in graph.node for name in node.input}
    remaining = [init for init in graph.initializer if init.name in used]
    del graph.initializer[:]
    graph.initializer.extend(remaining)
    return len(exponents)


def fold_context_smoothing(model: onnx.ModelProto) -> int:
    """Moves the smoothing Mul on each MultiHeadAttention output into the value projection: the
    context's channel c mixes only the values' channel c (softmax weights mix tokens), so scaling
    the value weight's column c and bias c by the same power of two is exact."""
    graph = model.graph
    initializers = {init.name: init for init in graph.initializer}
    producers = {output: node for node in graph.node for output in node.output}
    dropped = set()
    for attention in [node for node in graph.node if node.op_type == "MultiHeadAttention"]:
        readers = [node for node in graph.node if attention.output[0] in node.input]
        if len(readers) != 1 or readers[0].op_type != "Mul" or readers[0].input[1] not in initializers:
            sys.exit(f"derive-static-int8-model: {attention.name!r} is not followed by its smoothing Mul")
        (mul,) = readers
        scale = numpy_helper.to_array(initializers[mul.input[1]])
        value = producers[attention.input[2]]
        weight = numpy_helper.to_array(initializers[value.input[1]]) * scale[None, :]
        graph.initializer.append(numpy_helper.from_array(weight.astype(np.float32), value.input[1] + "_context"))
        value.input[1] += "_context"
        bias = numpy_helper.to_array(initializers[attention.input[3]]).copy()
        bias[-scale.size :] *= scale
        graph.initializer.append(numpy_helper.from_array(bias.astype(np.float32), attention.input[3] + "_context"))
        attention.input[3] += "_context"
        for info in graph.value_info:
            if info.name == attention.output[0]:
                info.name = mul.output[0]
        attention.output[0] = mul.output[0]
        dropped.add(id(mul))
    keep_nodes(graph, lambda node: id(node) not in dropped)
    used = {name for node in graph.node for name in node.input}
    remaining = [init for init in graph.initializer if init.name in used]
    del graph.initializer[:]
    graph.initializer.extend(remaining)
    return len(dropped)


def main() -> None:
    logging.disable(logging.WARNING)  # quantize_static's advice to pre-process (measured without)
    arguments = sys.argv[1:]
    fused = "--fused" in arguments
    if fused:
        arguments.remove("--fused")
    if len(arguments) != 3:
        sys.exit("usage: derive-static-int8-model.py [--fused] SOURCE.onnx CALIBRATION.json DEST.onnx")
    source, calibration_path, dest = arguments
    calibration = json.loads(Path(calibration_path).read_text())
    model = onnx.load(source)
    if (folded := fold_weights(model)) != 36:  # 6 layers x (query, key, value, attention output, two feed-forward)
        sys.exit(f"derive-static-int8-model: expected 36 int8 MatMul weights in {source}, found {folded}")
    if (guards := drop_softmax_nan_guards(model)) != 6:
        sys.exit(f"derive-static-int8-model: expected 6 softmax NaN guards in {source}, found {guards}")
    if (smoothed := smooth(model, calibration["smoothing"])) != 24:  # 6 layers x 4 MatMul inputs
        sys.exit(f"derive-static-int8-model: expected 24 smoothed MatMul inputs, found {smoothed}")
    if fused:
        if (attentions := fuse_attention(model)) != 6:
            sys.exit(f"derive-static-int8-model: expected 6 attentions to fuse, found {attentions}")
        if (gelus := fuse_gelu(model)) != 6:
            sys.exit(f"derive-static-int8-model: expected 6 GELUs to fuse, found {gelus}")
        if (contexts := fold_context_smoothing(model)) != 6:
            sys.exit(f"derive-static-int8-model: expected 6 attention outputs to unsmooth, found {contexts}")
    onnx.checker.check_model(model)
    constants = {init.name for init in model.graph.initializer}
    attention = [node.name for node in model.graph.node if node.op_type == "MatMul" and node.input[1] not in constants]
    ranges = TensorsData(
        CalibrationMethod.MinMax,
        {
            name: TensorData(lowest=np.float32(low), highest=np.float32(high))
            for name, (low, high) in sorted(calibration["ranges"].items())
        },
    )
    with tempfile.TemporaryDirectory() as scratch:
        # quantize_static reads fixed ranges from a calibration cache and then runs no inference.
        cache = Path(scratch) / "ranges.json"
        save_tensors_data(ranges, cache)
        quantize_static(
            model,
            dest,
            None,
            quant_format=QuantFormat.QDQ,
            op_types_to_quantize=["MatMul"],
            per_channel=True,
            activation_type=QuantType.QUInt8,
            weight_type=QuantType.QInt8,
            nodes_to_exclude=attention,
            calibrate_method=CalibrationMethod.MinMax,
            extra_options={"OpTypesToExcludeOutputQuantization": ["MatMul"]},
            calibration_cache_path=cache,
        )


if __name__ == "__main__":
    main()
