"""Evaluation reports: self-contained HTML pages with inline SVG plots (matplotlib)."""

from er.reports._html import HEADLINE, render_report

__all__ = ["HEADLINE", "render_report"]
