"""feedline.doctor's terminal summary (summary.py)."""




# -- terminal summary --------------------------------------------------------------------
def test_terminal_summary_leads_with_the_answer_and_is_short(report):
    text = report.summary()
    lines = text.splitlines()
    assert len(lines) <= 30 and max(len(l) for l in lines) <= 100
    assert lines[0].startswith("feedline doctor: torch DataLoader") and "num_workers=2" in text
    i = lines.index("findings:")
    head = " ".join(" ".join(lines[:i]).split())
    assert "waiting for data" in head and "samples/s" in head and "bound by the" in head
    top = report.findings[0]
    assert lines[i + 1].startswith(" 1. [") and top["title"] in " ".join(lines[i + 1:i + 3])
    assert str(report) == text
