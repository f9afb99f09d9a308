"""The retrieval benchmark's figures add up, and its intervals say what noise is.

`bench.common.stats` is pure arithmetic (checked against the normal approximation);
the command runs the real store and embedder on a tiny file in two languages.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from bench.common import stats
from bench.common.evaldata import Query
from bench.retrieval.report import QueryResult, close_calls
from bench.retrieval.run import main as retrieval_main


def test_interval_of_a_hit_rate_matches_the_normal_approximation() -> None:
    hits = [1] * 63 + [0] * 13  # 63 of 76, as on a MADial file
    low, high = stats.mean_interval(hits)
    p = 63 / 76
    half = 1.96 * math.sqrt(p * (1 - p) / 76)
    assert low == pytest.approx(p - half, abs=0.02)
    assert high == pytest.approx(p + half, abs=0.02)
    assert stats.mean_interval(hits) == (low, high)  # fixed seed: the same table twice


def test_a_certain_figure_has_no_width() -> None:
    assert stats.mean_interval([1, 1, 1, 1]) == (1.0, 1.0)


def test_paired_difference_tells_an_effect_from_noise() -> None:
    base = [1, 0] * 38
    same = stats.paired(base, base)
    assert (same.diff, same.low, same.high, same.better, same.worse) == (0.0, 0.0, 0.0, 0, 0)
    assert not same.clear
    # 20 of the 38 misses fixed, nothing broken: a real gain.
    gained = [1 if i % 2 == 0 or i < 40 else 0 for i in range(76)]
    up = stats.paired(base, gained)
    assert (up.better, up.worse) == (20, 0)
    assert up.diff == pytest.approx(20 / 76)
    assert up.clear and up.low > 0
    # One query gained and one lost: no difference, whatever the order.
    swapped = list(base)
    swapped[0], swapped[1] = 0, 1
    noise = stats.paired(base, swapped)
    assert (noise.better, noise.worse, noise.diff) == (1, 1, 0.0)
    assert not noise.clear


def test_interval_over_stores_widens_when_stores_differ() -> None:
    # Two users answered every time, two never: 38 of 76 either way, but on other users
    # the figure could be anywhere, and only the interval over stores says so.
    hits = [1] * 38 + [0] * 38
    stores = ["a"] * 19 + ["b"] * 19 + ["c"] * 19 + ["d"] * 19
    q_low, q_high = stats.mean_interval(hits)
    s_low, s_high = stats.mean_interval(hits, groups=stores)
    assert s_low < q_low - 0.1 and s_high > q_high + 0.1
    # One query per store is the plain bootstrap over queries.
    assert stats.mean_interval(hits, groups=list(range(76))) == pytest.approx((q_low, q_high))


def test_bad_input_names_what_is_wrong() -> None:
    with pytest.raises(ValueError, match="no values"):
        stats.mean_interval([])
    with pytest.raises(ValueError, match="got 2 and 3"):
        stats.paired([1, 0], [1, 0, 1])
    with pytest.raises(ValueError, match="at least two groups"):
        stats.mean_interval([1, 0, 1], groups=["u1", "u1", "u1"])
    with pytest.raises(ValueError, match="got 2 for 3 values"):
        stats.mean_interval([1, 0, 1], groups=["u1", "u2"])


def _result(relevant: str, ranked: str, scores: list[float]) -> QueryResult:
    query = Query(id="q", store_id="s", query="?", relevant=(relevant,), category="c")
    return QueryResult(query, list(ranked), 1.0, scores)


def test_close_calls_are_the_queries_a_rounding_difference_turns_over() -> None:
    six = "abcdef"
    results = [
        _result("e", six, [0.9, 0.8, 0.7, 0.6, 0.5003, 0.5]),  # hit at 5, 0.0003 above the 6th: close
        _result("f", six, [0.9, 0.8, 0.7, 0.6, 0.5003, 0.5]),  # miss at 6, 0.0003 below the 5th: close
        _result("e", six, [0.9, 0.8, 0.7, 0.6, 0.55, 0.5]),  # hit by 0.05: safe
        _result("a", six, [0.9, 0.8, 0.7, 0.6, 0.5003, 0.5]),  # hit at 1: safe
        _result("z", six, [0.9, 0.8, 0.7, 0.6, 0.5003, 0.5]),  # relevant not returned: safe miss
        _result("a", "a", [0.9]),  # nothing ranked 6th to fall behind
    ]
    assert close_calls(results) == {"eps": 0.001, "hits": 1, "misses": 1}
    assert close_calls(results, eps=0.1) == {"eps": 0.1, "hits": 2, "misses": 1}


def test_benchmark_reports_counts_intervals_and_paired_differences(
    data_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    memories = [
        ("m1", "你喜欢的颜色: 蓝色"),
        ("m2", "编程语言偏好: Python"),
        ("m3", "My sister Anna lives in Lisbon."),
        ("m4", "I adopted a turtle called Shelly last spring."),
        ("m5", "我周末常去爬山"),
        ("m6", "The dentist appointment is on Friday."),
    ]
    queries = [
        ("q1", "我喜欢的颜色是什么", ["m1"]),
        ("q2", "Where does Anna live?", ["m3"]),
        ("q3", "what is my pet's name", ["m4"]),
        ("q4", "编程", ["m2"]),
    ]
    # A second user, so the figures come with an interval over stores too.
    other = [("n1", "My brother Leo lives in Porto."), ("n2", "我对花生过敏")]
    other_queries = [("q5", "Where does Leo live?", ["n1"]), ("q6", "我对什么过敏", ["n2"])]
    path = tmp_path / "tiny.json"
    path.write_text(json.dumps({
        "name": "tiny-bench-check", "language": "mixed",
        "stores": [{"store_id": u, "memories": [{"id": i, "text": t} for i, t in ms]}
                   for u, ms in (("u1", memories), ("u2", other))],
        "queries": [{"id": i, "store_id": u, "query": q, "relevant": r, "category": "c"}
                    for u, qs in (("u1", queries), ("u2", other_queries)) for i, q, r in qs],
    }, ensure_ascii=False), encoding="utf-8")  # fmt: skip

    assert retrieval_main(["--data", str(path), "--data-dir", str(data_dir), "--method", "dense", "full"]) == 0
    out = capsys.readouterr().out
    figures = json.loads(out.strip().splitlines()[-1])["methods"]
    for method in ("dense", "full"):
        overall = figures[method]["overall"]
        assert overall["hits@5"] == round(overall["hit@5"] * 6)
        low, high = overall["hit@5_ci95"]
        assert low <= overall["hit@5"] <= high
        s_low, s_high = overall["hit@5_ci95_stores"]
        assert overall["stores"] == 2 and s_low <= overall["hit@5"] <= s_high
        close = overall["close@5"]
        assert close["hits"] <= overall["hits@5"] and close["misses"] <= 6 - overall["hits@5"]
        # Rank 1 and NDCG@5 too, each with its interval, overall and per category.
        for part in (overall, figures[method]["categories"]["c"]):
            for measure in ("hit@1", "hit@5", "ndcg@5"):
                low, high = part[f"{measure}_ci95"]
                assert 0 <= low <= part[measure] <= high <= 1, (method, measure)
        assert overall["hit@1"] <= overall["ndcg@5"] <= overall["hit@5"]  # one relevant memory per query
    versus = figures["full"]["vs dense"]
    gained = figures["full"]["overall"]["hits@5"] - figures["dense"]["overall"]["hits@5"]
    assert versus["better"] - versus["worse"] == gained
    assert versus["ci95"][0] <= versus["hit@5_diff"] <= versus["ci95"][1]
    assert "vs dense" not in figures["dense"]
    assert "paired against dense" in out and "95% interval" in out and "decided by < 0.001" in out
    assert "over its 2 stores" in out
    assert "hit@1" in out and "ndcg@5" in out and "95% bootstrap intervals over queries" in out


def test_a_changed_file_with_as_many_memories_is_loaded_again_not_reused(
    data_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    def write(texts: list[str]) -> Path:
        path = tmp_path / "changing.json"
        path.write_text(json.dumps({
            "name": "changing-bench-check", "language": "en",
            "stores": [{"store_id": "u1", "memories": [{"id": f"m{i}", "text": t} for i, t in enumerate(texts)]}],
            "queries": [{"id": "q1", "store_id": "u1", "query": "Where does Anna live?", "relevant": ["m0"],
                         "category": "c"}],
        }), encoding="utf-8")  # fmt: skip
        return path

    def hit_at_1(path: Path) -> float:
        assert retrieval_main(["--data", str(path), "--data-dir", str(data_dir), "--method", "dense"]) == 0
        return json.loads(capsys.readouterr().out.strip().splitlines()[-1])["methods"]["dense"]["overall"]["hit@1"]

    assert hit_at_1(write(["My sister Anna lives in Lisbon.", "I like tea."])) == 1.0
    # The same ids and count, other texts: the old rows would still answer the query.
    assert hit_at_1(write(["I like tea.", "My sister Anna lives in Lisbon."])) == 0.0


def test_a_method_named_twice_or_a_bad_file_is_refused_by_name(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert retrieval_main(["--data", str(tmp_path / "missing.json")]) == 2
    assert "missing.json" in capsys.readouterr().err
    path = tmp_path / "tiny.json"
    path.write_text(
        json.dumps(
            {
                "name": "t",
                "language": "en",
                "stores": [{"store_id": "u", "memories": [{"id": "m", "text": "x"}]}],
                "queries": [{"id": "q", "store_id": "u", "query": "x", "relevant": ["m"], "category": "c"}],
            }
        )
    )
    assert retrieval_main(["--data", str(path), "--method", "full", "full"]) == 2
    assert "twice" in capsys.readouterr().err


def test_calibration_scores_foreign_queries_as_the_agent_would(
    data_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # `--calibrate` asked the other stores with a retriever whose memory densities were
    # never computed, so its "foreign top-1" scores were not the ones the agent gives
    # (the agent computes them at session start), and the threshold was chosen on them.
    from bench.common.evaldata import load_retrieval
    from bench.retrieval.report import quantile
    from bench.retrieval.run import RANKING_FLOOR
    from bench.retrieval.stores import open_store, user_for
    from memory.retrieval.retriever import Retriever

    people = ["Anna", "Leo", "Mia", "Sam", "Ivy", "Tom"]
    things = ["tea", "chess", "jazz", "hiking", "Lisbon"]
    stores = {
        "u1": [f"{p} told me about {t} last week." for p in people for t in things[:4]],
        "u2": [f"I bought a book on {t} for {p}." for p in people for t in things[1:]],
    }
    path = tmp_path / "calibrate.json"
    path.write_text(json.dumps({
        "name": "calibrate-bench-check", "language": "en",
        "stores": [{"store_id": u, "memories": [{"id": f"{u}-{i}", "text": t} for i, t in enumerate(ts)]}
                   for u, ts in stores.items()],
        "queries": [{"id": f"q{i}", "store_id": u, "query": q, "relevant": [f"{u}-0"], "category": "c"}
                    for i, (u, q) in enumerate([("u1", "What did Anna say about tea?"), ("u1", "who plays chess"),
                                                ("u2", "a book for Sam"), ("u2", "jazz gifts")])],
    }), encoding="utf-8")  # fmt: skip

    args = ["--data", str(path), "--data-dir", str(data_dir), "--method", "full", "--calibrate"]
    assert retrieval_main(args) == 0
    reported = json.loads(capsys.readouterr().out.strip().splitlines()[-1])["methods"]["full"]["calibration"]

    data = load_retrieval(path)
    store = open_store(data, data_dir)
    try:
        agent_like = Retriever(store, store.settings.tuned(retrieval_threshold=RANKING_FLOOR))  # as the bench ranks
        for user in stores:
            agent_like.prepare(user_for(user))  # what session start does
        foreign = sorted(
            agent_like.retrieve(user_for("u2" if q.store_id == "u1" else "u1"), q.query, top_k=10)[0].score
            for q in data.queries
        )
    finally:
        store.close()
    assert {p: reported[f"foreign_top1_p{p}"] for p in (50, 90, 99)} == {
        p: quantile(foreign, p / 100) for p in (50, 90, 99)
    }


def test_ndcg_at_5_rewards_the_relevant_memories_by_their_places() -> None:
    from bench.retrieval.report import per_query_ndcg

    one = Query(id="q", store_id="s", query="?", relevant=("b",), category="c")
    two = Query(id="q2", store_id="s", query="?", relevant=("a", "e"), category="c")
    results = [
        QueryResult(one, list("bacde"), 1.0),  # first: 1
        QueryResult(one, list("abcde"), 1.0),  # second: 1 / log2(3)
        QueryResult(one, list("acdefb"), 1.0),  # sixth: outside the five
        QueryResult(two, list("xaeyz"), 1.0),  # 2nd and 3rd of an ideal 1st and 2nd
    ]
    expected = [1.0, 1 / math.log2(3), 0.0, (1 / math.log2(3) + 1 / math.log2(4)) / (1 + 1 / math.log2(3))]
    assert per_query_ndcg(results, 5) == pytest.approx(expected)


def test_a_shown_memory_counts_for_its_copies_only_in_the_copies_figure() -> None:
    from bench.retrieval.report import per_query_hits

    query = Query(id="q", store_id="s", query="?", relevant=("m9",), category="c")
    folded = QueryResult(query, ["m1", "m2"], 1.0, [0.9, 0.8], [frozenset(), frozenset({"m9"})])
    assert per_query_hits([folded], 5) == [0]  # the labelled memory itself is not shown
    assert per_query_hits([folded], 5, copies=True) == [1]  # a shown line stands for it
    assert per_query_hits([folded], 1, copies=True) == [0]  # ...from the second place


def test_cross_validation_measures_each_fold_with_the_method_best_on_the_others() -> None:
    from bench.retrieval.report import cross_validate

    def results(hits: dict[str, list[int]]) -> list[QueryResult]:
        out = []
        for store, row in hits.items():
            for i, hit in enumerate(row):
                q = Query(id=f"{store}{i}", store_id=store, query="?", relevant=("r",), category="c")
                out.append(QueryResult(q, ["r"] if hit else ["x"], 1.0))
        return out

    # "a" answers s1 and s2 (one query each), "b" the three queries of s3: over all stores
    # "b" is better (3 to 2), but each fold may only choose on the others. s1's and s2's
    # folds see s3 and get "b" (which misses them), s3's sees s1 and s2 and gets "a"
    # (which misses it): chosen on the fold itself every fold would score 1, chosen on
    # all stores s3 would.
    runs = {
        "a": {"plain": results({"s1": [1], "s2": [1], "s3": [0, 0, 0]})},
        "b": {"plain": results({"s1": [0], "s2": [0], "s3": [1, 1, 1]})},
    }
    cv = cross_validate(runs, [["s1"], ["s2"], ["s3"]])
    assert [f["chosen"] for f in cv["folds"]] == ["b", "b", "a"]
    assert [f["plain"]["hit@5"] for f in cv["folds"]] == [0.0, 0.0, 0.0]
    assert cv["pooled"]["plain"] == {"hit@1": 0.0, "hit@5": 0.0, "ndcg@5": 0.0}


def test_the_self_question_variant_stores_each_query_twice_and_reports_its_cost(
    data_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from bench.common.evaldata import load_retrieval
    from bench.retrieval.run import asked_at
    from bench.retrieval.self_questions import paraphrase, self_questions
    from bench.retrieval.stores import SELFQ, open_store, user_for

    memories = [("m1", "My sister is called Anna."), ("m2", "I'm allergic to peanuts."),
                ("m3", "我最喜欢的颜色是蓝色。"), ("m4", "I took the bus to work.")]  # fmt: skip
    queries = [("q1", "What's my sister's name?", ["m1"]), ("q2", "我最喜欢什么颜色？", ["m3"])]
    path = tmp_path / "selfq.json"
    path.write_text(json.dumps({
        "name": "selfq-bench-check", "language": "mixed",
        "stores": [{"store_id": "u1", "memories": [{"id": i, "text": t, "timestamp": "2024-05-01T10:00"}
                                                    for i, t in memories]}],
        "queries": [{"id": i, "store_id": "u1", "query": q, "relevant": r, "category": "c"} for i, q, r in queries],
    }, ensure_ascii=False), encoding="utf-8")  # fmt: skip
    args = ["--data", str(path), "--data-dir", str(data_dir), "--method", "pre38", "full", "--self-questions"]
    assert retrieval_main(args) == 0
    out = capsys.readouterr().out
    figures = json.loads(out.strip().splitlines()[-1])["methods"]
    assert set(figures) == {"pre38", "pre38 +selfq", "full", "full +selfq"}
    assert "vs plain" in figures["full +selfq"] and "vs plain" not in figures["full"]
    loss = figures["full +selfq"]["vs plain"]["also"]
    assert set(loss) == {"hit@1", "hit@5", "ndcg@5"}
    assert "self-question variant against the plain file" in out

    data = load_retrieval(path)
    turns = self_questions(data, asked_at(data))["u1"]
    assert [t.text for t in turns] == [text for _, q, _ in queries for text in (q, paraphrase(data.queries[0]
                                       if q == queries[0][1] else data.queries[1]))]  # fmt: skip
    assert all(t.timestamp < "2024-05-01T10:00" for t in turns)  # said before the questions are asked
    assert paraphrase(data.queries[0]) != data.queries[0].query
    store = open_store(data, data_dir, None, SELFQ)
    try:
        stored = {m.text: m.metadata for m in store.list_user(user_for("u1"))}
    finally:
        store.close()
    assert {t.text for t in turns} <= set(stored)  # written through the product's write path
    assert stored[queries[0][1]]["asks"] is True and "asks" not in stored[memories[0][1]]  # flagged when it asks
