"""Generated chat tasks: arithmetic (direct and with a worked solution in the think block), unit
conversions, JSON records, tool calls for the three demo tools, definitions, multi-turn chats.

Every generator takes a random.Random and returns a conversation (list of message dicts, see
chat_format.render). Arithmetic operand pairs are split into train and held-out by a hash, so the
evaluation (evaluate_demo.py) asks questions the model never saw.
"""
import json
import zlib

from chat_format import THINK_SYSTEM

TOOLS_SYSTEM = (
    "You can call these tools:\n"
    "calculator(expression): evaluates an arithmetic expression with +, - and *.\n"
    "clock(timezone): the current date and time in an IANA timezone.\n"
    "dictionary(word): the definition of an English word.\n"
    "Call a tool when it helps, then answer from its result.")

OPS = {"+": lambda a, b: a + b, "-": lambda a, b: a - b, "*": lambda a, b: a * b}
OP_WORDS = {"+": ["plus", "+"], "-": ["minus", "-"], "*": ["times", "*", "x"]}


def is_held_out(a, op, b):
    """One operand pair in ten is reserved for evaluation."""
    return zlib.crc32(f"{a}{op}{b}".encode()) % 10 == 0


def with_shared_digits(rng, a, b):
    """b with 1..n-1 of its n lowest digits (n: the shorter operand's length) replaced by a's digits in
    the same columns, never all of them and never a leading zero, so b keeps its size. Subtraction and
    comparison need equal columns: uniform operands rarely share a leading digit, the case where
    "which is larger" depends on a later column."""
    n = min(len(str(a)), len(str(b)))
    if n < 2:
        return b
    da, db = _digits(a, n), _digits(b, len(str(b)))
    for col in rng.sample(range(n), rng.randint(1, n - 1)):
        if not (col == len(db) - 1 and da[col] == 0):
            db[col] = da[col]
    return int("".join(map(str, reversed(db))))


def operands(rng, op, digits_a, digits_b, held_out=False, shared_digits=False):
    while True:
        a = rng.randint(10 ** (digits_a - 1), 10 ** digits_a - 1)
        b = rng.randint(10 ** (digits_b - 1), 10 ** digits_b - 1)
        if shared_digits:
            b = with_shared_digits(rng, a, b)
        if is_held_out(a, op, b) == held_out:
            return a, b


def arithmetic_question(rng, a, op, b):
    word = rng.choice(OP_WORDS[op])
    templates = ["What is {a} {w} {b}?", "Compute {a} {w} {b}.", "{a} {w} {b} = ?",
                 "Calculate {a} {w} {b}.", "What's {a} {w} {b}?", "{a} {w} {b}"]
    return rng.choice(templates).format(a=a, w=word, b=b)


def _digits(n, width):
    return [int(c) for c in str(n).rjust(width, "0")][::-1]


def worked_addition(a, b):
    width = max(len(str(a)), len(str(b)))
    da, db = _digits(a, width), _digits(b, width)
    lines, carry = [], 0
    for x, y in zip(da, db):
        s = x + y + carry
        lines.append(f"{x} + {y}" + (f" + {carry}" if carry else "") + f" = {s}, write {s % 10}"
                     + (", carry 1" if s >= 10 else ""))
        carry = s // 10
    if carry:
        lines.append("write the carry 1")
    return "\n".join(lines)


def relation(a, b):
    return "<" if a < b else ">" if a > b else "="


def comparison_steps(a, b):
    """Which of two numbers is larger, the way the worked subtraction decides it: by the digit counts,
    or column by column from the left up to the first that differs: "4 = 4, 2 < 5, so 42 < 45"."""
    la, lb = len(str(a)), len(str(b))
    if la != lb:
        steps = [f"{la} digit{'s' if la > 1 else ''} {relation(la, lb)} {lb} digit{'s' if lb > 1 else ''}"]
    else:
        steps = []
        for x, y in zip(str(a), str(b)):
            steps.append(f"{x} {relation(x, y)} {y}")
            if x != y:
                break
    return ", ".join(steps) + f", so {a} {relation(a, b)} {b}"


def worked_subtraction(a, b):
    """First which operand is larger ("42 vs 45: 4 = 4, 2 < 5, so 42 < 45"; when the first is smaller the
    result is negative and the larger minus the smaller is worked), then every column from the right,
    each compared before it is subtracted: "7 > 3, 7 - 3 = 4", "3 = 3, 3 - 3 = 0",
    "3 < 7, borrow: 13 - 7 = 6"."""
    lines = [f"{a} vs {b}: {comparison_steps(a, b)}"]
    if a < b:
        lines.append(f"negative: {b} - {a} first")
        a, b = b, a
    width = len(str(a))
    da, db = _digits(a, width), _digits(b, width)
    borrow = 0
    for x, y in zip(da, db):
        top = x - borrow
        if top < y:
            lines.append(f"{top} < {y}, borrow: {top + 10} - {y} = {top + 10 - y}")
            borrow = 1
        else:
            lines.append(f"{top} {relation(top, y)} {y}, {top} - {y} = {top - y}")
            borrow = 0
    return "\n".join(lines)


def worked_multiplication(a, b):
    parts = []
    for i, d in enumerate(reversed(str(b))):
        place = int(d) * 10 ** i
        if place:
            parts.append((place, a * place))
    lines = [f"{a} * {p} = {v}" for p, v in parts]
    if len(parts) > 1:
        lines.append(" + ".join(str(v) for _, v in parts) + f" = {a * b}")
    return "\n".join(lines)


WORKED = {"+": worked_addition, "-": worked_subtraction, "*": worked_multiplication}


def arithmetic_sizes(rng, op):
    if op == "*":
        return rng.choice([(2, 1), (2, 2), (2, 2), (2, 2), (3, 1), (3, 2), (1, 2)])
    return rng.choice([(2, 2), (2, 2), (3, 3), (3, 3), (3, 2), (2, 3), (4, 4), (4, 3), (1, 2)])


ALL_OPS = ["+", "+", "-", "-", "*", "*"]
HARD_OPS = ["+", "-", "-", "*", "*"]  # phase 3: subtraction and multiplication lag behind addition
MUL_OPS = ["*"]  # phase 6 (second recipe): multiplication, the skill the shorter recipe left behind


def arithmetic(rng, think=False, ops=ALL_OPS, think_system=True):
    """think: the reply carries the worked solution in a think block; think_system: with the system
    prompt THINK_SYSTEM (phases 1-3 thought only when asked); without it (phase 4), the model's default
    for arithmetic is to think, so a plain chat request gets the worked answer."""
    op = rng.choice(ops)
    a, b = operands(rng, op, *arithmetic_sizes(rng, op), shared_digits=op == "-" and rng.random() < 0.5)
    answer = f"{a} {op} {b} = {OPS[op](a, b)}."
    msgs = [{"role": "user", "content": arithmetic_question(rng, a, op, b)}]
    if think:
        if think_system:
            msgs.insert(0, {"role": "system", "content": THINK_SYSTEM})
        msgs.append({"role": "assistant", "content": answer, "reasoning": WORKED[op](a, b)})
    else:
        msgs.append({"role": "assistant", "content": answer})
    return msgs


def comparison(rng):
    """Which of two numbers is larger, answered with the steps the worked subtraction starts with. Pairs
    share the subtraction's held-out split."""
    a, b = operands(rng, "-", *arithmetic_sizes(rng, "-"), shared_digits=rng.random() < 0.5)
    q = rng.choice(["Which is larger, {a} or {b}?", "Is {a} larger than {b}?", "Compare {a} and {b}.",
                    "Which number is bigger: {a} or {b}?"])
    return [{"role": "user", "content": q.format(a=a, b=b)},
            {"role": "assistant", "content": comparison_steps(a, b) + "."}]


UNITS = [("km", "m", 1000, "kilometers", "meters"), ("m", "cm", 100, "meters", "centimeters"),
         ("kg", "g", 1000, "kilograms", "grams"), ("h", "min", 60, "hours", "minutes"),
         ("min", "s", 60, "minutes", "seconds"), ("days", "h", 24, "days", "hours"),
         ("ft", "in", 12, "feet", "inches"), ("L", "mL", 1000, "liters", "milliliters"),
         ("weeks", "days", 7, "weeks", "days"), ("cm", "mm", 10, "centimeters", "millimeters")]


def unit_conversion(rng):
    short_a, short_b, factor, long_a, long_b = rng.choice(UNITS)
    n = rng.randint(1, 99)
    forward = rng.random() < 0.7
    if forward:
        q = rng.choice(["Convert {n} {la} to {lb}.", "How many {lb} are in {n} {la}?", "{n} {sa} in {sb}?"])
        question = q.format(n=n, la=long_a, lb=long_b, sa=short_a, sb=short_b)
        answer = f"{n} {long_a} = {n * factor} {long_b}."
    else:
        q = rng.choice(["Convert {m} {lb} to {la}.", "How many {la} are in {m} {lb}?"])
        question = q.format(m=n * factor, la=long_a, lb=long_b)
        answer = f"{n * factor} {long_b} = {n} {long_a}."
    return [{"role": "user", "content": question}, {"role": "assistant", "content": answer}]


NAMES = ["Alice", "Bob", "Carol", "David", "Erin", "Frank", "Grace", "Heidi", "Ivan", "Judy", "Mallory",
         "Niaj", "Olivia", "Peggy", "Rupert", "Sybil", "Trent", "Victor", "Walter", "Yusuf", "Zoe"]
CITIES = ["Paris", "Berlin", "Tokyo", "Lagos", "Lima", "Oslo", "Cairo", "Delhi", "Quito", "Seoul", "Rome"]
COLORS = ["red", "green", "blue", "black", "white", "orange", "purple", "yellow"]
FRUITS = ["apple", "banana", "cherry", "grape", "lemon", "mango", "pear", "plum"]


def json_record(rng):
    fields = [("name", rng.choice(NAMES)), ("age", rng.randint(18, 90)), ("city", rng.choice(CITIES)),
              ("color", rng.choice(COLORS)), ("fruit", rng.choice(FRUITS)), ("score", rng.randint(0, 100)),
              ("active", rng.choice([True, False]))]
    rng.shuffle(fields)
    fields = fields[:rng.randint(2, 4)]
    described = ", ".join(f"{k} {json.dumps(v) if isinstance(v, bool) else v}" for k, v in fields)
    q = rng.choice(["Format as JSON: {d}.", "Write a JSON object with {d}.", "Give me JSON for {d}.",
                    "Return this record as JSON: {d}."])
    answer = json.dumps(dict(fields))
    return [{"role": "user", "content": q.format(d=described)}, {"role": "assistant", "content": answer}]


def definition_sentence(word, pos, definition):
    article = "An" if word[0] in "aeiou" else "A"
    if pos == "noun":
        return f"{article} {word} is {'an' if definition[0] in 'aeiou' else 'a'} {definition}." \
            if not definition.startswith(("a ", "an ", "the ", "any ")) else f"{article} {word} is {definition}."
    if pos == "verb":
        return f"To {word} means to {definition}."
    return f'"{word.capitalize()}" means {definition}.'


def word_definition_sentence(word, pos, definition):
    """Phase 4's answer: it starts by repeating the asked word (the same token as in the question, so
    the model learns to copy it rather than to pick a common word), then the WordNet gloss."""
    if pos == "verb":
        return f"The word {word} means to {definition}."
    if pos == "noun" and not definition.startswith(("a ", "an ", "the ", "any ", "one ", "some ")):
        return f"The word {word} means {'an' if definition[0] in 'aeiou' else 'a'} {definition}."
    return f"The word {word} means {definition}."


def definition(rng, words, style="classic"):
    """style "classic" (phases 1-3): "A dog is ...", "To run means to ...", examples half the time;
    "word" (phase 4): word_definition_sentence, no example (short answers)."""
    word, pos, text, example = rng.choice(words)
    q = rng.choice(["What does {w} mean?", "What is the meaning of {w}?", "Define {w}.", "What does \"{w}\" mean?"])
    if style == "word":
        answer = word_definition_sentence(word, pos, text)
    else:
        answer = definition_sentence(word, pos, text)
        if example and rng.random() < 0.5:
            answer += f" For example: \"{example}\"."
    return [{"role": "user", "content": q.format(w=word)}, {"role": "assistant", "content": answer}]


ZONES = [("Tokyo", "Asia/Tokyo", 9), ("London", "Europe/London", 0), ("New York", "America/New_York", -5),
         ("Paris", "Europe/Paris", 1), ("Sydney", "Australia/Sydney", 11), ("Lagos", "Africa/Lagos", 1),
         ("Delhi", "Asia/Kolkata", 5), ("Lima", "America/Lima", -5)]


def tool_call_chat(rng, words, style="classic"):
    kind = rng.choice(["calculator", "calculator", "clock", "dictionary"])
    if kind == "calculator":
        op = rng.choice(["+", "-", "*"])
        a, b = operands(rng, op, rng.randint(2, 4), rng.randint(2, 4))
        expr = f"{a} {op} {b}"
        question = rng.choice(["Use the calculator: {e}", "What is {e}?", "Please compute {e}.", "Calculate {e}."])
        args, result = {"expression": expr}, str(OPS[op](a, b))
        answer = f"{expr} = {result}."
        question = question.format(e=expr)
    elif kind == "clock":
        city, zone, _ = rng.choice(ZONES)
        hh, mm = rng.randint(0, 23), rng.randint(0, 59)
        day = rng.randint(1, 28)
        result = f"2026-{rng.randint(1, 12):02d}-{day:02d} {hh:02d}:{mm:02d}"
        question = rng.choice(["What time is it in {c}?", "What's the time in {c} now?", "Current time in {c}?"])
        question = question.format(c=city)
        args = {"timezone": zone}
        answer = f"It is {result[11:]} on {result[:10]} in {city}."
    else:
        word, pos, text, _ = rng.choice(words)
        question = rng.choice(["Look up the word {w}.", "Use the dictionary: what does {w} mean?",
                               "Check the dictionary for {w}."]).format(w=word)
        args, result = {"word": word}, f"{word} ({pos}): {text}"
        answer = (word_definition_sentence if style == "word" else definition_sentence)(word, pos, text)
    return [{"role": "system", "content": TOOLS_SYSTEM},
            {"role": "user", "content": question},
            {"role": "assistant", "content": "", "tool_calls": [{"name": kind, "arguments": json.dumps(args)}]},
            {"role": "tool", "content": result},
            {"role": "assistant", "content": answer}]


def repeat_words(rng, words):
    """Copy practice: "Repeat after me: garden river" -> "You said: garden river." (each word after a space
    in both, so the same token). A definition starts by naming the asked word, and the first recipe's model
    named another ("What does garden mean?" -> "The word accompen means ..."): it had not learnt to copy a
    word it was never taught to define."""
    said = " ".join(rng.choice(words)[0] for _ in range(rng.randint(1, 4)))
    q = rng.choice(["Repeat after me: {t}", "Say this back: {t}", "Repeat: {t}", "Echo: {t}"])
    return [{"role": "user", "content": q.format(t=said)}, {"role": "assistant", "content": f"You said: {said}."}]


SMALL_TALK = [
    ("Hello!", "Hello! How can I help you today?"),
    ("Hi", "Hi! What can I do for you?"),
    ("Who are you?", "I am a small demo model of the DeepSeek-V3 architecture, trained to chat, do arithmetic, "
                     "write JSON and call tools."),
    ("What can you do?", "I can do arithmetic, convert units, write JSON, define words and call a calculator, "
                         "a clock or a dictionary."),
    ("Thank you!", "You are welcome!"),
    ("Thanks.", "Glad to help."),
    ("How are you?", "I am fine, thank you. How can I help?"),
    ("Goodbye.", "Goodbye! Have a nice day."),
]


def small_talk(rng):
    q, a = rng.choice(SMALL_TALK)
    return [{"role": "user", "content": q}, {"role": "assistant", "content": a}]


def quote(rng, fortunes):
    q = rng.choice(["Tell me a quote.", "Say something wise.", "Give me a fortune.", "Tell me something."])
    return [{"role": "user", "content": q}, {"role": "assistant", "content": rng.choice(fortunes)}]


def multi_turn(rng, words, fortunes, style="classic"):
    """style "word" (phase 4): arithmetic thinks by default and definitions repeat the word; the worked
    solutions of earlier turns are dropped, as a client sends the history (content only), and those
    earlier arithmetic replies are context, not trained (the model's reply to a fresh question thinks)."""
    turns = []
    n = rng.randint(2, 3)
    for k in range(n):
        if style == "word":
            single = rng.choice([lambda: arithmetic(rng, think=True, think_system=False),
                                 lambda: unit_conversion(rng), lambda: json_record(rng),
                                 lambda: definition(rng, words, style="word"), lambda: small_talk(rng)])()
            if k + 1 < n and single[-1].get("reasoning") is not None:
                single[-1] = {"role": "assistant", "content": single[-1]["content"], "context": True}
        else:
            single = rng.choice([lambda: arithmetic(rng), lambda: unit_conversion(rng), lambda: json_record(rng),
                                 lambda: definition(rng, words), lambda: small_talk(rng)])()
        turns += single
    return turns
