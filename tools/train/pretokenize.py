"""DeepSeek-V3's pre-tokenizer (tokenizer.json `pre_tokenizer`) and GPT-2's byte-to-unicode map.

Three regex splits with behaviour Isolated (matches and the gaps between them both become
pieces), applied in order, then ByteLevel without its own regex. Needs python3-regex for \\p{..}.
"""
import regex

# Copied verbatim from models/tokenizer/deepseek-v3/tokenizer.json.
SPLIT_PATTERNS = [
    r"\p{N}{1,3}",
    r"[一-龥぀-ゟ゠-ヿ]+",
    r"[!\"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+| ?[\p{P}\p{S}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+",
]
_COMPILED = [regex.compile(p) for p in SPLIT_PATTERNS]


def _split_isolated(piece, pattern):
    out, last = [], 0
    for m in pattern.finditer(piece):
        if m.start() > last:
            out.append(piece[last:m.start()])
        if m.end() > m.start():
            out.append(m.group())
        last = m.end()
    if last < len(piece):
        out.append(piece[last:])
    return out


def pre_tokenize(text):
    pieces = [text]
    for pattern in _COMPILED:
        pieces = [q for p in pieces for q in _split_isolated(p, pattern)]
    return pieces


def bytes_to_unicode():
    """GPT-2's reversible map from bytes to printable unicode characters."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {b: chr(c) for b, c in zip(bs, cs)}


BYTE_TO_CHAR = bytes_to_unicode()


def byte_level(piece):
    return "".join(BYTE_TO_CHAR[b] for b in piece.encode("utf-8"))
