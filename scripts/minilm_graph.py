"""The MiniLM graph surgery both int8 derivations share (derive-int8-model.py,
derive-static-int8-model.py): imported from the scripts' own directory."""

import numpy as np
import onnx
from onnx import numpy_helper


def fold_weights(model: onnx.ModelProto) -> int:
    """Folds every Cast/Mul chain that feeds a MatMul into one fp32 initializer (the numbers
    ONNX Runtime computes at load time); returns how many."""
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

    keep_nodes(graph, lambda node: id(node) not in dropped_nodes)
    used = {name for node in graph.node for name in node.input}
    remaining = [init for init in graph.initializer if init.name not in dropped_inits or init.name in used]
    del graph.initializer[:]
    graph.initializer.extend(remaining + folded)
    return len(folded)


def keep_nodes(graph: onnx.GraphProto, keep) -> None:
    """Keeps the nodes `keep` accepts, in their order."""
    kept = [node for node in graph.node if keep(node)]
    del graph.node[:]
    graph.node.extend(kept)
