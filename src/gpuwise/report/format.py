"""Number formatting shared by every rendered table: unknown values show as an em dash, never 0."""

from __future__ import annotations

UNKNOWN = "—"


def number(value: float | None) -> str:
    """``1979.0`` -> ``1,979``; ``494.5`` -> ``494.5``; ``0.125`` -> ``0.125``; None -> ``—``."""
    if value is None:
        return UNKNOWN
    if abs(value) >= 1000 or float(value).is_integer():
        return f"{value:,.0f}"
    if abs(value) >= 10:
        return f"{value:,.1f}"
    return f"{value:.3g}"


def ratio(value: float | None) -> str:
    """``2.0`` -> ``2.00x``; None -> ``—``."""
    return UNKNOWN if value is None else f"{value:.2f}x"


def quantity(value: float | None, unit: str) -> str:
    """``(330.3, "TFLOPS")`` -> ``330.3 TFLOPS``; an unknown value is a bare dash, no unit."""
    return UNKNOWN if value is None else f"{number(value)} {unit}"
