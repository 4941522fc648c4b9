"""The swap report's Markdown and HTML escape host data (issue 21, item 8): `<script>`,
`[x](javascript:…)`, images and headings passed through the Markdown, the lead line's model names
bypassed the cell escaper, and the HTML's last redaction pass ate the markup after a cell ending in
`password:` or `token:`."""

from __future__ import annotations

import time
from pathlib import Path

from markdown_it import MarkdownIt

from console.core.recording import Recorder
from console.core.state import HostState
from console.core.derive.swap_view import AuditAppended, AuditEntry, SwapSetup
from console.domain.swap.report import render, report_from_recording

HOSTILE = ["<script>alert(1)</script>", "[click](javascript:alert(1))", "![img](http://evil.example/x.png)",
           "# Heading", "<img src=x onerror=alert(1)>", "a | b", "`code`", "**bold**", "\\", "- item",
           "<a href='javascript:x'>y</a>", "password:", "token:"]


def _report(tmp_path: Path) -> dict:
    state = HostState("gpu-01", label="gpu-01")
    rec = Recorder(state, tmp_path).start()
    now = time.time()
    state.apply(SwapSetup("gpu-01", "old.service", "new.service", "Qwen/X", "/shared/m", False, False, False, None))
    for i, text in enumerate(HOSTILE):
        state.apply(AuditAppended("gpu-01", AuditEntry("ana", now + i, "stop_old", f"cmd {text}", 0,
                                                       f"{text}", 0.5, "")))
    rec.close()
    report = report_from_recording(rec.path)
    report["old_new"]["old_model"] = "<script>x</script>[m](javascript:alert(1))"
    report["old_new"]["new_model"] = "![i](http://evil.example/i.png) # h"
    return report


def test_markdown_renders_host_data_as_text_only(tmp_path: Path) -> None:
    md = render(_report(tmp_path), "md")
    out = MarkdownIt("commonmark").enable("table").render(md)
    assert "<script" not in out and 'href="javascript' not in out and "<img" not in out and "<a " not in out
    # the headline's own bold lines (`- **…**`) are the only emphasis: none comes from host data
    assert out.count("<h1>") == 1 and out.count("<strong>") == md.count("\n- **") and "<code>" not in out
    assert "&lt;script&gt;" in out  # shown, as text
    # the table keeps its rows and columns: one row per audit entry
    assert out.count("<tr>") >= len(HOSTILE) + 1


def test_html_keeps_its_markup_after_a_cell_ending_in_password_or_token(tmp_path: Path) -> None:
    doc = render(_report(tmp_path), "html")
    assert "<script" not in doc and "<img" not in doc
    assert doc.count("<td") == doc.count("</td>") and doc.count("<tr") == doc.count("</tr>")
    assert "</table>" in doc and doc.rstrip().endswith("</html>")
    assert "password:</td>" in doc and "token:</td>" in doc
