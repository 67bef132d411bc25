#!/usr/bin/env python3
"""Independent check of constrained outputs: each JSONL line is {"kind", "constraint", "output"}.

kind json_schema: the output parses as JSON and validates against the schema (python3-jsonschema,
Draft 2020-12, with its format checker); json_object: parses to a JSON object; regex: re.fullmatch
(Python's engine, ASCII classes as our compiler's); choice: one of the choices. Exit 1 on the first bad line.
"""
import json
import re
import sys

import jsonschema


def main() -> int:
    n = 0
    for lineno, line in enumerate(open(sys.argv[1], encoding="utf-8"), 1):
        rec = json.loads(line)
        kind, constraint, output = rec["kind"], rec["constraint"], rec["output"]
        try:
            if kind == "json_schema":
                validator = jsonschema.Draft202012Validator(constraint, format_checker=jsonschema.FormatChecker())
                validator.validate(json.loads(output))
            elif kind == "json_object":
                if not isinstance(json.loads(output), dict):
                    raise ValueError("not an object")
            elif kind == "regex":
                if re.fullmatch(constraint, output, flags=re.ASCII) is None:
                    raise ValueError("no full match")
            elif kind == "choice":
                if output not in constraint:
                    raise ValueError("not a choice")
            else:
                raise ValueError(f"unknown kind {kind}")
        except Exception as e:  # noqa: BLE001 - any failure is a test failure with its reason
            print(f"{sys.argv[1]}:{lineno}: {kind}: {e}\n  output: {output!r}", file=sys.stderr)
            return 1
        n += 1
    print(f"validate_outputs: {n} outputs valid")
    return 0 if n > 0 else 1


if __name__ == "__main__":
    sys.exit(main())
