"""bench/all.py's summary: each section's JSON read into goal lines, met or not."""

from __future__ import annotations

import importlib.util
import json
import sys
from dataclasses import asdict
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


# -- RESULTS.md: rendered from a run's --out folder ------------------------------------


def eval_report(method: str, ndcg: float, pipeline: dict[str, object] | None = None) -> dict:
    report = {"dataset": "scifact", "method": method, "queries": 300, "documents": 5183,
              "ndcg@10": ndcg, "recall@100": 0.956, "latency_ms_p50": 23.61,
              "latency_ms_p95": 61.2, "unindexed": 0, "settings": []}  # fmt: skip
    return report | ({"pipeline": pipeline} if pipeline else {})


def grounding_source(name: str, balanced: float) -> dict[str, object]:
    return {
        "name": name, "documents": 56, "chunks": 900, "balanced_accuracy": balanced,
        "rates": {"answerable": 0.853, "unanswerable": 0.563, "cross_scope": 1.0},
        "answer_page_in_context": 0.8, "hit_at_1": 0.68, "answer_page_ranked": 0.96,
        "answer_text_cited": None, "lost": {"not_retrieved": 1, "ranked_below": 2,
                                            "judged_out": 12},
        "thresholds": [{"threshold": 0.4, "answerable": 0.85, "unanswerable": 0.56,
                        "cross_scope": 1.0, "balanced": balanced}],
        "quality": {"boilerplate_chunks": 72, "open_passages": 4}, "latency_ms_p50": 28.1,
    }  # fmt: skip


def write_run(out: Path, goals: list[object], summary: dict[str, object]) -> None:
    """A run's --out folder as bench/all.py leaves it: summary.json, each section's
    output and, for the eval section, its JSON."""
    out.mkdir()
    (out / "summary.json").write_text(json.dumps({"goals": [asdict(g) for g in goals], **summary}))
    (out / "scifact.txt").write_text(
        "\n== SciFact, top 10\nmode     system  p50 ms\n-------  ------  ------\n"
        "hybrid   tether    2.39\n"
    )
    (out / "vectors.txt").write_text("")
    pipeline = {"ndcg@10": 0.7335, "context_recall": 0.66, "grounded": 0.79,
                "mean_context_chunks": 5.65, "skipped": 0, "latency_ms_p50": 24.3,
                "latency_ms_p95": 70.0, "thresholds": [{"threshold": 0.4, "answered": 0.897,
                "precision_at_k": 0.247, "recall_any": 0.75, "k": 10}]}  # fmt: skip
    command = ".venv/bin/tether eval ../shared/datasets/scifact --db scifact.db"
    runs = {
        "hybrid": {"command": f"{command} --json", "result": eval_report("hybrid", 0.7189)},
        "lexical": {"command": f"{command} --lexical-only --json",
                    "result": eval_report("lexical", 0.6781)},
        "pipeline": {"command": f"{command} --pipeline --json",
                     "result": eval_report("hybrid", 0.7189, pipeline)},
        "grounding": {"command": ".venv/bin/tether eval bench/manuals bench/docsets/flask"
                      " --grounding --json", "result": {"sources": [
                          grounding_source("manuals", 0.805), grounding_source("flask", 0.796)]}},
    }  # fmt: skip
    skipped = {"grounding: docker": "56 of its documents are not fetched"}
    (out / "eval.json").write_text(json.dumps({"runs": runs, "skipped": skipped}))


def test_results_md_is_rendered_from_the_run_with_its_commit_and_machine(
    bench_all: ModuleType, tmp_path: Path
) -> None:
    goals = [
        bench_all.Goal("SciFact hybrid p50, 11,019 chunks, top 10", "2.39 ms (nDCG 0.7093)",
                       "LanceDB hybrid 8.65 ms (nDCG +0.0066)", 0.276, "time",
                       "< 1x, higher nDCG", True),
        bench_all.Goal("embedding chunks/s", "34.8/s", "SentenceTransformer.encode 38.5/s",
                       0.904, "speed", ">= 2x", False),
    ]  # fmt: skip
    machine = {"cpu": "AMD EPYC 9R14", "cores": 2, "simd": ["avx2", "avx512f"],
               "commit": "abc1234", "src_changed_files": 0, "tree_dirty": True}  # fmt: skip
    peers = ".venv/bin/python bench/scifact_peers.py ../shared/datasets/scifact --k 10"
    write_run(tmp_path / "out", goals, {
        "argv": ["bench/all.py", "--store", "scifact.db", "--out", "results"],
        "machine": machine, "failed": ["vectors"], "date": "2026-11-27 10:00 UTC",
        "python": str(ALL.parent.parent / ".venv/bin/python"), "quick": False,
        "sections": ["scifact", "vectors", "gpu", "eval"],
        "skipped": {"gpu": "torch sees no CUDA GPU on this machine"},
        "commands": {"scifact": peers, "vectors": "python bench/vector_scale.py",
                     "eval": "python bench/tether_eval.py"},
    })  # fmt: skip
    target = tmp_path / "RESULTS.md"
    assert bench_all.main(["--render-only", str(tmp_path / "out"), "--results", str(target)]) == 0
    text = target.read_text()

    assert "- **date**: 2026-11-27 10:00 UTC" in text
    assert "- **commit**: `abc1234` + local changes" in text
    assert "- **machine**: AMD EPYC 9R14, 2 usable cores, SIMD: avx2, avx512f\n" in text
    assert "- **command**: `.venv/bin/python bench/all.py --store scifact.db --out results`" in text
    assert "| measure | tether | peer | ratio | ratio of | goal | met |" in text
    assert ("| SciFact hybrid p50, 11,019 chunks, top 10 | 2.39 ms (nDCG 0.7093) | LanceDB"
            " hybrid 8.65 ms (nDCG +0.0066) | 0.28x | time | < 1x, higher nDCG | yes |"
            ) in text  # fmt: skip
    assert ("| embedding chunks/s | 34.8/s | SentenceTransformer.encode 38.5/s | 0.90x | speed"
            " | >= 2x | NO |") in text  # fmt: skip
    # Each section under its heading, in the run's order, with its command and its tables.
    scifact = text.index("## SciFact against the peers, top 10 (`scifact`)")
    vectors = text.index("(`vectors`)")
    assert scifact < vectors < text.index("(`gpu`)") < text.index("(`eval`)")
    assert f"`{peers}`\n\n```text\n== SciFact, top 10\nmode     system  p50 ms\n" in text
    assert "hybrid   tether    2.39\n```" in text
    assert "**This section failed**" in text[vectors:] and "No output." in text[vectors:]
    assert "Skipped in this run: torch sees no CUDA GPU on this machine." in text
    command = ".venv/bin/tether eval ../shared/datasets/scifact --db scifact.db"
    assert (f"| hybrid (the default) | 0.7189 | 0.9560 | 23.6 | 61.2 | {command} --json |"
            in text)  # fmt: skip
    assert f"| lexical-only (FTS5 bm25) | 0.6781 | 0.9560 | 23.6 | 61.2 | {command}" in text
    assert f"`{command} --pipeline --json`\n\n| measure | value |" in text
    assert "| pipeline (reranked order), nDCG@10 | 0.7335 |" in text
    assert "| 0.40 | 0.897 | 0.247 | 0.750 |" in text
    assert "| measure | manuals | flask |" in text
    assert "| balanced grounding accuracy | 0.8050 | 0.7960 |" in text
    assert "| answer's words in a cited passage | - | - |" in text
    assert (
        "| where lost: not retrieved / ranked below / judged out | 1 / 2 / 12 | 1 / 2 / 12 |"
        in text
    )
    assert (
        "| 0.40 | 0.85 / 0.56 / 1.00 / 0.805 | 0.85 / 0.56 / 1.00 / 0.796 | 0.800 | 0.796 |" in text
    )
    assert "- grounding: docker: skipped, 56 of its documents are not fetched" in text


def test_an_older_out_folder_renders_its_sections_and_src_changes(
    bench_all: ModuleType, tmp_path: Path
) -> None:
    """A summary.json from before the date, the sections and the whole tree's state were
    kept: the sections that left output, src/ changes as local changes."""
    machine = {"cpu": "Old CPU", "cores": 4, "simd": [], "commit": "1a360a2",
               "src_changed_files": 3}  # fmt: skip
    write_run(tmp_path / "out", [], {"argv": ["bench/all.py"], "machine": machine,
                                     "failed": []})  # fmt: skip
    target = tmp_path / "RESULTS.md"
    assert bench_all.main(["--render-only", str(tmp_path / "out"), "--results", str(target)]) == 0
    text = target.read_text()
    assert "- **commit**: `1a360a2` + local changes" in text
    assert "SIMD: none of avx2, " in text and "No section with goals ran." in text
    sections = [line for line in text.splitlines() if line.startswith("## ") and "`" in line]
    assert sections == ["## SciFact against the peers, top 10 (`scifact`)",
                        "## Vectors at scale: the quantized scan (`vectors`)",
                        "## `tether eval`: retrieval quality and grounding (`eval`)"]  # fmt: skip


def test_only_a_full_run_writes_bench_results_md_unasked(bench_all: ModuleType) -> None:
    done, failed = bench_all.Run(), bench_all.Run(failed=["scale"])
    full = bench_all.parse_args([])
    assert bench_all.results_target(full, done) == bench_all.DEFAULT_RESULTS
    assert bench_all.results_target(full, failed) is None
    assert bench_all.results_target(bench_all.parse_args(["--quick"]), done) is None
    some = ["--sections", "scifact,eval"]
    assert bench_all.results_target(bench_all.parse_args(some), done) is None
    given = bench_all.parse_args([*some, "--results", "run.md"])
    assert bench_all.results_target(given, failed) == Path("run.md")
    with pytest.raises(SystemExit):
        bench_all.parse_args(["--render-only", str(ALL.parent)])  # no summary.json there


def test_every_section_has_its_heading_and_note_in_results_md(bench_all: ModuleType) -> None:
    notes = sys.modules["_report"].SECTION_NOTES  # beside all.py, imported by it
    assert list(notes) == list(bench_all.SECTIONS)
    assert all(title and how for title, how in notes.values())


def test_a_rerun_section_joins_the_run_and_the_header_names_it(
    bench_all: ModuleType, tmp_path: Path
) -> None:
    """``--into``: a section run again replaces its files in the earlier run's folder;
    the summary's goals are read again from every section's JSON, a failure that the
    rerun fixed is gone, and RESULTS.md says which section ran again, when and where."""
    out = tmp_path / "out"
    out.mkdir()
    stall = {"chunks": 1_000_000, "steady_p50_ms": 100.0, "after_own_write_p50_ms": 108.0,
             "after_other_process_p50_ms": 103.0, "worst_first_ms": 120.0,
             "full_reload_ms": 6000.0}  # fmt: skip
    vectors = {"rows": 1_000_000, "bytes_per_vector": {"float32": 1536, "sign_bits": 48},
               "results": [{"scope": "whole", "depth": 4000, "exact_p50_ms": 110.0,
                            "quantized_p50_ms": 22.0, "recall_at_10": 0.994}]}  # fmt: skip
    (out / "stall.json").write_text(json.dumps(stall))
    (out / "vectors.json").write_text(json.dumps(vectors))  # what the rerun just wrote
    (out / "summary.json").write_text(json.dumps({
        "argv": ["bench/all.py", "--out", "results"], "date": "2026-11-27 10:00 UTC",
        "machine": {"cpu": "AMD EPYC", "cores": 2, "simd": [], "commit": "abc1234",
                    "tree_dirty": False},
        "goals": [asdict(g) for g in bench_all.stall_goals(stall)], "failed": ["vectors"],
        "sections": ["stall", "vectors"], "skipped": {}, "python": ".venv/bin/python",
        "commands": {"stall": "python bench/write_stall.py"}, "quick": False,
    }))  # fmt: skip
    run = bench_all.Run(outputs={"vectors": "the quantized scan"})
    lines = {"vectors": [".venv/bin/python", "bench/vector_scale.py", "--depths", "4000"]}
    machine = {"commit": "def5678", "tree_dirty": False}
    bench_all.merge_rerun(out, run, machine, lines)

    summary = json.loads((out / "summary.json").read_text())
    assert summary["failed"] == []
    assert [g["what"] for g in summary["goals"]] == [
        g.what for g in [*bench_all.stall_goals(stall), *bench_all.vector_goals(vectors)]
    ]
    assert summary["commands"]["vectors"].endswith("bench/vector_scale.py --depths 4000")
    assert summary["reruns"]["vectors"]["commit"] == "def5678"
    target = tmp_path / "RESULTS.md"
    assert bench_all.main(["--render-only", str(out), "--results", str(target)]) == 0
    text = target.read_text()
    assert "- **commit**: `abc1234`\n" in text
    assert "- **rerun**: `vectors` on " in text and "commit `def5678`" in text
    assert "sections that failed" not in text
