"""Report pages: which paper's page an experiment's results go to."""

from __future__ import annotations

from typing import Any


def paper_of_experiment(papers: dict[str, dict[str, Any]], paper: str | None) -> str | None:
    """Paper id whose title or alias equals an experiment's ``paper:`` string (None: no paper)."""
    if not paper:
        return None
    for pid, p in papers.items():
        if paper == p["title"] or paper in p.get("aliases", []):
            return pid
    return None


def page_of_experiment(papers: dict[str, dict[str, Any]], config: dict[str, Any], experiment: str,
                       harness: str = "harness") -> str:
    """Report page of an experiment: the paper its ``paper:`` names, else the harness page."""
    return paper_of_experiment(papers, config["experiments"][experiment].get("paper")) or harness
