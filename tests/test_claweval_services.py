"Contract tests over every Claw-Eval service port: schemas, robustness of `call`, reset exactness, no aliasing."
import inspect, json, time
import pytest
from hypothesis import given, settings, strategies as st, HealthCheck

from coworkenv.services import SERVICES, Clock
from coworkenv.claweval_services import CLAWEVAL_SERVICES

NO_ROUTE = {"todo_get_task", "rss_get_feed"}  # Claw-Eval declares them but has no route: always 404

FIXTURES = {
    "gmail": [
        {"message_id": "m1", "from": "a@x.com", "to": "me@x.com", "subject": "Hi", "date": "2026-03-01T10:00:00Z",
         "is_read": False, "labels": ["inbox"], "body": "Hello"},
        {"message_id": "m2", "from": "b@x.com", "to": "me@x.com", "subject": "Re", "date": "2026-02-28T10:00:00+08:00",
         "is_read": True, "labels": ["inbox", "work"], "body": "World"}],
    "calendar": [
        {"event_id": "evt_001", "title": "Standup", "start_time": "2026-03-03T09:00:00Z", "end_time": "2026-03-03T09:15:00Z",
         "attendees": ["a@x.com", "b@x.com"], "location": "Zoom"},
        {"event_id": "evt_002", "title": "Review", "start_time": "2026-03-03T14:00:00Z", "end_time": "2026-03-03T15:00:00Z",
         "attendees": ["b@x.com"], "location": "Room 2", "recurring": True}],
    "todo": [
        {"task_id": "todo_001", "title": "Deck", "status": "pending", "priority": "high", "description": "", "due_date": None, "tags": ["a"]},
        {"task_id": "todo_002", "title": "Certs", "status": "completed", "priority": "low", "description": "x", "due_date": "2026-03-09", "tags": []}],
    "contacts": [
        {"contact_id": "c1", "name": "Alice Chen", "department": "Finance", "title": "Controller", "email": "a@x.com", "phone": "1"},
        {"contact_id": "c2", "name": "Bob Li", "department": "Ops", "title": "SRE", "email": "b@x.com", "phone": "2", "skills": ["k8s"]}],
    "finance": [
        {"transaction_id": "T1", "date": "2026-02-01", "amount": 10.5, "description": "Taxi", "category": "travel"},
        {"transaction_id": "T2", "date": "2026-02-10", "amount": 99.0, "description": "Hotel", "category": "travel"}],
    "notes": [
        {"note_id": "n1", "title": "Sync", "content": "Ship Friday", "created_at": "2026-02-26T10:00:00Z", "participants": ["A", "B"], "duration_minutes": 30},
        {"note_id": "n2", "title": "Retro", "content": "More tests", "created_at": "2026-02-27T10:00:00Z", "participants": ["C"], "duration_minutes": 45, "tags": ["team"]}],
    "kb": [
        {"article_id": "KB-1", "title": "VPN setup", "category": "network", "content": "Install the client.", "last_updated": "2025-01-01", "tags": ["vpn"], "views": 3},
        {"article_id": "KB-2", "title": "重置密码", "category": "account", "content": "打开自助门户。", "last_updated": "2025-02-01", "tags": ["密码"], "views": 9}],
    "helpdesk": [
        {"ticket_id": "TK-1", "title": "VPN down", "description": "d", "reporter": "a", "department": "Sales", "priority": "high",
         "status": "open", "created_at": "2026-03-01T08:00:00Z", "tags": ["vpn"], "category": "network"},
        {"ticket_id": "TK-2", "title": "Printer", "description": "d", "reporter": "b", "department": "Ops", "priority": "low",
         "status": "pending", "created_at": "2026-03-01T09:00:00Z", "tags": [], "category": "hardware"}],
    "inventory": [
        {"product_id": "P1", "name": "Cable", "category": "acc", "quantity": 3, "reorder_level": 10, "unit_price": 4.5},
        {"product_id": "P2", "name": "Monitor", "category": "display", "quantity": 8, "reorder_level": 5, "unit_price": 219.0}],
    "rss": [
        {"article_id": "r1", "title": "A", "source": "S1", "category": "ai", "content": "c", "summary": "s", "published_at": "2026-03-01", "word_count": 100},
        {"article_id": "r2", "title": "B", "source": "S2", "category": "policy", "content": "c", "summary": "s", "published_at": "2026-03-02", "word_count": 200, "tags": ["x"]}],
    "crm": [
        {"customer_id": "C1", "name": "Northwind", "contact_person": "Maria", "industry": "retail", "tier": "gold", "status": "active", "annual_revenue": 100,
         "recent_orders": [{"order_id": "O1", "products": ["a"], "total_price": 5, "date": "2026-01-01"}]},
        {"customer_id": "C2", "name": "Contoso", "contact_person": "Raj", "industry": "health", "tier": "silver", "status": "churned", "annual_revenue": 50}],
    "config": [
        {"integration_id": "I1", "name": "Pay", "service": "stripe", "status": "active", "last_verified": "2026-01-01", "monthly_calls": 5,
         "error_rate": 0.1, "api_key": "k", "config": {"region": "eu", "retries": [1, 2]}},
        {"integration_id": "I2", "name": "Sync", "service": "sf", "status": "error", "last_verified": "2026-01-02", "monthly_calls": 6, "error_rate": 0.3}],
    "scheduler": [
        {"job_id": "JOB-001", "name": "Backup", "cron_expression": "0 2 * * *", "enabled": True, "last_status": "failed", "tags": ["db"],
         "execution_history": [{"run_at": "2026-03-01T02:00:00Z", "status": "failed", "duration_s": 3}]},
        {"job_id": "JOB-002", "name": "Report", "cron_expression": "0 8 * * 1", "enabled": False, "last_status": "success", "tags": [], "execution_history": []}],
    "web": {
        "search_results": [
            {"url": "https://a.example", "title": "A", "snippet": "s", "source": "src", "published_at": "2026-01-01", "keywords": ["cloud outage"]},
            {"url": "https://b.example", "title": "B", "snippet": "s", "keywords": ["服务中断", "incident"]}],
        "pages": [
            {"url": "https://a.example", "status_code": 200, "title": "A", "content_type": "text/html", "content": "Body"},
            {"url": "https://b.example", "status_code": 500, "title": "B", "content_type": "text/html", "content": None, "error": "boom"}]},
}

# mutating call sequences (every call must answer 200 with no "error" key)
SEQUENCES = {
    "gmail": [("gmail_send_message", {"to": "a@x.com", "subject": "s", "body": "b"}),
              ("gmail_save_draft", {"to": "a@x.com", "subject": "s", "body": "b", "reply_to_message_id": "m1"}),
              ("gmail_get_message", {"message_id": "m1"}), ("gmail_list_messages", {"days_back": 30})],
    "calendar": [("calendar_create_event", {"title": "New", "start_time": "2026-03-03T11:00:00Z", "end_time": "2026-03-03T12:00:00Z", "attendees": ["c@x.com"]}),
                 ("calendar_delete_event", {"event_id": "evt_001"}), ("calendar_list_events", {"date": "2026-03-03"}),
                 ("calendar_get_user_events", {"user": "b@x.com", "date": "2026-03-03"})],
    "todo": [("todo_create_task", {"title": "New", "due_date": "2026-03-10"}),
             ("todo_update_task", {"task_id": "todo_001", "status": "completed", "tags": ["a", "b"]}),
             ("todo_delete_task", {"task_id": "todo_002"}), ("todo_list_tasks", {})],
    "contacts": [("contacts_send_message", {"contact_id": "c1", "message": "hi"}), ("contacts_search", {"query": "Alice"})],
    "finance": [("finance_submit_report", {"title": "R", "transactions": ["T1"], "total_amount": 10.5}),
                ("finance_report_submit", {"title": "R2", "transactions": [], "total_amount": 0})],
    "notes": [("notes_share", {"note_id": "n1", "recipients": ["a@x.com"]}), ("notes_list", {})],
    "kb": [("kb_update_article", {"article_id": "KB-1", "content": "New content"}), ("kb_search", {"query": "vpn"})],
    "helpdesk": [("helpdesk_update_ticket", {"ticket_id": "TK-1", "priority": "low", "tags": ["x"]}),
                 ("helpdesk_close_ticket", {"ticket_id": "TK-2", "resolution": "fixed"}), ("helpdesk_list_tickets", {"status": "all"})],
    "inventory": [("inventory_create_order", {"product_id": "P1", "quantity": 20, "supplier": "S"}), ("inventory_list_items", {})],
    "rss": [("rss_publish", {"title": "Digest", "content": "c", "recipients": ["a@x.com"]}), ("rss_list_feeds", {})],
    "crm": [("crm_export_report", {"title": "R", "customer_ids": ["C1"], "summary": "s"}), ("crm_list_customers", {"tier": "gold"})],
    "config": [("config_update_integration", {"integration_id": "I1", "status": "disabled", "notes": "rotated"}),
               ("config_send_notification", {"to": "a@x.com", "subject": "s", "body": "b"}), ("config_get_integration", {"integration_id": "I1"})],
    "scheduler": [("scheduler_create_job", {"name": "N", "cron_expression": "* * * * *", "action": "a", "tags": ["t"]}),
                  ("scheduler_update_job", {"job_id": "JOB-001", "enabled": False, "tags": ["db", "x"]}),
                  ("scheduler_delete_job", {"job_id": "JOB-002"}), ("scheduler_job_history", {"job_id": "JOB-001"})],
    "web": [("send_notification", {"channel": "slack", "message": "m", "recipients": ["#ops"]}),
            ("web_search", {"query": "cloud incident"}), ("web_fetch", {"url": "https://a.example"})],
}

TOOLS = [(n, t) for n, c in CLAWEVAL_SERVICES.items() for t in c.tool_defs()]

def make(name): return CLAWEVAL_SERVICES[name](json.loads(json.dumps(FIXTURES[name])), clock=Clock("2026-03-02T09:00:00Z"))


def test_all_services_registered():
    assert set(CLAWEVAL_SERVICES) == {"gmail", "calendar", "todo", "contacts", "finance", "notes", "kb", "helpdesk",
                                      "inventory", "rss", "crm", "config", "scheduler", "web"}
    for n, c in CLAWEVAL_SERVICES.items(): assert SERVICES[n] is c
    assert set(FIXTURES) == set(SEQUENCES) == set(CLAWEVAL_SERVICES)


@pytest.mark.parametrize("svc,tool", TOOLS)
def test_schema_matches_signature(svc, tool):
    cls = CLAWEVAL_SERVICES[svc]
    d = cls.tool_defs()[tool]
    params = list(inspect.signature(getattr(cls, d.method)).parameters.values())[1:]
    schema = d.spec.parameters
    assert schema["type"] == "object"
    assert list(schema["properties"]) == [p.name for p in params]
    assert schema["required"] == [p.name for p in params if p.default is inspect.Parameter.empty]
    assert d.spec.description and d.spec.name == tool
    for p in params:
        prop = schema["properties"][p.name]
        assert prop.get("description"), f"{tool}.{p.name} has no docment"
        if p.default is not inspect.Parameter.empty and p.default is not None: assert prop["default"] == p.default
    assert d.endpoint.startswith(f"/{svc}/")


@pytest.mark.parametrize("svc,tool", TOOLS)
@pytest.mark.parametrize("extra", ["forbid", "ignore"])
def test_call_with_empty_args(svc, tool, extra):
    s = make(svc)
    r = s.call(tool, {}, extra=extra)
    required = CLAWEVAL_SERVICES[svc].tool_defs()[tool].spec.parameters["required"]
    if tool in NO_ROUTE:
        assert (r.status, r.body) == (404, {"detail": "Not Found"}) and s.calls == []
    elif required:
        assert r.status == 422 and s.calls == []
        assert [e["loc"] for e in r.body["detail"]] == [["body", k] for k in required]
        assert all(e["type"] == "missing" and e["msg"] == "Field required" for e in r.body["detail"])
    else:
        assert r.status == 200 and isinstance(r.body, dict) and "error" not in r.body
        assert s.calls[-1]["response_body"] == r.body
        json.dumps(r.body)
    json.dumps(r.body)


@pytest.mark.parametrize("svc,tool", TOOLS)
def test_call_with_non_object_args(svc, tool):
    s = make(svc)
    for args in (None, [], "x", 3):
        assert s.call(tool, args).status == 422
    assert s.calls == []


@pytest.mark.parametrize("svc", sorted(CLAWEVAL_SERVICES))
def test_reset_restores_exactly(svc):
    s = make(svc)
    snap0, audit0 = json.dumps(s.snapshot(), sort_keys=True), s.audit()
    assert audit0 == {"calls": [], **{k: [] for k in s.mutation_keys}}
    results = []
    for tool, args in SEQUENCES[svc]:
        r = s.call(tool, args)
        assert r.status == 200 and "error" not in r.body, (tool, r.body)
        results.append(r)
    a = s.audit()
    assert len(a["calls"]) == len(SEQUENCES[svc])
    assert any(a[k] for k in s.mutation_keys), "the sequence should record at least one mutation"
    # responses are copies: wrecking them changes neither the state nor the audit
    before = json.dumps([s.snapshot(), s.audit()], sort_keys=True)
    def wreck(x):
        if isinstance(x, dict):
            for v in x.values(): wreck(v)
            x.clear()
        elif isinstance(x, list):
            for v in x: wreck(v)
            x.clear()
    for r in results: wreck(r.body)
    assert json.dumps([s.snapshot(), s.audit()], sort_keys=True) == before
    s.reset()
    assert json.dumps(s.snapshot(), sort_keys=True) == snap0
    assert s.audit() == audit0
    # and the same sequence replays to the same audit (determinism, with the clock reset)
    s.clock.reset()
    for tool, args in SEQUENCES[svc]: s.call(tool, args)
    s2 = make(svc)
    for tool, args in SEQUENCES[svc]: s2.call(tool, args)
    assert s.audit() == s2.audit() and s.snapshot() == s2.snapshot()


def test_audit_key_names():
    expected = {"gmail": ("sent_messages", "drafts"), "calendar": ("deleted", "created_events"), "todo": ("deleted", "updated_tasks"),
                "contacts": ("sent_messages",), "finance": ("submitted_reports",), "notes": ("shared",), "kb": ("updates",),
                "helpdesk": ("closed", "updated_tickets"), "inventory": ("orders",), "rss": ("published",), "crm": ("exported_reports",),
                "config": ("updates", "notifications"), "scheduler": ("created_jobs", "updated_jobs", "deleted_jobs"), "web": ("notifications",)}
    assert {n: c.mutation_keys for n, c in CLAWEVAL_SERVICES.items()} == expected


json_values = st.recursive(st.none() | st.booleans() | st.integers(-10**6, 10**6) | st.floats(allow_nan=False, allow_infinity=False)
                           | st.text(max_size=12), lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(max_size=5), c, max_size=3),
                           max_leaves=6)

@pytest.mark.parametrize("svc", sorted(CLAWEVAL_SERVICES))
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_random_arguments_never_raise(svc, data):
    s = make(svc)
    tool = data.draw(st.sampled_from(sorted(s.tool_defs())))
    props = list(s.tool_defs()[tool].spec.parameters["properties"])
    args = data.draw(st.dictionaries(st.sampled_from(props) if props else st.just("x"), json_values, max_size=len(props) + 1))
    r = s.call(tool, args, extra="ignore")
    assert r.status in (200, 404, 422, 500)
    if r.status == 500: assert r.body == "Internal Server Error"
    else: json.dumps(r.body)


def test_speed_smoke():
    "A regression guard well below the target (>= 20k simple calls/s on a quiet core)."
    s = make("helpdesk")
    n, t0 = 3000, time.perf_counter()
    for _ in range(n): s.call("helpdesk_get_ticket", {"ticket_id": "TK-1"})
    assert n / (time.perf_counter() - t0) > 3000
