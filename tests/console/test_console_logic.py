"""The console's pure parts: the sampled history (hypothesis), the charts, record
rendering, the protobuf wire decoding and the console's own options."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from logstore.console import charts, render
from logstore.console.history import History
from logstore.console.registry import message_indexes, protobuf_fields
from logstore.console.settings import SettingsError, parse_basic_auth, settings

samples = st.lists(
    st.tuples(
        st.floats(min_value=0.01, max_value=100, allow_nan=False),
        st.dictionaries(st.sampled_from(["topic:a", "topic:b", "lag:g"]), st.integers(0, 10**9)),
    ),
    max_size=40,
)


@given(samples, st.integers(min_value=2, max_value=10))
def test_history_keeps_the_newest_and_rates_never_go_negative(steps, capacity):
    h = History(capacity)
    now = 0.0
    kept: list[tuple[float, dict[str, int]]] = []
    for dt, values in steps:
        now += dt
        h.record(now, values)
        kept = (kept + [(now, values)])[-capacity:]
    assert len(h) == len(kept)
    for name in ("topic:a", "lag:g"):
        assert h.values(name) == [(t, v[name]) for t, v in kept if name in v]
    expected = []
    for (t0, v0), (t1, v1) in zip(kept, kept[1:]):
        common = [k for k in v1 if k.startswith("topic:") and k in v0]
        if common:
            expected.append((t1, sum(max(0, v1[k] - v0[k]) for k in common) / (t1 - t0)))
    family = h.rates("topic:", prefix=True)
    assert [t for t, _ in family] == [t for t, _ in expected]
    assert [r for _, r in family] == pytest.approx([r for _, r in expected])
    assert all(rate >= 0 for _, rate in family)


def test_history_ignores_a_sample_not_after_the_newest():
    h = History()
    h.record(2.0, {"x": 1})
    h.record(2.0, {"x": 5})
    h.record(1.0, {"x": 9})
    assert h.values("x") == [(2.0, 1)]
    h.record(4.0, {"x": 11})
    assert h.rate("x") == 5.0
    assert h.latest("x") == 11


def test_chart_draws_each_series_and_escapes_labels():
    svg = charts.line_chart({"<in>": [(0.0, 1.0), (5.0, 3.0)], "out": []})
    assert svg.startswith("<svg") and svg.endswith("</svg>")
    assert svg.count("<polyline") == 1
    assert "&lt;in&gt;: 3" in svg
    assert "no samples yet" in charts.line_chart({"in": []})
    assert charts.human(1234) == "1.2k" and charts.human(2_500_000) == "2.5M"


def test_render_formats():
    assert render.show(None) == ("null", "null")
    assert render.show(b'{"a": [1, 2]}') == ("json", '{\n  "a": [\n    1,\n    2\n  ]\n}')
    assert render.show(b"hello") == ("text", "hello")
    assert render.show(b"\x00\x01\xff") == ("hex", "0001ff")
    assert render.show(b"hello", "hex") == ("hex", "68656c6c 6f")
    assert render.show(b"42", "json") == ("json", "42")
    assert render.show(b"42") == ("text", "42")
    big = b"x" * (render.SHOWN_BYTES + 10)
    kind, text = render.show(big)
    assert kind == "text" and text.endswith(f"({len(big)} bytes, {render.SHOWN_BYTES} shown)")
    assert render.schema_id(b"\x00" + struct.pack(">I", 7) + b"payload") == 7
    assert render.schema_id(b"\x01abcd") is None and render.schema_id(b"\x00ab") is None


def test_protobuf_wire_fields():
    # field 1 varint 150, field 2 "hi", field 3 nested {1: 5}
    message = bytes([0x08, 0x96, 0x01, 0x12, 0x02]) + b"hi" + bytes([0x1A, 0x02, 0x08, 0x05])
    assert protobuf_fields(message) == {"1": [150], "2": ["hi"], "3": [{"1": [5]}]}
    assert message_indexes(b"\x00" + message) == ([0], message)
    assert message_indexes(bytes([0x04, 0x02, 0x04]) + message) == ([1, 2], message)
    with pytest.raises(ValueError):
        protobuf_fields(bytes([0x12, 0x09, 0x01]))


@given(st.binary(max_size=64))
def test_protobuf_decoding_of_any_bytes_ends_in_fields_or_valueerror(data):
    try:
        protobuf_fields(data)
    except ValueError:
        pass


def test_settings(tmp_path):
    s = settings("127.0.0.1:9000", "http://reg:8081/", False, None, 5.0)
    assert (s.host, s.port, s.registry, s.users) == ("127.0.0.1", 9000, "http://reg:8081", ())
    with pytest.raises(SettingsError, match="not a loopback address"):
        settings("0.0.0.0:9000", None, False, None, 5.0)
    assert settings("0.0.0.0:9000", None, True, "ann:pw", 5.0).users == (("ann", "pw"),)
    users = tmp_path / "users"
    users.write_text("# operators\nann:pw1\n\nbob:pw:2\n")
    assert parse_basic_auth(str(users)) == (("ann", "pw1"), ("bob", "pw:2"))
    for bad in ("nocolon", ":pw", "ann:"):
        with pytest.raises(SettingsError):
            parse_basic_auth(bad)
    with pytest.raises(SettingsError, match="HOST:PORT"):
        settings("nowhere", None, False, None, 5.0)
    with pytest.raises(SettingsError, match="http"):
        settings("127.0.0.1:1", "reg:8081", False, None, 5.0)
