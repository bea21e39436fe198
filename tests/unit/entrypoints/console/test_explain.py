"""A failed job's reason in words, with the codes it cites and what to do."""

from __future__ import annotations

from entrypoints.console.explain import explain_failure


def test_a_validation_failure_names_its_class_and_cited_code() -> None:
    text = (
        "engine extraction: engine: [validation] extraction request failed schema validation: "
        "FET-0401 - filter value 'x' of field 'id' in table 'accounts' does not convert"
    )
    explained = explain_failure(text)
    assert "does not fit the datasource" in explained.summary
    assert [code for code, _ in explained.codes] == ["FET-0401"]
    assert explained.text == text


def test_each_class_of_failure_has_its_words() -> None:
    cases = {
        "engine extraction: engine: [unavailable] failed to connect to datasource": "reached",
        "engine extraction: engine: [timeout] execution exceeded its deadline": "deadline",
        "engine extraction: engine: [limit_exceeded] extraction result exceeds": "size limit",
        "job was not picked up within 5 minutes": "No worker claimed",
        "job abandoned: its worker stopped after 3 attempts": "stopped holding",
    }
    for text, words in cases.items():
        assert words in explain_failure(text).summary, text


def test_a_failure_citing_no_code_points_at_the_job_failed_remedy() -> None:
    explained = explain_failure("something odd")
    assert explained.summary == "The job failed; the recorded reason follows."
    [(code, remedy)] = explained.codes
    assert code == "FET-1023" and "metadata.error" in remedy
