"""The stored form of a tool vector, written here from docs/semantic.md byte by byte, apart from
the code that packs and scans them: values in −7..7, two a byte, the even dimension's in the high
nibble, 4-bit two's complement, an odd count's last low nibble 0."""

from __future__ import annotations


def pack_values(values: list[int]) -> bytes:
    nibbles = [value & 0x0F for value in values] + [0] * (len(values) % 2)
    return bytes(high << 4 | low for high, low in zip(nibbles[0::2], nibbles[1::2], strict=True))


def unpack_values(stored: bytes, dimensions: int) -> list[int]:
    """The ``dimensions`` values of a stored vector, nibble by nibble."""
    values = []
    for byte in stored:
        for nibble in (byte >> 4, byte & 0x0F):
            values.append(nibble - 16 if nibble >= 8 else nibble)
    assert len(stored) == (dimensions + 1) // 2, f"{len(stored)} bytes for {dimensions} dimensions"
    assert all(value == 0 for value in values[dimensions:]), "a padding nibble is not 0"
    return values[:dimensions]
