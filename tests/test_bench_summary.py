"""bench/all.py's summary: each section's JSON read into goal lines, met or not."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

ALL = Path(__file__).resolve().parent.parent / "bench" / "all.py"


@pytest.fixture(scope="module")
def bench_all() -> ModuleType:
    spec = importlib.util.spec_from_file_location("bench_all", ALL)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["bench_all"] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def row(system: str, mode: str, p50: float, ndcg: float) -> dict[str, object]:
    return {"system": system, "mode": mode, "p50_ms": p50, "p95_ms": p50 * 2,
            "ndcg@10": ndcg, "recall@100": 0.9}  # fmt: skip


def test_scifact_lines_compare_with_the_peers_and_check_the_goals(bench_all: ModuleType) -> None:
    data = {"rows": [
        row("tether", "hybrid", 6.0, 0.72), row("tether", "lexical", 5.0, 0.68),
        row("LanceDB", "hybrid", 24.0, 0.71), row("bm25s", "lexical", 0.5, 0.66),
    ], "meta": {"chunks": 9283, "k_chunks": 100}}  # fmt: skip
    # Any setup: no line against the issue's table, which measured another.
    assert not any("issue's table" in g.what for g in bench_all.scifact_goals(data))
    goals = {g.what: g for g in bench_all.scifact_goals(data, issue_setup=True)}
    setup = "9,283 chunks, top 100"
    assert goals[f"SciFact lexical p50 (absolute), {setup}"].met is False  # 5 ms > 4 ms
    assert goals[f"SciFact hybrid p50 (absolute), {setup}"].met is True
    # The peers against the issue's table (LanceDB hybrid 14 ms, bm25s 0.28 ms then): no goal.
    then = goals["LanceDB hybrid p50 against the issue's table, 9,283 chunks, top 100"]
    assert then.ratio == pytest.approx(24.0 / 14.0) and then.met is None
    assert goals["bm25s lexical p50 against the issue's table, 9,283 chunks, top 100"].ratio == (
        pytest.approx(0.5 / 0.28)
    )
    assert not any("Chroma" in what for what in goals)  # not measured in this run
    lance = [g for g in goals.values() if g.peer.startswith("LanceDB hybrid")]
    assert len(lance) == 1 and lance[0].ratio == pytest.approx(0.25) and lance[0].met is True
    bm25s = next(g for g in goals.values() if g.peer.startswith("bm25s"))
    assert bm25s.ratio == pytest.approx(10.0) and bm25s.met is None
    # Faster but lower quality does not meet "faster at higher quality".
    data["rows"][2] = row("LanceDB", "hybrid", 24.0, 0.75)
    lance = [g for g in bench_all.scifact_goals(data) if g.peer.startswith("LanceDB hybrid")]
    assert lance[0].met is False


def test_scale_stall_and_vector_lines(bench_all: ModuleType) -> None:
    scale = {"embedding": {"ratio_tether_over_sentence_transformers": 1.1,
                           "chunks_per_s": {"tether": 22.0, "sentence_transformers": 20.0}},
             "retrieval": {"100k": {"ratios": {"lexical tether/bm25s p50": 0.25}}}}  # fmt: skip
    lines = bench_all.scale_goals(scale)
    assert [(g.met, round(g.ratio, 2)) for g in lines] == [(False, 1.1), (True, 4.0)]
    stall = {"chunks": 1_000_000, "steady_p50_ms": 100.0, "after_own_write_p50_ms": 108.0,
             "after_other_process_p50_ms": 103.0, "worst_first_ms": 160.0,
             "full_reload_ms": 6000.0}  # fmt: skip
    (line,) = bench_all.stall_goals(stall)
    assert line.met is False and "+8.0 ms p50" in line.tether  # worst +60 ms misses +50
    vectors = {"rows": 1_000_000, "bytes_per_vector": {"float32": 1536, "sign_bits": 48},
               "results": [{"scope": "whole", "depth": 4000, "exact_p50_ms": 110.0,
                            "quantized_p50_ms": 22.0, "recall_at_10": 0.994}]}  # fmt: skip
    whole, memory = bench_all.vector_goals(vectors)
    assert whole.met is True and whole.ratio == pytest.approx(0.2)
    assert memory.tether == "1584 B"


def test_the_summary_table_lines_up(bench_all: ModuleType) -> None:
    goal = bench_all.Goal("m", "t", "p", 0.5, "time", "< 1x", True)
    text = bench_all.table(["a", "b", "c", "d", "e", "f", "g"], [goal.cells()])
    header, rule, line = text.splitlines()
    assert len(header) == len(rule) == len(line)
    assert line.split(" | ")[3] == "0.50x" and line.rstrip().endswith("yes")


def test_gpu_lines_read_bench_gpu_embed(bench_all: ModuleType) -> None:
    """The gpu section (bench/gpu_embed.py, run where torch sees a CUDA GPU): tether
    against a plain encode on the same GPU (no goal) and on the machine's CPU (2x)."""
    gpu = {
        "throughput": {
            "gpu": "NVIDIA H200", "tether_auto_precision": "float16",
            "texts_per_s": {"sentence_transformers": 1470.0, "tether_auto": 2206.0},
            "cpu_plain_encode_texts_per_s": 106.0,
            "ratio_tether_auto_over_plain_same_device": 1.5,
            "ratio_tether_auto_over_plain_cpu": 20.8,
        },
        "quality": {"auto": {"ndcg@10": 0.7177}, "float32": {"ndcg@10": 0.7177},
                    "ndcg_difference": 0.0},
    }  # fmt: skip
    same, cpu, quality = bench_all.gpu_goals(gpu)
    assert (same.ratio, same.met) == (1.5, None) and "same GPU 1,470/s" in same.peer
    assert (cpu.ratio, cpu.met) == (20.8, True)
    assert quality.met is True and quality.tether == "0.7177"
    gpu["quality"]["ndcg_difference"] = -0.0061
    assert bench_all.gpu_goals(gpu)[2].met is False
    del gpu["quality"]
    assert len(bench_all.gpu_goals(gpu)) == 2


def test_the_summary_names_the_machine_its_absolute_numbers_hold_for(
    bench_all: ModuleType,
) -> None:
    cpuinfo = (
        "processor\t: 0\nmodel name\t: AMD EPYC 9R14\n"
        "flags\t\t: fpu sse2 avx2 avx512f avx512bw avx512_vnni\n"
        "processor\t: 1\nmodel name\t: AMD EPYC 9R14\n"
        "flags\t\t: fpu sse2 avx2 avx512f avx512bw avx512_vnni\n"
    )
    info = bench_all.machine(cpuinfo)
    assert info["cpu"] == "AMD EPYC 9R14"
    assert info["simd"] == ["avx2", "avx512f", "avx512_vnni"]  # in SIMD_FLAGS' order
    assert info["cores"] >= 1
    line = bench_all.machine_line(info)
    assert line.startswith("machine: AMD EPYC 9R14, ")
    assert "SIMD: avx2, avx512f, avx512_vnni;" in line
    # A CPU with none of them says so, rather than printing an empty list.
    bare = bench_all.machine("model name\t: Old CPU\nflags\t\t: fpu sse2\n")
    assert bare["simd"] == []
    assert "SIMD: none of avx2, " in bench_all.machine_line(bare)
