"""bench/bench_speed.py's pure parts: the report's counts, the floor, the windows, the profile table, the doc."""

from __future__ import annotations

from bench.bench_speed import (Counts, Floors, MemorySample, ProfileTable, counts_of, floor_seconds, markdown_table,
                               peak_until, replace_section, short_path, top_cumulative, window_ms)


def test_counts_include_the_golden_run_and_read_schedules_and_kills_from_the_summary() -> None:
    report = {"summary": {"schedules": 2, "kills": 3},
              "runs": [{"incarnations": [{}, {}]}, {"incarnations": [{}, {}, {}]}]}
    assert counts_of(report) == Counts(schedules=2, incarnations=6, kills=3, shared=0)


def test_a_shared_incarnation_was_started_and_killed_once() -> None:
    """The second run took its first two incarnations (both killed) from the state the first one's left."""
    report = {"summary": {"schedules": 2, "kills": 3},
              "runs": [{"incarnations": [{}, {}], "shared_incarnations": 0},
                       {"incarnations": [{}, {}, {}], "shared_incarnations": 2}]}
    assert counts_of(report) == Counts(schedules=2, incarnations=4, kills=1, shared=2)


def test_the_floor_is_each_part_times_its_cost_shared_by_the_jobs() -> None:
    floors = Floors(fork=0.001, fsync=0.0002, kill=0.0005)
    seconds = floor_seconds(Counts(schedules=10, incarnations=30, kills=20, shared=0), journal_records=100,
                            floors=floors, jobs=2)
    assert abs(seconds - (30 * 0.001 + 100 * 0.0002 + 20 * 0.0005) / 2) < 1e-12


def test_a_window_is_wall_ms_per_schedule_between_its_first_and_last_arrival() -> None:
    arrivals = [0.0, 0.01, 0.02, 0.05, 0.08, 0.11]
    assert abs(window_ms(arrivals, 0, 3) - 10.0) < 1e-9
    assert abs(window_ms(arrivals, 3, 3) - 30.0) < 1e-9


def test_peak_memory_counts_only_samples_taken_before_the_mark() -> None:
    samples = [MemorySample(0.5, 10, 20), MemorySample(1.5, 30, 35), MemorySample(2.5, 50, 90)]
    arrivals = [1.0, 2.0, 3.0]
    assert peak_until(samples, arrivals, 2) == MemorySample(2.0, 30, 35)
    assert peak_until(samples, arrivals, 3) == MemorySample(3.0, 50, 90)
    assert peak_until(samples, arrivals, 30_000) == MemorySample(3.0, 50, 90)  # fewer runs than the mark


def test_the_profile_table_ranks_by_cumulative_time_and_shortens_paths() -> None:
    stats: ProfileTable = {("/x/site-packages/killpoint/harness/execute/runner.py", 12, "run"): (1, 4, 0.5, 2.0, {}),
             ("~", 0, "<built-in method posix.fork>"): (9, 9, 1.0, 1.0, {}),
             ("/x/killpoint/harness/frontends/spec.py", 3, "build"): (1, 1, 0.1, 3.0, {})}
    rows = top_cumulative(stats, 2)
    assert rows == [["`build` (killpoint/harness/frontends/spec.py:3)", "1", "0.10", "3.00"],
                    ["`run` (killpoint/harness/execute/runner.py:12)", "4", "0.50", "2.00"]]
    assert short_path("/somewhere/else.py") == "/somewhere/else.py"


def test_markdown_table_has_a_header_a_rule_and_a_row_each() -> None:
    assert markdown_table(["a", "b"], [[1, 2]]) == ["| a | b |", "|---|---|", "| 1 | 2 |"]


def test_a_section_is_appended_once_then_replaced_between_its_markers_leaving_the_rest() -> None:
    doc = "# Performance\n\nprose of another section\n"
    first = replace_section(doc, "targets", ["old figures"])
    assert first.startswith(doc.rstrip("\n")) and "old figures" in first
    second = replace_section(first + "\nprose after\n", "targets", ["new figures"])
    assert "old figures" not in second and "new figures" in second
    assert second.count("<!-- bench_speed:targets begin -->") == 1 and second.endswith("prose after\n")
    assert replace_section(second, "flat", ["flat"]).count("bench_speed:") == 4


def test_the_profile_table_leaves_out_the_frames_that_only_wrap_the_session() -> None:
    stats: ProfileTable = {("<frozen runpy>", 201, "run_module"): (1, 1, 0.0, 9.0, {}),
             ("~", 0, "<built-in method builtins.exec>"): (1, 1, 0.0, 9.0, {}),
             ("/x/killpoint/harness/frontends/cli.py", 186, "main"): (1, 1, 0.0, 8.0, {})}
    assert [row[0] for row in top_cumulative(stats, 5)] == ["`main` (killpoint/harness/frontends/cli.py:186)"]
