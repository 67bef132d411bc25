"""The DeepSeek-V3 chat encoding, segment by segment, as src/recipe/encoding_v3.cpp renders it.

A rendered conversation is a list of Segment(marker, text, trained): a marker becomes exactly one
token id, a text is plain BPE (added tokens not recognised). `trained` marks what the model is
taught to produce (assistant replies, their tool calls and the end-of-sentence that closes them).
check_chat_format.py compares this rendering with the engine's on every kind of conversation.

The V3 encoding has no thinking mode: the demo model thinks when the system prompt asks for it
(THINK_SYSTEM), and then writes <think>...</think> itself, with the think markers as single tokens.
"""
from dataclasses import dataclass

BOS = "<｜begin▁of▁sentence｜>"
EOS = "<｜end▁of▁sentence｜>"
PAD = "<｜▁pad▁｜>"
USER = "<｜User｜>"
ASSISTANT = "<｜Assistant｜>"
THINK_BEGIN = "<think>"
THINK_END = "</think>"
TOOL_CALLS_BEGIN = "<｜tool▁calls▁begin｜>"
TOOL_CALLS_END = "<｜tool▁calls▁end｜>"
TOOL_CALL_BEGIN = "<｜tool▁call▁begin｜>"
TOOL_CALL_END = "<｜tool▁call▁end｜>"
TOOL_SEP = "<｜tool▁sep｜>"
TOOL_OUTPUTS_BEGIN = "<｜tool▁outputs▁begin｜>"
TOOL_OUTPUTS_END = "<｜tool▁outputs▁end｜>"
TOOL_OUTPUT_BEGIN = "<｜tool▁output▁begin｜>"
TOOL_OUTPUT_END = "<｜tool▁output▁end｜>"

# Every marker the tokenizer must hold as one token, in id order after the BPE vocabulary.
ADDED_MARKERS = [
    "<｜fim▁hole｜>", "<｜fim▁begin｜>", "<｜fim▁end｜>", USER, ASSISTANT, "<|EOT|>",
    TOOL_CALLS_BEGIN, TOOL_CALLS_END, TOOL_CALL_BEGIN, TOOL_CALL_END,
    TOOL_OUTPUTS_BEGIN, TOOL_OUTPUTS_END, TOOL_OUTPUT_BEGIN, TOOL_OUTPUT_END, TOOL_SEP,
    THINK_BEGIN, THINK_END,
]
SPECIAL_MARKERS = [BOS, EOS, PAD]  # ids 0, 1, 2 as in DeepSeek-V3

THINK_SYSTEM = "Think step by step before you answer."


@dataclass
class Segment:
    marker: bool
    text: str
    trained: bool = False


def _assistant_body(msg):
    """Content, think block and tool calls of an assistant message (all trained)."""
    out = []
    reasoning = msg.get("reasoning")
    if reasoning is not None:
        out += [Segment(True, THINK_BEGIN, True), Segment(False, "\n" + reasoning + "\n", True),
                Segment(True, THINK_END, True), Segment(False, "\n\n", True)]
    if msg.get("content"):
        out.append(Segment(False, msg["content"], True))
    calls = msg.get("tool_calls") or []
    if calls:
        out.append(Segment(True, TOOL_CALLS_BEGIN, True))
        for k, call in enumerate(calls):
            if k > 0:
                out.append(Segment(False, "\n", True))
            out += [Segment(True, TOOL_CALL_BEGIN, True), Segment(False, "function", True),
                    Segment(True, TOOL_SEP, True),
                    Segment(False, f"{call['name']}\n```json\n{call['arguments'] or '{}'}\n```", True),
                    Segment(True, TOOL_CALL_END, True)]
        out.append(Segment(True, TOOL_CALLS_END, True))
    out.append(Segment(True, EOS, True))
    return out


def render(messages, add_generation_prompt):
    """messages: dicts with role (system|user|assistant|tool), content, and for assistant turns
    optional reasoning, tool_calls [{name, arguments}] and context (True: history, not trained). Mirrors render_prompt_v3; with
    add_generation_prompt=False the trailing assistant header is left out (training documents)."""
    out = [Segment(True, BOS)]
    system = "\n\n".join(m["content"] for m in messages if m["role"] == "system")
    if system:
        out.append(Segment(False, system))
    after_tool_outputs = False
    last_role = "system"
    for i, m in enumerate(messages):
        role = m["role"]
        if role == "system":
            continue
        if role == "user":
            out += [Segment(True, USER), Segment(False, m["content"])]
            after_tool_outputs = False
        elif role == "assistant":
            if not after_tool_outputs:
                out.append(Segment(True, ASSISTANT))
            after_tool_outputs = False
            body = _assistant_body(m)
            if m.get("context"):  # an earlier turn given as history only: rendered, not trained
                body = [Segment(x.marker, x.text, False) for x in body]
            out += body
        elif role == "tool":
            if i == 0 or messages[i - 1]["role"] != "tool":
                out.append(Segment(True, TOOL_OUTPUTS_BEGIN))
            else:
                out.append(Segment(False, "\n"))
            out += [Segment(True, TOOL_OUTPUT_BEGIN), Segment(False, m["content"]), Segment(True, TOOL_OUTPUT_END)]
            if i + 1 == len(messages) or messages[i + 1]["role"] != "tool":
                out.append(Segment(True, TOOL_OUTPUTS_END))
                after_tool_outputs = True
        else:
            raise ValueError(f"role {role!r} is not in the V3 encoding")
        last_role = role
    if add_generation_prompt and last_role != "tool":
        out.append(Segment(True, ASSISTANT))
    return [s for s in out if s.marker or s.text]


def to_text(segments):
    return "".join(s.text for s in segments)


def to_api_messages(messages):
    """The same conversation as OpenAI chat messages (for the engine's renderer and the evaluator)."""
    out = []
    for i, m in enumerate(messages):
        if m["role"] == "assistant":
            a = {"role": "assistant", "content": m.get("content") or ""}
            if m.get("tool_calls"):
                a["tool_calls"] = [{"id": f"call_{i}_{k}", "type": "function",
                                    "function": {"name": c["name"], "arguments": c["arguments"]}}
                                   for k, c in enumerate(m["tool_calls"])]
            out.append(a)
        elif m["role"] == "tool":
            prev = i - 1
            while messages[prev]["role"] == "tool":
                prev -= 1
            k = i - prev - 1
            out.append({"role": "tool", "tool_call_id": f"call_{prev}_{k}", "content": m["content"]})
        else:
            out.append({"role": m["role"], "content": m["content"]})
    return out
