"""The span splice's settings: one rule for the constructor, `generate`'s flags and configs."""

from tracesynth.generators.splice_settings import SPLICE_SETTINGS, splice_setting_problem


def test_zero_is_always_allowed_and_each_setting_has_its_least_value():
    least = {"splice": 16, "splice_walk": 2, "splice_walk_context": 2, "splice_walk_drift": 1}
    assert set(SPLICE_SETTINGS) == set(least)
    for name, smallest in least.items():
        assert splice_setting_problem(name, 0) is None and splice_setting_problem(name, smallest) is None
        assert splice_setting_problem(name, -1) == f"must be {SPLICE_SETTINGS[name][1]}, got -1"
        if smallest > 1:
            assert splice_setting_problem(name, smallest - 1).endswith(f"got {smallest - 1}")
    assert splice_setting_problem("splice", 8) == "must be 0 (off) or an anchor of at least 16 events, got 8"
