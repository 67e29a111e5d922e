"Property and adversarial tests of coworkenv.clawmark_services (the notebook 14a holds the worked examples and shape tests)."
import asyncio, random, string
from datetime import datetime

import pytest
from hypothesis import given, settings, strategies as st, HealthCheck

from coworkenv.clawmark_services import (ClawMarkServices, LocalSandbox, MailStore, NotionError, NotionStore, SheetStore,
                                         SheetsError, col_index, col_letters, from_plain, run_coro, sheets_text, to_plain)

FAST = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


@given(st.integers(0, 18277))
def test_column_letters_round_trip(i):
    assert col_index(col_letters(i)) == i


@FAST
@given(st.lists(st.tuples(st.integers(0, 12), st.integers(0, 6), st.one_of(st.text(max_size=4), st.integers(-99, 99), st.booleans())),
                max_size=25))
def test_sheet_reads_match_a_model(writes):
    "Random single-cell writes, then a whole-sheet read: rendered text, '' clears, trailing empties trimmed."
    store = SheetStore(); sid = store.create("S")
    model = {}
    for r, c, v in writes:
        store.write(sid, f"Sheet1!{col_letters(c)}{r + 1}", [[v]])
        if v == "" and isinstance(v, str): model.pop((r, c), None)
        else: model[(r, c)] = sheets_text(v)
    got = store.read(sid, "Sheet1")
    if not model: assert got == []; return
    last = max(r for r, _ in model)
    assert len(got) == last + 1
    for r, row in enumerate(got):
        cols = [c for (rr, c) in model if rr == r]
        assert len(row) == (max(cols) + 1 if cols else 0)
        for c, text in enumerate(row): assert text == model.get((r, c), "")


def test_sheet_errors_change_nothing():
    store = SheetStore(); sid = store.create("S")
    store.write(sid, "Sheet1", [["a", "b"]])
    for rng, vals in [("Sheet1!A1:B1", [["x", "y", "z"]]), ("Sheet1!A1", [["x", object()]]), ("Other!A1", [["x"]]),
                      ("Sheet1!Y1", [["x", "y", "z"]])]:
        with pytest.raises(SheetsError): store.write(sid, rng, vals)
    assert store.read(sid, "Sheet1") == [["a", "b"]]


@FAST
@given(st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=200))
def test_mail_body_round_trips_exactly(body):
    store = MailStore()
    store.deliver(from_header="a@x.example", to="b@y.example", subject="s", body=body)
    assert store.inbox("b@y.example")[0]["body"] == body


@FAST
@given(st.text(alphabet=st.characters(blacklist_categories=("Cs", "Cc", "Zl", "Zp")), max_size=40))
def test_short_subjects_round_trip(subject):
    store = MailStore()
    store.deliver(from_header="a@x.example", to="b@y.example", subject=subject, body="b")
    got = store.inbox("b@y.example")[0]["subject"]
    assert got.replace("\r\n", "") == subject or got.strip() == subject.strip()


@pytest.mark.parametrize("to,cc", [("", ""), (" ", None), ("nobody", "c@d.example"), ("a@b.c, <>", ""), ("x@y@z", ""),
                                   ("a@b.c d@e.f", ""), (None, ""), ("a@b.c", "not-an-address")])
def test_bad_recipients_deliver_nothing(to, cc):
    store = MailStore()
    with pytest.raises(ValueError): store.deliver(from_header="a@x.example", to=to, cc=cc, subject="s", body="b")
    assert store.addresses() == [] and store.log == []


def test_recipient_lists_tolerate_empty_entries():
    store = MailStore()
    store.deliver(from_header="a@x.example", to="b@y.example, ;; C@Y.example;", cc=",", bcc="b@y.example", subject="s", body="b")
    assert store.addresses() == ["b@y.example", "c@y.example"]


@FAST
@given(st.lists(st.sampled_from(["..", ".", "a", "", "workspace", "b c"]), max_size=8), st.booleans())
def test_host_path_never_leaves_the_root(tmp_path, parts, absolute):
    sb = LocalSandbox(tmp_path / "ws")
    path = ("/workspace/" if absolute else "") + "/".join(parts)
    try: p = sb.host_path(path)
    except ValueError: return
    assert p == sb.root or sb.root in p.parents
    assert sb.host_path(sb.remote_path(p)) == p


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.text(alphabet=string.printable, max_size=30))
def test_exec_never_raises(tmp_path, command):
    r = LocalSandbox(tmp_path / "ws").exec_sync(command, timeout_sec=2)
    assert isinstance(r.stdout, str) and isinstance(r.stderr, str) and isinstance(r.return_code, int)


@pytest.mark.parametrize("ptype,value,plain", [
    ("title", "Q3 plan", "Q3 plan"), ("rich_text", "", ""), ("select", "High", "High"), ("select", None, None),
    ("multi_select", ["a", "b"], ["a", "b"]), ("number", "12.5", 12.5), ("number", 7, 7), ("checkbox", "no", False),
    ("date", "2026-03-01", "2026-03-01"), ("date", "2026-03-01/2026-03-02", "2026-03-01/2026-03-02"),
    ("email", "x@y.z", "x@y.z"), ("url", "", None), ("phone_number", "+1 555", "+1 555")])
def test_notion_plain_round_trip(ptype, value, plain):
    ns = NotionStore(); ns.create_page("P")
    schema = {"Name": {"title": {}}} if ptype == "title" else {"Name": {"title": {}}, "P": {ptype: {}}}
    ns.create_database("DB", schema)
    name = "Name" if ptype == "title" else "P"
    rid = ns.add_row_plain("db", {name: value})
    assert ns.query_plain("db")[0]["properties"][name] == plain
    assert to_plain(ns.row(rid)["properties"][name]) == plain


def test_notion_refused_writes_leave_no_trace():
    ns = NotionStore(); ns.create_page("P")
    ns.create_database("DB", {"Name": {"title": {}}, "Tags": {"multi_select": {}}})
    with pytest.raises(NotionError): ns.add_row("db", {"Tags": {"multi_select": [{"name": "new"}]}, "Missing": {"number": 1}})
    assert ns.query("db") == [] and ns.select_options("db") == {"Tags": []}


def test_run_coro_inside_a_running_loop_propagates_errors():
    async def bad(): raise ValueError("inner")
    async def outer():
        with pytest.raises(ValueError, match="inner"): run_coro(bad())
        return "ok"
    assert asyncio.run(outer()) == "ok"


def test_episodes_with_one_seed_are_identical(tmp_path):
    def episode(name):
        svc = ClawMarkServices(tmp_path / name, ["notion", "google_sheets", "calendar"], {}, seed=11)
        ctx = svc.context(tmp_path)
        async def go():
            await ctx.notion.create_page("P"); await ctx.notion.create_database("D", {"N": {"title": {}}, "S": {"select": {}}})
            await ctx.notion.add_database_row("D", {"S": {"select": {"name": "x"}}})
            s = await ctx.google_sheets.create_spreadsheet("S")
            await ctx.calendar.create_calendar("C")
            await ctx.calendar.add_event("C", "e", datetime(2026, 1, 1, 9), datetime(2026, 1, 1, 10))
            return (await ctx.notion.query_db("D"), s, await ctx.calendar.get_events("C"))
        rows, s, evs = run_coro(go())
        for r in rows: r.pop("created_time"); r.pop("last_edited_time")
        return rows, s, evs
    assert episode("a") == episode("b")
