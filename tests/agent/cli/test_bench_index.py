from pathlib import Path

from agent.cli.bench import default_bench_index


def test_each_set_of_corpus_paths_gets_its_own_cached_index(tmp_path: Path) -> None:
    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl.gz"
    home = tmp_path / "home"
    both = default_bench_index(home, [a, b])
    assert both == default_bench_index(home, [b, a])  # order does not matter
    assert both.parent == home / "bench-index"
    assert len({both, default_bench_index(home, [a]), default_bench_index(home, [b])}) == 3
