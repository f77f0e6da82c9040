"""The Step-TP single-step prompt, for leirc's LEIR: one place that says what a model is
shown (the current program and its interface) and what it must answer (one verified step).

The user message follows the reference implementation's ``handle_dataset_v2.py`` prompt
(paraphrased there, restated here): the kernel, the current IR, each interface tensor with
its dtype and shape and the instruction not to rename, reshape or retype it, and the request
for one equivalent transformed IR plus the applied strategy, as JSON. leirc adds the
strategy's arguments (``step``), so an answer can be replayed through the engine instead of
being trusted as text. The assistant message is ``<think>`` (the grounded reasoning,
:func:`leirc.dataset.reasoning.render`) followed by ``<answer>`` (the JSON).
"""

from __future__ import annotations

import json

SYSTEM = "You are a helpful IR optimization assistant."

_DTYPES = {"f32": "float32", "f16": "float16", "f64": "float64", "bf16": "bfloat16", "i32": "int32", "i64": "int64",
           "i8": "int8", "i16": "int16", "u8": "uint8", "bool": "bool"}


def _tensor_line(name: str, dtype: str, shape) -> str:
    return f"'{name}' with the dtype {_DTYPES.get(dtype, dtype)} and shape [{', '.join(map(str, shape))}]"


def user_prompt(kernel_name: str, leir: str, inputs: dict, outputs: dict, target: str = "llvm") -> str:
    known = [_tensor_line(n, d, s) for n, (d, s) in inputs.items()] + \
            [_tensor_line(n, d, s) + " (output)" for n, (d, s) in outputs.items()]
    return (
        f"The LEIR program below implements the kernel '{kernel_name}' for the target {target}.\n"
        f"Current IR:\n'{leir}'\n"
        f"Its interface tensors are {'; '.join(known)}. Do not change their names, shapes or dtypes.\n"
        "Apply exactly one optimization strategy to produce a numerically equivalent transformed IR "
        "(state whether its outputs stay bitwise identical). Answer only with JSON with the keys "
        "'transformed_IR', 'applied_strategy' and 'step' (the strategy with its arguments)."
    )


def answer(transformed_leir: str, strategy: str, step: dict) -> str:
    return json.dumps({"transformed_IR": transformed_leir, "applied_strategy": strategy, "step": step},
                      sort_keys=True)


def assistant_message(think: str, transformed_leir: str, strategy: str, step: dict) -> str:
    return f"<think>\n{think}\n</think>\n<answer>{answer(transformed_leir, strategy, step)}</answer>"


__all__ = ["SYSTEM", "user_prompt", "answer", "assistant_message"]
