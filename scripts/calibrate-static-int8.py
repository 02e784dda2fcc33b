"""Computes scripts/static-int8-calibration.json: the fixed activation ranges (and SmoothQuant
exponents) that scripts/derive-static-int8-model.py applies. Run once by a developer, never at
fetch time: it runs the model, whose float results depend on the CPU.

usage: python3 calibrate-static-int8.py SOURCE.onnx DEMO.db TOKENIZER.json OUT.json

DEMO.db is a database made by `strata demo` (seed 42; embedding assets need not be present:
`STRATA_EMBED_ASSETS=/nonexistent strata --db DEMO.db demo`). The calibration texts are the
texts the demo embeds (messages as `name: content`, summaries as `headline\\nbody`, memories as
`title: content`), cut into 80-word chunks like crates/recall's chunk_text, every 4th chunk,
embedded as strata does (batches of 32, shortest first, 128 word pieces). Only real tokens count,
never padding. Never calibrate on the evaluation set (/work/shared/eval).

Needs numpy, onnx, onnxruntime and tokenizers (the versions the fetch script pins, plus any
tokenizers).
"""

import importlib.util
import json
import re
import sqlite3
import sys
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
from tokenizers import Tokenizer

ALPHA = {"qkv": 0.5, "attention output": 0.5, "up": 0.5, "down": 0.7}  # migration strength per input
PERCENTILE = 99.9999
TAIL = 20_000  # largest values kept per tensor: the percentile above needs about 60 of them

spec = importlib.util.spec_from_file_location("derive", Path(__file__).with_name("derive-static-int8-model.py"))
derive = importlib.util.module_from_spec(spec)
spec.loader.exec_module(derive)


def chunks(text: str, words: int = 80, most: int = 8) -> list[str]:
    starts = [match.start() for match in re.finditer(r"\S+", text)]
    if len(starts) <= words:
        return [text]
    step, out, first = words - words // 5, [], 0
    while first < len(starts) and len(out) < most:
        end = starts[first + words] if first + words < len(starts) else len(text)
        out.append(text[starts[first] : end].rstrip())
        if first + words >= len(starts):
            break
        first += step
    return out


def demo_texts(db_path: str) -> list[str]:
    db = sqlite3.connect(db_path)
    texts = [text for (text,) in db.execute("SELECT title || ': ' || content FROM agent_memories ORDER BY id")]
    texts += [text for (text,) in db.execute("SELECT headline || char(10) || body FROM summary_nodes ORDER BY id")]
    out = [piece for text in texts for piece in chunks(text)]
    for text, role in db.execute("SELECT coalesce(name, role) || ': ' || content, role FROM messages ORDER BY id"):
        out += chunks(text, most=1 if role == "tool" else 8)
    return out[::4]


def batches(texts: list[str], tokenizer: Tokenizer):
    order = sorted(range(len(texts)), key=lambda index: len(texts[index]))
    for start in range(0, len(order), 32):
        encoded = tokenizer.encode_batch([texts[index] for index in order[start : start + 32]])
        ids = np.array([e.ids for e in encoded], dtype=np.int64)
        mask = np.array([e.attention_mask for e in encoded], dtype=np.int64)
        yield {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}, mask.astype(bool)


def run_with_outputs(model: onnx.ModelProto, names: list[str], texts, tokenizer, visit) -> None:
    model = onnx.ModelProto.FromString(model.SerializeToString())
    for name in names:
        model.graph.output.append(onnx.helper.make_tensor_value_info(name, onnx.TensorProto.FLOAT, None))
    options = ort.SessionOptions()
    options.intra_op_num_threads = 2
    session = ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
    outputs = [output.name for output in session.get_outputs()]
    for feed, mask in batches(texts, tokenizer):
        values = dict(zip(outputs, session.run(None, feed)))
        for name in names:
            visit(name, values[name][mask])  # real tokens only: [tokens, channels]


def weighted_inputs(model: onnx.ModelProto) -> dict[str, list[onnx.NodeProto]]:
    constants = {init.name for init in model.graph.initializer}
    inputs: dict[str, list[onnx.NodeProto]] = {}
    for node in model.graph.node:
        if node.op_type == "MatMul" and node.input[1] in constants:
            inputs.setdefault(node.input[0], []).append(node)
    return inputs


def main() -> None:
    source, db_path, tokenizer_path, out = sys.argv[1:5]
    tokenizer = Tokenizer.from_file(tokenizer_path)
    tokenizer.enable_truncation(max_length=128)
    tokenizer.enable_padding(pad_id=0, pad_token="[PAD]")
    texts = demo_texts(db_path)

    model = onnx.load(source)
    derive.fold_weights(model)
    derive.drop_softmax_nan_guards(model)
    inputs = weighted_inputs(model)
    kinds = dict(zip(inputs, ["qkv", "attention output", "up", "down"] * 6))  # graph order, per layer

    # 1. Per-channel absolute maxima of each weighted MatMul's input -> power-of-two exponents.
    channel_max = {name: None for name in inputs}

    def absmax(name, values):
        found = np.abs(values).max(axis=0)
        channel_max[name] = found if channel_max[name] is None else np.maximum(channel_max[name], found)

    run_with_outputs(model, list(inputs), texts, tokenizer, absmax)
    initializers = {init.name: init for init in model.graph.initializer}
    smoothing = {}
    for name, nodes in inputs.items():
        alpha = ALPHA[kinds[name]]
        weight_max = np.max(
            [np.abs(onnx.numpy_helper.to_array(initializers[node.input[1]])).max(axis=1) for node in nodes], axis=0
        )
        activation = np.maximum(channel_max[name].astype(np.float64), 1e-5) ** alpha
        exponent = np.round(np.log2(activation / np.maximum(weight_max.astype(np.float64), 1e-5) ** (1 - alpha)))
        exponent = exponent.astype(int) - int(np.round(np.median(exponent)))  # the typical channel keeps scale 1
        exponent = np.clip(exponent, -derive.EXPONENT_OFFSET, 9 - derive.EXPONENT_OFFSET)
        smoothing[name] = "".join(str(e + derive.EXPONENT_OFFSET) for e in exponent)

    # 2. Percentile ranges of the smoothed inputs.
    derive.smooth(model, smoothing)
    smoothed = [name + "_smoothed" for name in inputs]
    tails = {name: {"count": 0, "high": np.empty(0, np.float32), "low": np.empty(0, np.float32)} for name in smoothed}

    def largest(values, k):
        return values if values.size <= k else np.partition(values, values.size - k)[values.size - k :]

    def collect(name, values):
        values = values.ravel().astype(np.float32)
        tail = tails[name]
        tail["count"] += values.size
        tail["high"] = largest(np.concatenate([tail["high"], largest(values, TAIL)]), TAIL)
        tail["low"] = largest(np.concatenate([tail["low"], largest(-values, TAIL)]), TAIL)

    run_with_outputs(model, smoothed, texts, tokenizer, collect)

    def at_percentile(tail_values, count):
        rank = int(np.floor(count * (1 - PERCENTILE / 100.0)))
        ordered = np.sort(tail_values)[::-1]
        return float(ordered[min(rank, ordered.size - 1)])

    ranges = {}
    for name, tail in tails.items():
        high = at_percentile(tail["high"], tail["count"])
        low = -at_percentile(tail["low"], tail["count"])
        ranges[name] = [float(np.float32(min(low, 0.0))), float(np.float32(max(high, 0.0)))]

    about = (
        "static int8 activation calibration for all-MiniLM-L6-v2-sq8 (scripts/derive-static-int8-model.py); "
        "made by scripts/calibrate-static-int8.py on strata demo texts"
    )
    document = {"about": about, "ranges": ranges, "smoothing": smoothing}
    Path(out).write_text(json.dumps(document, indent=1, sort_keys=True) + "\n")
    print(f"{len(texts)} calibration texts, {len(ranges)} ranges, {len(smoothing)} smoothed inputs")


if __name__ == "__main__":
    main()
