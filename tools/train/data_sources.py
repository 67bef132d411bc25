"""Text from Debian packages with free licenses (docs/demo-model.md lists them with their licenses).

wordnet-base   /usr/share/wordnet/data.*          definitions (the dictionary tool and "what does X mean")
python3-doc    /usr/share/doc/python3-doc/html/_sources/**/*.rst.txt   English technical prose
fortunes-min   /usr/share/games/fortunes/{fortunes,literature,riddles}  short quotes and riddles
"""
import glob
import os
import re

WORDNET_DIR = "/usr/share/wordnet"
PYDOC_DIR = "/usr/share/doc/python3-doc/html/_sources"
FORTUNE_FILES = ["/usr/share/games/fortunes/" + n for n in ("fortunes", "literature", "riddles")]
POS_NAMES = {"n": "noun", "v": "verb", "a": "adjective", "s": "adjective", "r": "adverb"}


def require(path, package):
    if not os.path.exists(path):
        raise SystemExit(f"{path}: missing; install the Debian package {package} (scripts/setup.sh)")


def wordnet_definitions():
    """(word, part of speech, definition, example or None) for single-word lemmas."""
    require(WORDNET_DIR + "/data.noun", "wordnet-base")
    out = []
    for part in ("noun", "verb", "adj", "adv"):
        with open(f"{WORDNET_DIR}/data.{part}", encoding="latin-1") as f:
            for line in f:
                if line.startswith("  ") or "|" not in line:
                    continue  # license header
                head, gloss = line.split("|", 1)
                fields = head.split()
                pos = POS_NAMES[fields[2]]
                n_words = int(fields[3], 16)
                words = [fields[4 + 2 * i] for i in range(n_words)]
                parts = [p.strip() for p in gloss.strip().split(";")]
                definition = parts[0]
                examples = [p.strip('"') for p in parts[1:] if p.startswith('"') and p.endswith('"')]
                for w in words[:2]:
                    if w.isalpha() and w.islower() and 2 < len(w) < 16 and 10 < len(definition) < 140:
                        out.append((w, pos, definition, examples[0] if examples else None))
    return out


INDEX_PARTS = {"noun": "noun", "verb": "verb", "adjective": "adj", "adverb": "adv"}


def _first_sense_gloss(part, offset):
    """Definition and first example of the synset at byte `offset` of data.<part>."""
    with open(f"{WORDNET_DIR}/data.{part}", encoding="latin-1") as f:
        f.seek(offset)
        line = f.readline()
    gloss = line.split("|", 1)[1]
    parts = [p.strip() for p in gloss.strip().split(";")]
    examples = [p.strip('"') for p in parts[1:] if p.startswith('"') and p.endswith('"')]
    return parts[0], examples[0] if examples else None


def common_definitions(n_words=1500):
    """The n most frequent single-word lemmas (SemCor tag counts, WordNet's cntlist.rev), each once,
    with its most frequent part of speech and its first (most frequent) sense: a vocabulary small
    enough for the demo model to learn what its words mean, unlike all 92k WordNet glosses."""
    require(WORDNET_DIR + "/cntlist.rev", "wordnet-base")
    ss_pos = {"1": "noun", "2": "verb", "3": "adjective", "4": "adverb", "5": "adjective"}
    counts = {}
    with open(f"{WORDNET_DIR}/cntlist.rev", encoding="latin-1") as f:
        for line in f:
            key, _, tag_count = line.split()
            lemma, rest = key.split("%", 1)
            pos = ss_pos.get(rest[0])
            if pos and lemma.isalpha() and lemma.islower() and 2 < len(lemma) < 16:
                counts[(lemma, pos)] = counts.get((lemma, pos), 0) + int(tag_count)
    best = {}
    for (lemma, pos), c in counts.items():
        if c > best.get(lemma, ("", -1))[1]:
            best[lemma] = (pos, c)
    ranked = sorted(best.items(), key=lambda kv: (-kv[1][1], kv[0]))
    first_offset = {}
    for pos, part in INDEX_PARTS.items():
        with open(f"{WORDNET_DIR}/index.{part}", encoding="latin-1") as f:
            for line in f:
                if line.startswith("  "):
                    continue
                fields = line.split()
                synset_cnt = int(fields[2])
                first_offset[(fields[0], pos)] = int(fields[-synset_cnt])
    out = []
    for lemma, (pos, _) in ranked:
        if (lemma, pos) not in first_offset:
            continue
        definition, example = _first_sense_gloss(INDEX_PARTS[pos], first_offset[(lemma, pos)])
        if 10 < len(definition) < 140:
            out.append((lemma, pos, definition, example))
        if len(out) == n_words:
            break
    return out


def _rst_paragraphs(text):
    for block in re.split(r"\n\s*\n", text):
        lines = block.split("\n")
        if any(l.startswith((" ", "\t", "..", "=", "-", "*", "+", "|", ">>>")) for l in lines):
            continue
        para = " ".join(l.strip() for l in lines)
        para = re.sub(r":[a-z:]+:`~?([^`<]*?)(?: <[^>]*>)?`", r"\1", para)  # :func:`x` -> x
        para = para.replace("``", "").replace("`", "").replace("**", "")
        if 80 <= len(para) <= 700 and para.isascii() and para[0].isupper() and para.endswith("."):
            yield para


def python_doc_paragraphs():
    require(PYDOC_DIR, "python3-doc")
    out = []
    for path in sorted(glob.glob(PYDOC_DIR + "/**/*.rst.txt", recursive=True)):
        if "/whatsnew/" in path or "/c-api/" in path:
            continue
        with open(path, encoding="utf-8", errors="replace") as f:
            out.extend(_rst_paragraphs(f.read()))
    return out


def fortunes():
    for p in FORTUNE_FILES:
        require(p, "fortunes-min")
    out = []
    for path in FORTUNE_FILES:
        with open(path, encoding="utf-8", errors="replace") as f:
            for entry in f.read().split("\n%\n"):
                entry = entry.strip("\n")
                if 20 <= len(entry) <= 400 and entry.isascii():
                    out.append(entry)
    return out
