"""The learned gate's figures printed: the cross-validated operating points and the held-out
measurement (`python -m bench.gate.gate_model`)."""

from __future__ import annotations

POINT_NAMES = {
    "margin": "shipped: lowest threshold whose inner skip rate's 95% interval stays >= .50",
    "skip50": "recall at skip .50: inner skip rate .50, no margin",
    "recall965": "former: highest threshold with inner recall >= .965",
}


def _line(label: str, r: dict) -> str:
    lo, hi = r["recall_ci95"]
    s_lo, s_hi = r["skip_rate_ci95"]
    return (
        f"  {label:<10} recall {r['recall']:.3f} [{lo:.3f}-{hi:.3f}]  skip {r['skip_rate']:.3f} [{s_lo:.3f}-{s_hi:.3f}]"
    )


def format_cv(name: str, cv: dict) -> str:
    lines = [
        f"{name}: the learned stage, nested {cv['k']}-fold CV by conversation (trained on the other folds of both "
        "MSC files; L2 and threshold chosen on inner folds of those alone)",
        f"  {'point':<10} {'fold':>4} {'items':>5} {'dur':>4} {'recall':>7} {'skip':>6} {'l2':>7} {'threshold':>9} "
        f"{'inner rec':>9} {'inner skip':>10}",
    ]
    for p, res in cv["points"].items():
        for r in res["folds"]:
            lines.append(f"  {p:<10} {r['fold']:>4} {r['items']:>5} {r['durable']:>4} {r['recall']:>7.3f} "
                         f"{r['skip']:>6.3f} {r['l2']:>7g} {r['threshold']:>9.4f} {r['inner_recall']:>9.3f} "
                         f"{r['inner_skip']:>10.3f}")  # fmt: skip
    lines.append("  held-out folds, pooled (rules + model, as GATED runs):")
    for p, res in cv["points"].items():
        lines.append(_line(p, res) + f"   ({POINT_NAMES[p]})")
    return "\n".join(lines)


def format_holdout(out: dict[str, dict[str, object]]) -> str:
    lines = ["the learned stage on the held-out part (trained on the development part only):"]
    for name, res in out.items():
        lines.append(f" {name}")
        for p, r in res.items():
            lines.append(_line(p, r) + (f"   ({POINT_NAMES[p]})" if p in POINT_NAMES else "   (gate_model.json)"))
    return "\n".join(lines)
