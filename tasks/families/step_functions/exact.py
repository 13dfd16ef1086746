"""Exact arithmetic for step functions (the tasks' ``check_exact``): heights as integers, and their
convolution in integers, fast enough for tens of thousands of steps.

Every float is a dyadic rational m / 2^k, so multiplying all heights by the largest 2^k among them turns
each into an integer with no rounding. The convolution of two integer sequences is then exact; it is
computed by Kronecker substitution: each sequence is packed into one big integer, one digit per entry in
base 2^w (w bits leave room for any coefficient), the two are multiplied (Python's big-integer product),
and the coefficients are read back digit by digit: one subquadratic product (Karatsuba) instead of
a Python loop over the n^2 products.
"""

from __future__ import annotations

MAX_WORK_BITS = 16 << 20  # packed operand size beyond which an exact check answers "unchecked" (it would take minutes)


def packed_bits(a: list[int], b: list[int]) -> int:
    """Bits of the larger packed operand: the cost measure of ``convolve``."""
    width = max(a, default=0).bit_length() + max(b, default=0).bit_length() + max(len(a), len(b)).bit_length() + 1
    return max(len(a), len(b)) * width


def convolve(a: list[int], b: list[int]) -> list[int]:
    """The full convolution c_m = sum_i a_i b_(m-i) of two non-empty sequences of integers >= 0, exactly."""
    if not a or not b or min(a) < 0 or min(b) < 0:
        raise ValueError("exact convolution needs two non-empty sequences of integers >= 0")
    width = max(a).bit_length() + max(b).bit_length() + min(len(a), len(b)).bit_length() + 1  # c_m < 2^width
    size = (width + 7) // 8  # bytes per digit
    packed = [int.from_bytes(b"".join(v.to_bytes(size, "little") for v in seq), "little") for seq in (a, b)]
    product = (packed[0] * packed[1]).to_bytes((len(a) + len(b)) * size, "little")
    return [int.from_bytes(product[m * size:(m + 1) * size], "little") for m in range(len(a) + len(b) - 1)]
