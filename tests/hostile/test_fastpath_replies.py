"""The fast paths' replies are host text (issue 34, items 14 and 15): a router's refusal or an
update's message holding a bidi override (U+202E draws the rest backwards) or an escape sequence
reaches the step's detail cleaned; a curl answer ending in a non-ASCII digit is "no code", not a
traceback; the recorded outcome's reply is cleaned at any depth."""

from __future__ import annotations

from console.sanitize import has_control
from console.domain.swap import fastpath

RLO = "\u202e"


def test_a_router_refusal_with_a_bidi_override_reaches_the_step_cleaned() -> None:
    code, body = fastpath.split_reply(f'{{"error": "worker {RLO}lanretni{RLO} refused\\u2066x"}}\n400'
                                      .encode().decode("unicode_escape"))
    assert code == 400
    shown = fastpath.clean(body, 200)
    assert not has_control(shown) and RLO not in shown and "\u2066" not in shown
    assert "refused" in shown


def test_an_update_message_with_escape_sequences_is_one_clean_line() -> None:
    shown = fastpath.clean("Failed.\nRolling back\x1b[31m to\x1b]52;c;eA==\x07 original \u202dx")
    assert shown == "Failed. Rolling back to original x"


def test_a_curl_answer_ending_in_a_non_ascii_digit_has_no_code() -> None:
    for tail in ("²", "٣", "\u00b9\u00b2\u00b3", "2001", "20 0"):
        assert fastpath.split_reply(f'{{"success": true}}\n{tail}') == (None, f'{{"success": true}}\n{tail}')
    assert fastpath.split_reply('{"success": true}\n200\n') == (200, '{"success": true}')


def test_the_update_replys_json_is_cleaned_at_any_depth_and_only_an_object_counts() -> None:
    from console.domain.analysis.host_replies import reply_json

    reply = reply_json('{"success": false, "message": "bad\\u202e shard\\u001b]0;T\\u0007", '
                       '"nested": [{"k\\u2067": "v\\u009b31m"}]}')
    assert reply == {"success": False, "message": "bad shard", "nested": [{"k": "v"}]}
    for body in ("[1, 2]", '"x"', "{not json", "{" * 100_000, ""):
        assert reply_json(body) == {}
