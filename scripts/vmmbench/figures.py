"""Figures: distributions, medians, ratios, how a number is printed, and
one row of the summary table."""


def stats(values, unit):
    """count, min, p50/p90/p99 (nearest rank), max, mean."""
    v = sorted(values)
    n = len(v)
    if not n:
        return {"unit": unit, "count": 0}

    def pct(p):
        rank = (n * p + 99) // 100
        return v[max(rank, 1) - 1]
    return {"unit": unit, "count": n, "min": v[0], "p50": pct(50), "p90": pct(90),
            "p99": pct(99), "max": v[-1], "mean": sum(v) / n}


def median(xs):
    s = sorted(xs)
    n = len(s)
    return s[n // 2] if n % 2 else (s[n // 2 - 1] + s[n // 2]) / 2


def ratio(a, b):
    return a / b if a is not None and b not in (None, 0) else None


def fmt(v, unit=""):
    """A figure for the summary: thousands grouped, 3 significant digits
    below 100, "—" for none."""
    if v is None:
        return "—"
    if isinstance(v, float) and v >= 100 or isinstance(v, int):
        s = f"{v:,.0f}"
    elif isinstance(v, float):
        s = f"{v:.3g}" if v < 10 else f"{v:.1f}"
    else:
        s = str(v)
    return s + (" " + unit if unit else "")


def us(ns_stats, keys):
    """The statistics' keys in µs, one decimal, as table cells."""
    return [f"{ns_stats[k] / 1e3:.1f}" for k in keys]


def mode_name(mode):
    return "MSI-X" if mode == "msix" else "INTx"


def summary_row(section, figure, ours, reference, reference_value, ratio_, target, met,
                emulated=False, status=None, unit=""):
    """One row of results.json's summary (and of summary.md's table):
    emulated marks a figure that includes guest ring-0 emulation on a host
    that emulates it; status says why ours is missing."""
    return {"section": section, "figure": figure, "ours": ours, "reference": reference,
            "reference_value": reference_value, "ratio": ratio_, "target": target,
            "met": met, "emulated": emulated, "status": status, "unit": unit}


def overall_status(statuses):
    """A section's status from its parts': theirs when they agree, else partial."""
    s = set(statuses)
    return s.pop() if len(s) == 1 else "partial"
