"""BLAKE3 in pure Python: the keyed hash of callback signatures (32-byte output).

No BLAKE3 package is needed: callback ids are short, so speed does not matter here. This follows the
BLAKE3 specification's reference implementation (chunks of 1024 bytes, blocks of 64, a binary tree of
chaining values merged as chunks complete) and is checked against vectors made with the reference
``b3sum --keyed``.
"""

from __future__ import annotations

__all__ = ["blake3_keyed"]

_MASK = 0xFFFFFFFF
_IV = (
    0x6A09E667,
    0xBB67AE85,
    0x3C6EF372,
    0xA54FF53A,
    0x510E527F,
    0x9B05688C,
    0x1F83D9AB,
    0x5BE0CD19,
)
_PERMUTATION = (2, 6, 3, 10, 7, 0, 4, 13, 1, 11, 12, 5, 9, 14, 15, 8)
_CHUNK_START = 1 << 0
_CHUNK_END = 1 << 1
_PARENT = 1 << 2
_ROOT = 1 << 3
_KEYED_HASH = 1 << 4
_BLOCK_LEN = 64
_CHUNK_LEN = 1024


def _g(s: list[int], a: int, b: int, c: int, d: int, x: int, y: int) -> None:
    s[a] = (s[a] + s[b] + x) & _MASK
    v = s[d] ^ s[a]
    s[d] = ((v >> 16) | (v << 16)) & _MASK
    s[c] = (s[c] + s[d]) & _MASK
    v = s[b] ^ s[c]
    s[b] = ((v >> 12) | (v << 20)) & _MASK
    s[a] = (s[a] + s[b] + y) & _MASK
    v = s[d] ^ s[a]
    s[d] = ((v >> 8) | (v << 24)) & _MASK
    s[c] = (s[c] + s[d]) & _MASK
    v = s[b] ^ s[c]
    s[b] = ((v >> 7) | (v << 25)) & _MASK


def _compress(cv: list[int], block: list[int], counter: int, block_len: int, flags: int) -> list[int]:
    s = [
        *cv,
        _IV[0],
        _IV[1],
        _IV[2],
        _IV[3],
        counter & _MASK,
        (counter >> 32) & _MASK,
        block_len,
        flags,
    ]
    m = list(block)
    for r in range(7):
        _g(s, 0, 4, 8, 12, m[0], m[1])
        _g(s, 1, 5, 9, 13, m[2], m[3])
        _g(s, 2, 6, 10, 14, m[4], m[5])
        _g(s, 3, 7, 11, 15, m[6], m[7])
        _g(s, 0, 5, 10, 15, m[8], m[9])
        _g(s, 1, 6, 11, 12, m[10], m[11])
        _g(s, 2, 7, 8, 13, m[12], m[13])
        _g(s, 3, 4, 9, 14, m[14], m[15])
        if r < 6:
            m = [m[i] for i in _PERMUTATION]
    for i in range(8):
        s[i] ^= s[i + 8]
        s[i + 8] ^= cv[i]
    return s


def _words(block: bytes) -> list[int]:
    """A block of up to 64 bytes as 16 little-endian words (zero-padded)."""
    padded = block.ljust(_BLOCK_LEN, b"\0")
    return [int.from_bytes(padded[i : i + 4], "little") for i in range(0, _BLOCK_LEN, 4)]


class _Output:
    """What a chunk or parent node produces: its chaining value, or the root hash."""

    __slots__ = ("cv", "block", "counter", "block_len", "flags")

    def __init__(self, cv: list[int], block: list[int], counter: int, block_len: int, flags: int) -> None:
        self.cv = cv
        self.block = block
        self.counter = counter
        self.block_len = block_len
        self.flags = flags

    def chaining_value(self) -> list[int]:
        return _compress(self.cv, self.block, self.counter, self.block_len, self.flags)[:8]

    def root_bytes(self) -> bytes:
        words = _compress(self.cv, self.block, 0, self.block_len, self.flags | _ROOT)[:8]
        return b"".join(w.to_bytes(4, "little") for w in words)


def _chunk_output(key: list[int], chunk: bytes, counter: int, flags: int) -> _Output:
    """Compresses every block of one chunk but the last; returns the last block's output."""
    cv = key
    blocks = [chunk[i : i + _BLOCK_LEN] for i in range(0, len(chunk), _BLOCK_LEN)] or [b""]
    for n, block in enumerate(blocks[:-1]):
        start = _CHUNK_START if n == 0 else 0
        cv = _compress(cv, _words(block), counter, _BLOCK_LEN, flags | start)[:8]
    last = blocks[-1]
    start = _CHUNK_START if len(blocks) == 1 else 0
    return _Output(cv, _words(last), counter, len(last), flags | start | _CHUNK_END)


def _parent_output(left: list[int], right: list[int], key: list[int], flags: int) -> _Output:
    return _Output(key, left + right, 0, _BLOCK_LEN, flags | _PARENT)


def blake3_keyed(key: bytes, message: bytes) -> bytes:
    """The 32-byte BLAKE3 keyed hash of ``message`` under the 32-byte ``key``."""
    if len(key) != 32:
        raise ValueError("a BLAKE3 key is 32 bytes")
    key_words = [int.from_bytes(key[i : i + 4], "little") for i in range(0, 32, 4)]
    flags = _KEYED_HASH
    chunks = [message[i : i + _CHUNK_LEN] for i in range(0, len(message), _CHUNK_LEN)] or [b""]
    stack: list[list[int]] = []
    for counter, chunk in enumerate(chunks[:-1]):
        cv = _chunk_output(key_words, chunk, counter, flags).chaining_value()
        # Merge completed subtrees: one merge per trailing 1 bit of the chunk count so far.
        total = counter + 1
        while total & 1 == 0:
            cv = _parent_output(stack.pop(), cv, key_words, flags).chaining_value()
            total >>= 1
        stack.append(cv)
    output = _chunk_output(key_words, chunks[-1], len(chunks) - 1, flags)
    while stack:
        output = _parent_output(stack.pop(), output.chaining_value(), key_words, flags)
    return output.root_bytes()
