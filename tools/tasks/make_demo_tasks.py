#!/usr/bin/env python3
"""Writes the eval task files shipped for the demo model (tasks/*.jsonl), seeded so they are
reproducible: arithmetic (exact match), unit conversion (exact match and multiple choice), JSON
formatting (JSON validity + equality). The answers are computed here, so they are correct by
construction. Usage: tools/tasks/make_demo_tasks.py [OUT_DIR] (default: tasks)."""
import json
import os
import random
import sys

N_ITEMS = 50


def arithmetic(rng):
    items = []
    for i in range(N_ITEMS):
        a, b = rng.randint(2, 99), rng.randint(2, 99)
        op = rng.choice(["+", "-", "*"])
        value = {"+": a + b, "-": a - b, "*": a * b}[op]
        items.append({"id": f"arith-{i}", "question": f"What is {a} {op} {b}?", "answer": str(value)})
    return items


# (from, to, factor): value_in_to = value_in_from * factor
CONVERSIONS = [
    ("kilometers", "meters", 1000), ("meters", "centimeters", 100), ("kilograms", "grams", 1000),
    ("hours", "minutes", 60), ("minutes", "seconds", 60), ("liters", "milliliters", 1000),
    ("days", "hours", 24), ("weeks", "days", 7),
]


def unit_conversion(rng):
    items = []
    for i in range(N_ITEMS):
        src, dst, factor = rng.choice(CONVERSIONS)
        value = rng.randint(1, 60)
        answer = value * factor
        question = f"Convert {value} {src} to {dst}. Give the number only."
        if i % 2 == 0:
            items.append({"id": f"unit-{i}", "question": question, "answer": str(answer)})
        else:
            wrong = {answer * 10, max(1, answer // 10), answer + factor, value}
            wrong.discard(answer)
            choices = [str(answer)] + [str(w) for w in sorted(wrong)[:3]]
            rng.shuffle(choices)
            items.append({"id": f"unit-{i}", "question": f"Convert {value} {src} to {dst}.",
                          "choices": choices, "answer": choices.index(str(answer))})
    return items


NAMES = ["Ada", "Ben", "Chen", "Dara", "Eli", "Fay", "Gus", "Hana"]
CITIES = ["Paris", "Lima", "Oslo", "Cairo", "Kyoto", "Quito"]


def json_formatting(rng):
    items = []
    for i in range(N_ITEMS):
        name, city, age = rng.choice(NAMES), rng.choice(CITIES), rng.randint(18, 90)
        expected = {"name": name, "age": age, "city": city}
        question = (f"{name} is {age} years old and lives in {city}. Write this as a JSON object with the keys "
                    f"\"name\", \"age\" (a number) and \"city\".")
        items.append({"id": f"json-{i}", "type": "json", "question": question, "answer": expected})
    return items


def write(path, items):
    with open(path, "w") as f:
        for item in items:
            f.write(json.dumps(item) + "\n")
    print(f"{path}: {len(items)} items")


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else "tasks"
    os.makedirs(out, exist_ok=True)
    write(os.path.join(out, "arithmetic.jsonl"), arithmetic(random.Random(1)))
    write(os.path.join(out, "unit_conversion.jsonl"), unit_conversion(random.Random(2)))
    write(os.path.join(out, "json_format.jsonl"), json_formatting(random.Random(3)))


main()
