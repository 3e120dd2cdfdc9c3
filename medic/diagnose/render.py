"""``medic diagnose`` output: the findings as text for an operator, or as JSON."""

from __future__ import annotations

from typing import Any

from medic.diagnose.run import Finding
from medic.timeutil import iso


def as_json(findings: list[Finding]) -> list[dict[str, Any]]:
    """The findings as plain data (times as ISO-8601 strings)."""
    return [
        {
            "job_id": f.job_id,
            "kind": f.kind,
            "culprits": list(f.culprits),
            "ranks": list(f.ranks),
            "onset": iso(f.onset) if f.onset is not None else None,
            "detected_at": iso(f.detected_at),
            "summary": f.summary,
            "detections": [
                {"kind": d.kind, "detector": d.detector, "culprits": list(d.culprits)}
                for d in f.detections
            ],
            "evidence": [
                {
                    "file": e.file,
                    "line": e.line,
                    "time": iso(e.time),
                    "signature": e.signature,
                    "kind": e.kind,
                    "message": e.message,
                }
                for e in f.evidence
            ],
            "actions": f.actions,
        }
        for f in findings
    ]


def as_text(findings: list[Finding], width: int = 160) -> list[str]:
    """One block per incident: what, where, since when, the lines that show it, the actions."""
    if not findings:
        return ["no incident found"]
    lines = []
    for number, f in enumerate(findings, 1):
        blamed = ", ".join(f.culprits) if f.culprits else "no node"
        ranks = f" (ranks {', '.join(map(str, f.ranks))})" if f.ranks else ""
        lines.append(f"incident {number}: {f.kind} in job {f.job_id}, blames {blamed}{ranks}")
        if f.onset is not None:
            lines.append(f"  onset {iso(f.onset)}, detected {iso(f.detected_at)}")
        lines.append(f"  {f.summary}")
        lines.append("  evidence:")
        for e in f.evidence:
            text = e.message if len(e.message) <= width else e.message[: width - 3] + "..."
            lines.append(f"    {e.file}:{e.line} [{e.signature}] {text}")
        if not f.evidence:
            lines.append("    (no matched line: from the job's silence)")
        lines.append("  actions under the rules:")
        lines.extend(f"    {action}" for action in f.actions or ["none: no route asks for one"])
    return lines
