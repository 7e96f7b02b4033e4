"""Code shared by slocheck.py and ksearch.py."""


def dur_ms(s):
    if s is None:
        return None
    s = str(s)
    for unit, f in (("ms", 1), ("us", 1e-3), ("µs", 1e-3), ("ns", 1e-6), ("s", 1000), ("m", 60000)):
        if s.endswith(unit):
            try:
                return float(s[: -len(unit)]) * f
            except ValueError:
                pass
    raise ValueError(s)
