"""The MiniLM graph surgery of the int8 derivations (derive-int8-model.py,
derive-static-int8-model.py; the fusions only the latter's --fused): imported from the scripts' own
directory."""

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


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


def _graph_index(graph: onnx.GraphProto):
    producers = {output: node for node in graph.node for output in node.output}
    consumers: dict[str, list[onnx.NodeProto]] = {}
    for node in graph.node:
        for name in node.input:
            consumers.setdefault(name, []).append(node)
    return producers, consumers, {init.name: init for init in graph.initializer}


def _prune(graph: onnx.GraphProto) -> None:
    """Drops the nodes nothing reads (graph outputs count) and the unused initializers."""
    while True:
        used = {name for node in graph.node for name in node.input} | {output.name for output in graph.output}
        before = len(graph.node)
        keep_nodes(graph, lambda node: any(output in used for output in node.output))
        if len(graph.node) == before:
            break
    used = {name for node in graph.node for name in node.input}
    remaining = [init for init in graph.initializer if init.name in used]
    del graph.initializer[:]
    graph.initializer.extend(remaining)


def _chain(producers, name: str, *op_types: str) -> onnx.NodeProto:
    """Walks up input 0 through nodes of these types; returns the last one."""
    node = None
    for op_type in op_types:
        node = producers.get(name)
        if node is None or node.op_type != op_type:
            raise ValueError(f"expected {op_type} producing {name!r}, found {node.op_type if node else None}")
        name = node.input[0]
    return node


def _matmul_and_bias(producers, inits, add: onnx.NodeProto):
    """An Add of a MatMul's output and a constant bias -> (the MatMul, the bias array)."""
    if add.op_type != "Add":
        raise ValueError(f"expected a bias Add, found {add.op_type}")
    product, bias = add.input
    if product in inits:
        product, bias = bias, product
    matmul = producers.get(product)
    if matmul is None or matmul.op_type != "MatMul" or bias not in inits or matmul.input[1] not in inits:
        raise ValueError(f"expected MatMul + constant bias at {add.name!r}")
    return matmul, numpy_helper.to_array(inits[bias])


def _ensure_contrib_opset(model: onnx.ModelProto) -> None:
    if not any(opset.domain == "com.microsoft" for opset in model.opset_import):
        model.opset_import.append(helper.make_opsetid("com.microsoft", 1))


PADDING_SCORE = -10000.0  # the key channel that masks padding (see fuse_attention)


def fuse_attention(model: onnx.ModelProto, num_heads: int = 12, head_size: int = 32) -> int:
    """Replaces each exported attention (query/key/value bias Adds, head Reshapes and Transposes,
    the two scaling Muls, the mask Add, Softmax, the two attention MatMuls, the merge back) by ONNX
    Runtime's com.microsoft.MultiHeadAttention, fed by the three projection MatMuls; returns how many.

    The softmax NaN guards must be gone (drop_softmax_nan_guards). ONNX Runtime's CPU kernel takes its
    fused (flash) path only without a key_padding_mask, so padding is masked through the scores
    instead: each head gets a 33rd query and key channel (zero weight columns, so the projections'
    other columns and their int8 quantization are unchanged); the query's is 1 (its bias), the key's
    is 0 for a real token and PADDING_SCORE for padding (one Add per layer of a term computed once
    from attention_mask). A real key's score is exactly the exported one, q.k / sqrt(32); a padding
    key's is about -1768, whose softmax weight is exactly 0 in fp32, as with the exported -FLT_MAX
    mask. So a text's vector does not depend on its batch or on the kernel ONNX Runtime picks."""
    graph = model.graph
    producers, consumers, inits = _graph_index(graph)
    _ensure_contrib_opset(model)
    hidden, widened = num_heads * head_size, num_heads * (head_size + 1)
    columns = np.array([h * (head_size + 1) + j for h in range(num_heads) for j in range(head_size)])
    extra = np.array([h * (head_size + 1) + head_size for h in range(num_heads)])

    padding_row = np.zeros(widened, np.float32)
    padding_row[extra] = np.float32(PADDING_SCORE)
    graph.initializer.extend(
        [
            numpy_helper.from_array(np.array(1, np.float32), "key_padding_one"),
            numpy_helper.from_array(np.array([2], np.int64), "key_padding_axis"),
            numpy_helper.from_array(padding_row, "key_padding_row"),
        ]
    )
    padding_nodes = [
        helper.make_node("Cast", ["attention_mask"], ["key_padding_mask_float"], name="key_padding_cast", to=TensorProto.FLOAT),
        helper.make_node("Sub", ["key_padding_one", "key_padding_mask_float"], ["key_padding_flag"], name="key_padding_flag"),
        helper.make_node("Unsqueeze", ["key_padding_flag", "key_padding_axis"], ["key_padding_flag_3d"], name="key_padding_unsqueeze"),
        helper.make_node("Mul", ["key_padding_flag_3d", "key_padding_row"], ["key_padding_term"], name="key_padding_term"),
    ]

    replacements, widened_outputs = [], set()
    for layer, softmax in enumerate(node for node in graph.node if node.op_type == "Softmax"):
        mask_add = producers[softmax.input[0]]
        scores = producers[mask_add.input[0]]
        if mask_add.op_type != "Add" or scores.op_type != "MatMul":
            raise ValueError(f"unexpected attention scores before {softmax.name!r}")
        query_scale, key_scale = producers[scores.input[0]], producers[scores.input[1]]
        query_heads = _chain(producers, query_scale.input[0], "Transpose", "Reshape")
        key_heads = _chain(producers, key_scale.input[0], "Reshape", "Transpose", "Reshape", "Transpose", "Reshape")
        (context,) = consumers[softmax.output[0]]
        value_heads = _chain(producers, context.input[1], "Transpose", "Reshape")
        (merge_transpose,) = consumers[context.output[0]]
        (merge,) = consumers[merge_transpose.output[0]]
        if context.op_type != "MatMul" or merge_transpose.op_type != "Transpose" or merge.op_type != "Reshape":
            raise ValueError(f"unexpected attention output after {softmax.name!r}")
        query, query_bias = _matmul_and_bias(producers, inits, producers[query_heads.input[0]])
        key, key_bias = _matmul_and_bias(producers, inits, producers[key_heads.input[0]])
        value, value_bias = _matmul_and_bias(producers, inits, producers[value_heads.input[0]])
        name = f"attention_{layer}"
        for matmul, tag in ((query, "query"), (key, "key")):
            weight = numpy_helper.to_array(inits[matmul.input[1]])
            if weight.shape[1] != hidden:
                raise ValueError(f"{matmul.name!r}: {weight.shape[1]} columns, expected {hidden}")
            wide = np.zeros((weight.shape[0], widened), np.float32)
            wide[:, columns] = weight
            graph.initializer.append(numpy_helper.from_array(wide, f"{name}_{tag}_weight"))
            matmul.input[1] = f"{name}_{tag}_weight"
            widened_outputs.add(matmul.output[0])
        wide_query_bias = np.zeros(widened, np.float32)
        wide_query_bias[columns], wide_query_bias[extra] = query_bias, np.float32(1)
        wide_key_bias = np.zeros(widened, np.float32)
        wide_key_bias[columns] = key_bias
        bias = np.concatenate([wide_query_bias, wide_key_bias, value_bias]).astype(np.float32)
        graph.initializer.append(numpy_helper.from_array(bias, f"{name}_bias"))
        masked_key = f"{name}_masked_key"
        replacements.append(
            (
                merge,
                [
                    helper.make_node("Add", [key.output[0], "key_padding_term"], [masked_key], name=f"{name}_key_padding"),
                    helper.make_node(
                        "MultiHeadAttention",
                        [query.output[0], masked_key, value.output[0], f"{name}_bias"],
                        [merge.output[0]],
                        name=name,
                        domain="com.microsoft",
                        num_heads=num_heads,
                        scale=float(np.float32(1) / np.sqrt(np.float32(head_size))),
                    ),
                ],
            )
        )
    for merge, nodes in replacements:
        position = list(graph.node).index(merge)
        graph.node.remove(merge)
        for offset, node in enumerate(nodes):
            graph.node.insert(position + offset, node)
    for offset, node in enumerate(padding_nodes):
        graph.node.insert(offset, node)
    # onnx cannot infer a com.microsoft operator's output, and the quantizer quantizes only tensors it
    # knows are float: declare the attention outputs; forget the widened projections' old shapes
    kept = [info for info in graph.value_info if info.name not in widened_outputs]
    del graph.value_info[:]
    graph.value_info.extend(kept)
    for merge, _ in replacements:
        graph.value_info.append(helper.make_tensor_value_info(merge.output[0], TensorProto.FLOAT, ["batch", "sequence", hidden]))
    _prune(graph)
    return len(replacements)


def fuse_gelu(model: onnx.ModelProto) -> int:
    """Replaces each exported exact GELU of a biased MatMul output, x * (0.5 * (1 + erf(x / sqrt 2)))
    with x = MatMul + bias, by com.microsoft.BiasGelu(MatMul, bias); returns how many."""
    graph = model.graph
    producers, consumers, inits = _graph_index(graph)
    _ensure_contrib_opset(model)

    def constant(name: str, value: float) -> bool:
        return name in inits and np.allclose(numpy_helper.to_array(inits[name]), np.float32(value), rtol=1e-6, atol=0)

    replacements = []
    for layer, erf in enumerate(node for node in graph.node if node.op_type == "Erf"):
        div = producers[erf.input[0]]
        x = div.input[0]
        (plus_one,) = consumers[erf.output[0]]
        (half,) = consumers[plus_one.output[0]]
        (product,) = consumers[half.output[0]]
        if not (
            div.op_type == "Div" and constant(div.input[1], np.sqrt(2))
            and plus_one.op_type == "Add" and constant(plus_one.input[1], 1)
            and half.op_type == "Mul" and constant(half.input[0], 0.5)
            and product.op_type == "Mul" and sorted(product.input) == sorted([x, half.output[0]])
            and len(consumers[x]) == 2
        ):
            raise ValueError(f"unexpected GELU around {erf.name!r}")
        matmul, _ = _matmul_and_bias(producers, inits, producers[x])
        bias = [name for name in producers[x].input if name != matmul.output[0]][0]
        width = numpy_helper.to_array(inits[matmul.input[1]]).shape[1]
        gelu = helper.make_node("BiasGelu", [matmul.output[0], bias], [product.output[0]], name=f"gelu_{layer}_fused", domain="com.microsoft")
        replacements.append((product, gelu, width))
    for product, gelu, width in replacements:
        position = list(graph.node).index(product)
        graph.node.remove(product)
        graph.node.insert(position, gelu)
        # as in fuse_attention: the quantizer must know the output is float
        graph.value_info.append(helper.make_tensor_value_info(product.output[0], TensorProto.FLOAT, ["batch", "sequence", width]))
    _prune(graph)
    return len(replacements)
