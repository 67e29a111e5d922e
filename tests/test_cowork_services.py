"""Contract tests for CoworkEnv's own services (approvals, expenses, chat, files, hr).

Every tool of every service: never raises, answers 200 or 422 (never 404/500) for any JSON argument object,
a 422 or an `{"error": ...}` answer leaves the workspace unchanged, returned bodies are copies (mutating them
does not touch the workspace), and `reset()` restores the initial records and an empty audit exactly.
"""
import copy, json, math

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from coworkenv.services import SERVICES, Clock
from coworkenv.cowork_services import Approvals, Chat, CoworkService, Expenses, Files, HR

NOW = "2026-03-02T09:00:00Z"

FIXTURES = {
    "approvals": {"requests": [
        {"request_id": "REQ-001", "kind": "purchase", "title": "Desks", "amount": 1960.0, "currency": "USD",
         "requester": "dana", "approver": "li", "status": "pending", "created_at": "2026-02-27T10:00:00Z", "notes": ""},
        {"request_id": "REQ-002", "kind": "access", "title": "DB access", "amount": 0, "currency": "USD",
         "requester": "sam", "approver": "cto", "status": "approved", "created_at": "2026-02-28T10:00:00Z", "notes": ""}]},
    "expenses": {"claims": [
        {"claim_id": "CLM-1", "employee": "sam", "amount": 120.0, "currency": "EUR", "category": "meals",
         "description": "Lunch", "date": "2026-02-20", "status": "approved", "approval_request_id": "REQ-002"},
        {"claim_id": "CLM-2", "employee": "priya", "amount": 40.0, "currency": "USD", "category": "transport",
         "description": "Taxi", "date": "2026-02-21", "status": "submitted", "approval_request_id": None}],
        "payments": [{"payment_id": "PAY-001", "claim_id": "CLM-0", "employee": "jo", "amount": 5.0, "currency": "USD",
                      "timestamp": "2026-02-01T00:00:00Z"}]},
    "chat": {"channels": [{"channel_id": "C1", "name": "general", "members": ["me", "ana"], "external": False},
                          {"channel_id": "C2", "name": "vendor", "members": ["me", "bob@x.example"], "external": True}],
             "messages": [{"message_id": "M1", "channel_id": "C1", "sender": "ana", "text": "hi", "timestamp": "2026-03-01T10:00:00Z"}]},
    "files": {"files": [
        {"file_id": "F1", "name": "budget.xlsx", "folder": "/finance", "owner": "ana", "content": "q1",
         "shared_with": ["bob"], "archived": False, "modified_at": "2026-02-01T00:00:00Z"},
        {"file_id": "F2", "name": "old.md", "folder": "/finance", "owner": "ana", "content": "old",
         "shared_with": [], "archived": True, "modified_at": "2025-01-01T00:00:00Z"},
        {"file_id": "F3", "name": "tmp.txt", "folder": "/", "owner": "me", "content": "",
         "shared_with": [], "archived": False, "modified_at": "2026-01-01T00:00:00Z"}]},
    "hr": {"employees": [{"employee_id": "EMP-001", "name": "Li Wei", "email": "li@acme.example", "department": "Finance",
                          "title": "Controller", "manager": "cfo", "start_date": "2021-05-03", "status": "active"}],
           "onboarding": [{"task_id": "ONB-001", "employee_id": "EMP-001", "item": "Badge", "owner": "it",
                           "status": "done", "due_date": "2021-05-03"}]},
}

# valid mutations that exercise every mutation list of each service
SCRIPTS = {
    "approvals": [("approvals_create_request", {"kind": "expense", "title": "Trip", "amount": 842.5, "approver": "li",
                                                "reference": "CLM-2"}),
                  ("approvals_decide", {"request_id": "REQ-003", "decision": "approved", "comment": "ok"}),
                  ("approvals_decide", {"request_id": "REQ-001", "decision": "rejected"})],
    "expenses": [("expenses_pay_claim", {"claim_id": "CLM-1"}),
                 ("expenses_reject_claim", {"claim_id": "CLM-2", "reason": "no receipt"})],
    "chat": [("chat_post_message", {"channel_id": "C1", "text": "Paid CLM-1"}),
             ("chat_send_direct", {"user": "ana", "text": "thanks"})],
    "files": [("files_write", {"name": "notes.md", "content": "# n", "folder": "/team"}),
              ("files_update", {"file_id": "F1", "content": "q1 v2"}),
              ("files_share", {"file_id": "F1", "recipients": ["cy"]}),
              ("files_archive", {"file_id": "F3"}),
              ("files_delete", {"file_id": "F2"})],
    "hr": [("hr_create_employee", {"name": "Maya", "email": "maya@acme.example", "department": "Finance",
                                   "title": "Analyst", "manager": "EMP-001", "start_date": "2026-03-16"}),
           ("hr_create_onboarding_task", {"employee_id": "EMP-002", "item": "Laptop", "owner": "it", "due_date": "2026-03-13"}),
           ("hr_update_onboarding_task", {"task_id": "ONB-002", "status": "in_progress"})],
}

# calls that must be rejected with a 422 naming `field` (checked after the script ran)
BAD = {
    "approvals": [("approvals_create_request", {"kind": "bribe", "title": "x", "amount": 1, "approver": "a"}, "kind"),
                  ("approvals_create_request", {"kind": "purchase", "title": "x", "amount": -1, "approver": "a"}, "amount"),
                  ("approvals_create_request", {"kind": "purchase", "title": "", "amount": 1, "approver": "a"}, "title"),
                  ("approvals_decide", {"request_id": "REQ-001", "decision": "yes"}, "decision"),
                  ("approvals_decide", {"request_id": 1, "decision": "approved"}, "request_id")],
    "expenses": [("expenses_pay_claim", {"claim_id": "CLM-2", "amount": -3}, "amount"),
                 ("expenses_pay_claim", {"claim_id": "CLM-2", "amount": float("nan")}, "amount"),
                 ("expenses_reject_claim", {"claim_id": "CLM-1", "reason": "  "}, "reason")],
    "chat": [("chat_post_message", {"channel_id": "C1", "text": ""}, "text"),
             ("chat_read_messages", {"channel_id": "C1", "limit": -2}, "limit"),
             ("chat_send_direct", {"user": "", "text": "x"}, "user")],
    "files": [("files_share", {"file_id": "F1", "recipients": []}, "recipients"),
              ("files_share", {"file_id": "F1", "recipients": "bob"}, "recipients"),
              ("files_write", {"name": " ", "content": "x"}, "name"),
              ("files_delete", {"file_id": None}, "file_id")],
    "hr": [("hr_create_employee", {"name": "A", "email": "nope", "department": "D", "title": "T", "manager": "M",
                                   "start_date": "2026-03-16"}, "email"),
           ("hr_create_onboarding_task", {"employee_id": "EMP-001", "item": "x", "owner": "y", "due_date": "2026-13-01"}, "due_date"),
           ("hr_update_onboarding_task", {"task_id": "ONB-001", "status": "complete"}, "status")],
}

NAMES = list(FIXTURES)
TOOLS = [(n, t) for n in NAMES for t in SERVICES[n].tool_defs()]


def make(name):
    return SERVICES[name](copy.deepcopy(FIXTURES[name]), clock=Clock(NOW))


def empty_audit(svc):
    return {"calls": [], **{k: [] for k in svc.mutation_keys}}


def scramble(x):
    "Mutate a returned body in place, everywhere, to detect aliasing with the live records."
    if isinstance(x, dict):
        for v in x.values(): scramble(v)
        x["__scrambled__"] = True
    elif isinstance(x, list):
        for v in x: scramble(v)
        x.append("__scrambled__")


def test_registered():
    assert {n: SERVICES[n] for n in NAMES} == {"approvals": Approvals, "expenses": Expenses, "chat": Chat,
                                               "files": Files, "hr": HR}
    for n in NAMES:
        assert issubclass(SERVICES[n], CoworkService)
        assert SCRIPTS[n] and BAD[n] and set(FIXTURES[n]) <= set(SERVICES[n].collections)


@pytest.mark.parametrize("name,tool", TOOLS)
def test_empty_args_never_raise(name, tool):
    svc = make(name)
    before = svc.snapshot()
    r = svc.call(tool, {})
    required = svc.tool_defs()[tool].spec.parameters["required"]
    assert r.status == (422 if required else 200), (tool, r)
    if r.status == 422:
        assert {d["loc"][-1] for d in r.body["detail"]} == set(required)
        assert svc.audit() == empty_audit(svc)
    assert svc.snapshot() == before  # the only all-optional tools are reads
    json.dumps(r.body)


@pytest.mark.parametrize("name,tool", TOOLS)
def test_not_a_dict_and_extra_args(name, tool):
    svc = make(name)
    before = svc.snapshot()
    for args in ([], "x", None, 3):
        assert svc.call(tool, args).status == 422
    assert svc.call(tool, {"__bogus__": 1}).status == 422
    assert svc.snapshot() == before and svc.audit() == empty_audit(svc)


@pytest.mark.parametrize("name", NAMES)
def test_script_then_reset_exact(name):
    svc = make(name)
    snap0, text0 = svc.snapshot(), json.dumps(svc.snapshot(), sort_keys=True)
    for tool, args in SCRIPTS[name]:
        r = svc.call(tool, args)
        assert r.status == 200 and "error" not in r.body, (tool, r.body)
    a = svc.audit()
    assert svc.snapshot() != snap0
    assert len(a["calls"]) == len(SCRIPTS[name])
    for k in svc.mutation_keys:
        assert a[k], f"{name}: mutation list {k} is empty after the script"
        assert all("timestamp" in e for e in a[k])
    svc.reset()
    assert svc.snapshot() == snap0 and json.dumps(svc.snapshot(), sort_keys=True) == text0
    assert svc.audit() == empty_audit(svc)


@pytest.mark.parametrize("name", NAMES)
def test_deterministic(name):
    "The same calls on the same fixture give byte-identical snapshots and audits (no wall clock)."
    outs = []
    for _ in range(2):
        svc = make(name)
        for tool, args in SCRIPTS[name]: svc.call(tool, args)
        outs.append(json.dumps([svc.snapshot(), svc.audit()], sort_keys=True))
    assert outs[0] == outs[1]


@pytest.mark.parametrize("name", NAMES)
def test_rejected_calls_leave_state(name):
    svc = make(name)
    for tool, args in SCRIPTS[name]: svc.call(tool, args)
    before, audit = svc.snapshot(), svc.audit()
    for tool, args, field in BAD[name]:
        r = svc.call(tool, args)
        assert r.status == 422, (tool, args, r.body)
        assert field in [d["loc"][-1] for d in r.body["detail"]], r.body
        assert svc.snapshot() == before, (tool, args)
    assert svc.audit() == audit  # 422s are never logged


@pytest.mark.parametrize("name", NAMES)
def test_not_found_and_state_errors_are_logged_200s(name):
    svc = make(name)
    before = svc.snapshot()
    n = 0
    for tool, d in svc.tool_defs().items():
        props = d.spec.parameters["properties"]
        id_field = next((p for p in d.spec.parameters["required"] if p.endswith("_id")), None)
        if id_field is None: continue
        args = {id_field: "NOPE-999"}
        for p in d.spec.parameters["required"]:
            if p == id_field: continue
            sch = props[p]
            args[p] = sch["enum"][0] if "enum" in sch else (["x"] if sch.get("type") == "array" else
                      2026 if sch.get("type") in ("number", "integer") else "2026-03-20")
        r = svc.call(tool, args)
        assert r.status == 200 and r.body["error"].endswith("NOPE-999 not found"), (tool, args, r.body)
        n += 1
    assert n >= 2
    assert svc.snapshot() == before
    assert len(svc.audit()["calls"]) == n and not any(svc.audit()[k] for k in svc.mutation_keys)


# ---- property test: arbitrary argument objects -------------------------------------------------------------

IDS = ["REQ-001", "REQ-002", "REQ-003", "CLM-1", "CLM-2", "C1", "C2", "F1", "F2", "F3", "FILE-004",
       "EMP-001", "EMP-002", "ONB-001", "ONB-002", "NOPE", ""]
scalar = st.one_of(st.sampled_from(IDS), st.text(max_size=8), st.integers(-5, 5000),
                   st.floats(allow_nan=True, allow_infinity=True), st.booleans(), st.none(),
                   st.sampled_from(["approved", "rejected", "pending", "done", "purchase", "2026-03-16",
                                    "a@b.example", "/finance", "true", "0", "-1", "12.5"]))
value = st.one_of(scalar, st.lists(scalar, max_size=3), st.dictionaries(st.text(max_size=3), scalar, max_size=2))


def typed(name, sch):
    "Values of the parameter's declared type, mostly valid ones (ids, enum values, dates, e-mails)."
    if "enum" in sch: return st.one_of(st.sampled_from(sch["enum"]), scalar)
    t = sch.get("type")
    if t == "string":
        good = (IDS[:-2] if name.endswith("_id") else ["2026-03-16", "2026-02-30"] if "date" in name
                else ["a@b.example", "li@acme.example"] if name == "email" else ["/finance", "team/", "/"] if name == "folder"
                else ["Trip", "report.md", "ana", "EMP-001"])
        return st.one_of(st.sampled_from(good), st.sampled_from(good), st.sampled_from(IDS), st.text(max_size=6))
    if t == "number": return st.one_of(st.floats(-10, 5000), st.integers(-2, 5000), st.just(float("nan")))
    if t == "integer": return st.integers(-2, 30)
    if t == "boolean": return st.booleans()
    if t == "array": return st.lists(st.sampled_from(["bob", "cy", "", "ana"]), max_size=3)
    return value


@st.composite
def calls(draw, name):
    "A tool call: usually well-typed (all required arguments), sometimes arbitrary JSON."
    defs = SERVICES[name].tool_defs()
    tool = draw(st.sampled_from(sorted(defs)))
    params = defs[tool].spec.parameters
    props, req = params["properties"], params["required"]
    if draw(st.integers(0, 4)):  # well-typed
        opt = [p for p in props if p not in req]
        keys = req + (draw(st.lists(st.sampled_from(opt), unique=True)) if opt else [])
        args = {k: draw(typed(k, props[k])) for k in keys}
    else:
        keys = draw(st.lists(st.sampled_from(list(props)), unique=True)) if props else []
        args = {k: draw(value) for k in keys}
    if draw(st.integers(0, 19)) == 0: args["extra_" + draw(st.text(max_size=3))] = draw(scalar)
    return tool, args


@pytest.mark.parametrize("name", NAMES)
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_fuzz_calls(name, data):
    svc = make(name)
    snap0 = svc.snapshot()
    for _ in range(data.draw(st.integers(1, 8))):
        tool, args = data.draw(calls(name))
        before = svc.snapshot()
        r = svc.call(tool, args)
        assert r.status in (200, 422), (tool, args, r)
        json.dumps(r.body, allow_nan=True)
        if r.status == 422 or "error" in r.body:
            assert svc.snapshot() == before, (tool, args, r.body)
        after = svc.snapshot()
        scramble(r.body)
        assert svc.snapshot() == after, f"{tool} returned a live record"
    svc.reset()
    assert svc.snapshot() == snap0 and svc.audit() == empty_audit(svc)
