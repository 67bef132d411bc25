#!/usr/bin/env python3
"""Checks that #include lines follow the module dependency arrows of docs/architecture.md.

A file under src/<module>/ may include only headers of <module> itself and of the modules listed for it
below. apps/, tools/, tests/, bench/ and fuzz/ sit on top and may include anything. Exit status 1 lists every
violation as FILE:LINE: <module> must not include <header>.
"""
import pathlib
import re
import sys

# module -> modules it may depend on (besides itself). Keep in sync with docs/architecture.md.
ALLOWED = {
    "base": set(),
    "tensor": {"base"},
    "kernels": {"base", "tensor"},
    "weights": {"base", "tensor"},
    "kvcache": {"base"},
    "tokenizer": {"base"},
    "sampling": {"base", "tensor", "kernels"},  # kernels/isa.h only: the per-ISA loop tables
    "grammar": {"base", "tokenizer"},
    "model": {"base", "tensor", "kernels", "weights"},
    "engine": {"base", "tensor", "model", "kvcache", "tokenizer", "sampling", "grammar"},
    "recipe": {"base", "tokenizer"},
    "transport": {"base"},
    "http": {"base"},
    "server": {"base", "http", "engine", "recipe", "tokenizer", "sampling", "transport", "grammar"},
    "cluster": {"base", "http", "engine", "recipe", "tokenizer", "transport", "kvcache", "cluster/router"},
    # Expert parallelism over MPI: plugs into the model's ExpertExchange seam, never the engine.
    "parallel": {"base", "model"},
    # The request router (deepinfer route) never loads a model: no engine, model or kernels.
    "cluster/router": {"base", "http", "recipe", "tokenizer"},
}
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')


def module_of(rel_path: str) -> str:
    """The longest ALLOWED key that is a folder prefix of rel_path ("cluster/router/x.h" -> "cluster/router")."""
    parts = rel_path.split("/")
    for n in range(len(parts) - 1, 0, -1):
        key = "/".join(parts[:n])
        if key in ALLOWED:
            return key
    return parts[0]


def main() -> int:
    root = pathlib.Path(__file__).resolve().parent.parent
    src = root / "src"
    violations = []
    for path in sorted(src.rglob("*")):
        if path.suffix not in {".h", ".hpp", ".cpp", ".cc"}:
            continue
        module = module_of(path.relative_to(src).as_posix())
        if module not in ALLOWED:
            violations.append(f"{path.relative_to(root)}:1: unknown module '{module}' (add it to tools/check_includes.py)")
            continue
        allowed = ALLOWED[module] | {module}
        for lineno, line in enumerate(path.read_text(encoding="utf-8", errors="replace").splitlines(), 1):
            m = INCLUDE.match(line)
            if not m:
                continue
            header = m.group(1)
            target = module_of(header) if "/" in header else module  # "x.h" = same folder
            if target in ALLOWED and target not in allowed:
                violations.append(f"{path.relative_to(root)}:{lineno}: {module} must not include {header}")
    for v in violations:
        print(v)
    if violations:
        print(f"check_includes: {len(violations)} violation(s)")
        return 1
    print("check_includes: all include arrows respected")
    return 0


if __name__ == "__main__":
    sys.exit(main())
