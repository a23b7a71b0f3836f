import json
import subprocess
import sys
import textwrap

from common.runtime.log import pseudonym, safe_fields, scrub


def test_reserved_logrecord_keys_are_renamed() -> None:
    assert safe_fields({"filename": "cv.pdf", "module": "x", "name": "n", "sender": "s@a.example"}) == {
        "filename_": pseudonym("cv.pdf"),  # a mail's file name is the sender's text
        "module_": "x",
        "name_": "n",
        "sender": pseudonym("s@a.example"),
    }


def test_no_field_names_a_person_or_carries_a_mails_text() -> None:
    jane = pseudonym("jane@corp.example")
    assert pseudonym(" Jane@Corp.Example ") == jane and jane.startswith("p-") and len(jane) == 14
    fields = safe_fields(
        {
            "subject": "Offer for Jane",
            "recipients": ["jane@corp.example", "bob@other.example"],
            "reason": "sender jane@corp.example. is suppressed",
            "key": "attachments/jane-at-corp.example/0000abc/My CV.pdf",
            "detail": {"nested": ["see s3://b/conversations/jane-at-corp.example/0000abc.eml now"]},
            "idempotency_key": "reply:jane-at-corp.example:9f86d081",
            "correlation_id": "forward-0000abc",
            "count": 3,
        }
    )
    assert fields["subject"] == pseudonym("Offer for Jane")
    assert fields["recipients"] == [jane, pseudonym("bob@other.example")]
    assert fields["reason"] == f"sender {jane}. is suppressed"
    cid = pseudonym("jane-at-corp.example")
    assert fields["key"] == f"attachments/{cid}/0000abc/{pseudonym('My CV.pdf')}"
    assert fields["detail"] == {"nested": [f"see s3://b/conversations/{cid}/0000abc.eml now"]}
    assert fields["idempotency_key"] == "reply:" + pseudonym("jane-at-corp.example:9f86d081")
    assert fields["correlation_id"] == "forward-0000abc" and fields["count"] == 3
    assert "jane" not in json.dumps(fields).lower()


def test_scrubbing_is_linear_on_hostile_text() -> None:
    import time

    for text in ("@" * 400_000, "a" * 200_000 + "@" + "b." * 100_000, "x@y." * 100_000):
        started = time.perf_counter()
        scrub(text)
        assert time.perf_counter() - started < 2.0, text[:20]


def test_logging_a_reserved_key_does_not_raise_and_lines_are_flushed() -> None:
    """Runs in a fresh interpreter: mypylogger reads its environment at import time."""
    code = textwrap.dedent("""
        import os, sys
        from common.runtime.log import configure, get_logger, flush
        configure(service="unit", environment="test")
        log = get_logger("unit")
        for i in range(200):
            log.info("attachment stored", extra={"filename": "cv.pdf", "i": i})
        flush(log)
        os._exit(0)  # skip atexit: only flush() may have written the lines
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    lines = [json.loads(line) for line in out.splitlines()]
    assert len(lines) == 200
    assert lines[0]["filename_"] == pseudonym("cv.pdf") and lines[0]["filename"] == "<string>"
    assert lines[-1]["i"] == 199 and lines[-1]["service"] == "unit" and lines[-1]["environment"] == "test"


def test_an_exceptions_text_is_scrubbed_in_the_log_line() -> None:
    """Runs in a fresh interpreter (mypylogger's handlers): the type, traceback and chain stay."""
    code = textwrap.dedent("""
        import os
        from common.runtime.log import configure, get_logger, flush
        configure(service="unit", environment="test")
        log = get_logger("unit")
        try:
            try:
                raise KeyError("header of jane@corp.example")
            except KeyError as inner:
                raise ValueError("cannot parse From: Jane <jane@corp.example>") from inner
        except ValueError:
            log.exception("invocation failed")
        flush(log)
        os._exit(0)
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    [line] = [json.loads(line) for line in (out.stdout + out.stderr).splitlines() if line.startswith("{")]
    error, jane = line["error"], pseudonym("jane@corp.example")
    assert error["type"] == "ValueError" and error["message"] == f"cannot parse From: Jane <{jane}>"
    # The traceback's source lines are this test's code; the exceptions' own lines are scrubbed.
    said = [part for part in error["stack_trace"].split("\\n") if part.startswith(("KeyError", "ValueError"))]
    assert said == [f"KeyError: 'header of {jane}'", f"ValueError: cannot parse From: Jane <{jane}>"], said


def test_a_conversation_id_in_free_text_and_a_raised_exception_name_no_one() -> None:
    from common.errors import EventError
    from common.runtime.log import scrubbed_exception
    from common.store.conversations import CollisionError

    cid = pseudonym("jane-at-corp.example")
    assert (
        scrub("id jane-at-corp.example. taken; reply:jane-at-corp.example:ab")
        == f"id {cid}. taken; reply:{cid}:ab"
    )
    for exc in (CollisionError("jane-at-corp.example", "x"), EventError("From jane@corp.example unusable")):
        stand_in = scrubbed_exception(exc)
        # what the runtime reports (errorType, errorMessage) and what an except clause sees stay
        assert isinstance(stand_in, type(exc)) and type(stand_in).__name__ == type(exc).__name__
        assert "jane" not in str(stand_in) and "jane" not in repr(stand_in)


def test_internationalised_addresses_are_scrubbed_as_ascii_ones_are() -> None:
    """SMTPUTF8 local parts (RFC 6531), IDN domains in U-labels with any IDNA dot (UTS 46), and the
    full-width at sign: each becomes the pseudonym of the whole address."""
    for address in (
        "josé@exämple.com",
        "用户@例子.广告",
        "ñandú@correo.example",
        "jo@bücher.example",
        "δοκιμή@παράδειγμα.δοκιμή",
        "user@例え。テスト",
        "jo＠corp.example",
    ):
        text = scrub(f"mail from {address}, then nothing")
        assert text == f"mail from {pseudonym(address)}, then nothing", (address, text)
    fields = safe_fields({"reason": "sender josé@exämple.com. is suppressed", "detail": ["müller@ö.example"]})
    assert fields == {
        "reason": f"sender {pseudonym('josé@exämple.com')}. is suppressed",
        "detail": [pseudonym("müller@ö.example")],
    }
    assert scrub("sent at 10:00 to the team @ the office.") == "sent at 10:00 to the team @ the office."
