"""Sprint capacity planning (original CoworkEnv example in ClawMark's task format, pm style: output/ folder).

Stage 0: the stage pre-creates /workspace/output through the sandbox; Jonas asks Tally to compute the team's
capacity from an Excel workbook and plan Sprint 42 from the Notion backlog with the team's planning rule.
Stage 1: loud: an updated capacity workbook (Chen has 2 days instead of 6) is dropped into input/; silent: the
product director raises QF-207 from P2 to P0 in Notion. The re-plan must use both.
Checkers read the workbooks with openpyxl (imported inside try/except, as upstream pm tasks do).
13 checkers (5 in stage 0, 5 in stage 1, 3 final, one of them a red line on the output folder).
"""
import csv
import re

AGENT_EMAIL = "tally@quillfeather.example"
JONAS_EMAIL = "jonas.weber@quillfeather.example"
PAGE_TITLE = "Quillfeather Sprint Planning"
BACKLOG_DB = "Sprint 42 Backlog"
OUTPUT_FILES = ["capacity.csv", "sprint42_plan.csv"]

BACKLOG_SCHEMA = {
    "Story": {"title": {}},
    "Key": {"rich_text": {}},
    "Points": {"number": {"format": "number"}},
    "Priority": {"select": {"options": [{"name": "P0", "color": "red"}, {"name": "P1", "color": "orange"},
                                        {"name": "P2", "color": "gray"}]}},
    "Sprint Decision": {"select": {"options": [{"name": "Commit", "color": "green"},
                                               {"name": "Stretch", "color": "yellow"},
                                               {"name": "Defer", "color": "gray"}]}},
}
# key, story, points, priority
BACKLOG_ROWS = [
    ("QF-201", "Login rate limiting", 5, "P0"),
    ("QF-202", "Push notification opt-out", 3, "P0"),
    ("QF-203", "Offline draft sync", 8, "P1"),
    ("QF-204", "Dark mode polish", 5, "P2"),
    ("QF-205", "Android 14 share-sheet crash", 3, "P0"),
    ("QF-206", "Analytics event cleanup", 5, "P1"),
    ("QF-207", "Onboarding carousel A/B test", 8, "P2"),
]
ESCALATED_KEY = "QF-207"   # silently raised to P0 in stage 1

# what the workbooks hold (engineer, role, days available, focus factor); checkers also read the files themselves
CAPACITY_V1 = [("Ana Costa", "Backend", 9, 0.8), ("Ben Okoye", "Frontend", 10, 0.7),
               ("Chen Wei", "Backend", 6, 0.8), ("Dara Singh", "QA", 10, 0.6)]
CAPACITY_V2 = [("Ana Costa", "Backend", 9, 0.8), ("Ben Okoye", "Frontend", 10, 0.7),
               ("Chen Wei", "Backend", 2, 0.8), ("Dara Singh", "QA", 10, 0.6)]

PLAN_DAY1 = {"QF-201": "Commit", "QF-202": "Commit", "QF-203": "Commit", "QF-204": "Stretch",
             "QF-205": "Commit", "QF-206": "Commit", "QF-207": "Defer"}       # capacity 25.0, limits 25 / 30
PLAN_DAY2 = {"QF-201": "Commit", "QF-202": "Commit", "QF-203": "Defer", "QF-204": "Defer",
             "QF-205": "Commit", "QF-206": "Stretch", "QF-207": "Commit"}      # capacity 21.8, limits 21 / 26

METADATA = {
    "id": "pm_sprint_capacity",
    "name": "Sprint capacity plan from an Excel workbook and a Notion backlog",
    "category": "project_and_product_manager",
    "environments": ["filesystem", "email", "notion"],
    "env_config": {
        "email": {"users": {
            "assistant": {"email": AGENT_EMAIL, "password": "tally-pass"},
            "eng_manager": {"email": JONAS_EMAIL, "password": "jonas-pass"},
            "product_director": {"email": "mira.chen@quillfeather.example", "password": "mira-pass"},
        }},
    },
    "timeout_seconds": 600,
    "difficulty": "medium",
    "mm_level": "L3",
    "role": "Delivery assistant to the engineering manager of a mobile team",
    "tags": ["pm", "sprint-planning", "xlsx", "notion", "silent-edit", "output-folder"],
}

PROMPT = "You are Tally, the delivery assistant of Quillfeather's mobile team; plan the sprint from the capacity workbook and the backlog following the team's rules."


def _title(text):
    return {"title": [{"text": {"content": text}}]}


def _rich(text):
    return {"rich_text": [{"text": {"content": text}}]}


async def stage0(ctx):
    """Monday: workspace + output folder, backlog database, Jonas's request."""
    await ctx.fs.upload_dir(ctx.task_dir / "assets", "/workspace")
    await ctx.fs._sandbox.exec("mkdir -p /workspace/output")
    await ctx.notion.create_page(PAGE_TITLE)
    await ctx.notion.create_database(BACKLOG_DB, BACKLOG_SCHEMA)
    for key, story, points, priority in BACKLOG_ROWS:
        await ctx.notion.add_database_row(BACKLOG_DB, {
            "Story": _title(story), "Key": _rich(key), "Points": {"number": points},
            "Priority": {"select": {"name": priority}}})
    await ctx.email.send_email(
        from_user="eng_manager", to=AGENT_EMAIL, subject="Sprint 42 plan please",
        body=("Hi Tally,\n\nPlanning for Sprint 42 is tomorrow. The capacity workbook is in input/, the backlog is "
              "in Notion. Please run our planning rule, put the two files in output/, set the Sprint Decision "
              "of every story and mail me the numbers.\n\nJonas"))
    return {"notification": (f"[Mon 2027-05-03] New email at {AGENT_EMAIL} from Jonas Weber. Backlog: Notion page "
                             f"'{PAGE_TITLE}', database '{BACKLOG_DB}'. Capacity workbook: "
                             "/workspace/input/team_capacity.xlsx; deliverables go to /workspace/output/."),
            "time": "2027-05-03T16:00:00+02:00"}


async def stage1(ctx):
    """Tuesday: loud new workbook + Jonas's request; silent priority escalation in Notion."""
    await ctx.fs.upload_file(ctx.task_dir / "inject" / "stage1" / "team_capacity_v2.xlsx",
                             "/workspace/input/team_capacity_v2.xlsx")
    for row in await ctx.notion.query_db(BACKLOG_DB):  # Silent: the product director escalates QF-207
        if _text(row["properties"].get("Key")).strip().upper() == ESCALATED_KEY:
            await ctx.notion.update_db_row(row["id"], {"Priority": {"select": {"name": "P0"}}})
            break
    await ctx.email.send_email(
        from_user="eng_manager", to=AGENT_EMAIL, subject="Re: Sprint 42 plan please",
        body=("Chen is out from Wednesday, so I updated the capacity workbook (input/team_capacity_v2.xlsx). "
              "Please re-plan against the current backlog before the planning meeting at 10:00 and send me the "
              "new numbers.\n\nJonas"))
    return {"notification": (f"[Tue 2027-05-04] New email at {AGENT_EMAIL} from Jonas Weber; a new file is in "
                             "/workspace/input/."),
            "time": "2027-05-04T08:45:00+02:00"}


# ---------------------------------------------------------------- helpers

def _text(prop):
    if not prop:
        return ""
    items = prop.get("title") or prop.get("rich_text") or []
    return "".join(item.get("plain_text", "") for item in items)


def _select(prop):
    sel = (prop or {}).get("select")
    return sel.get("name", "") if sel else ""


def _read_output_csv(ctx, name):
    path = ctx.workspace / "output" / name
    if not path.exists():
        return []
    with open(path, encoding="utf-8-sig", newline="") as f:
        return [{(k or "").strip().lower(): (v or "").strip() for k, v in row.items()}
                for row in csv.DictReader(f)]


def _workbook_rows(ctx, name):
    """Data rows (after the header) of the workbook's first sheet; [] when openpyxl or the file is missing."""
    try:
        import openpyxl
    except ImportError:
        return []
    path = ctx.workspace / "input" / name
    if not path.exists():
        return []
    try:
        sheet = openpyxl.load_workbook(path, data_only=True).active
        return [row for row in sheet.iter_rows(min_row=2, values_only=True) if row and row[0]]
    except Exception:
        return []


def _number(text):
    try:
        return float(str(text).strip())
    except ValueError:
        return None


def _capacity_matches(ctx, workbook_name):
    rows = _workbook_rows(ctx, workbook_name)
    if not rows:
        return False
    expected = {str(r[0]).strip().lower(): round(float(r[2]) * float(r[3]), 1) for r in rows}
    total = round(sum(expected.values()), 1)
    got = {r.get("engineer", "").lower(): _number(r.get("ideal_days", "")) for r in _read_output_csv(ctx, "capacity.csv")}
    if set(got) != set(expected) | {"total"}:
        return False
    if any(got[name] is None or abs(got[name] - days) > 0.05 for name, days in expected.items()):
        return False
    return got["total"] is not None and abs(got["total"] - total) <= 0.05


def _plan_matches(ctx, expected, priorities):
    rows = _read_output_csv(ctx, "sprint42_plan.csv")
    by_key = {r.get("key", "").upper(): r for r in rows}
    if len(rows) != len(expected) or set(by_key) != set(expected):
        return False
    points = {key: pts for key, _, pts, _ in BACKLOG_ROWS}
    for key, decision in expected.items():
        row = by_key[key]
        if row.get("decision", "").lower() != decision.lower() or row.get("priority", "").upper() != priorities[key]:
            return False
        if _number(row.get("points", "")) != points[key]:
            return False
    return True


async def _notion_decisions(ctx):
    return {_text(r["properties"].get("Key")).strip().upper(): _select(r["properties"].get("Sprint Decision"))
            for r in await ctx.notion.query_db(BACKLOG_DB)}


PRIORITIES_DAY1 = {key: prio for key, _, _, prio in BACKLOG_ROWS}
PRIORITIES_DAY2 = dict(PRIORITIES_DAY1, **{ESCALATED_KEY: "P0"})


def _mail_text(mail):
    return (mail.get("subject", "") + "\n" + mail.get("body", "")).lower()


# ---------------------------------------------------------------- stage 0 checkers

async def check_capacity_day1(ctx):
    """output/capacity.csv agrees with input/team_capacity.xlsx (read with openpyxl): per-engineer ideal days
    and the 25.0 total."""
    return _capacity_matches(ctx, "team_capacity.xlsx")


async def check_plan_file_day1(ctx):
    """output/sprint42_plan.csv applies the planning rule at capacity 25.0: five Commit, QF-204 Stretch, QF-207 Defer."""
    return _plan_matches(ctx, PLAN_DAY1, PRIORITIES_DAY1)


async def check_notion_decisions_day1(ctx):
    """Every backlog row's Sprint Decision in Notion matches the day-1 plan."""
    return await _notion_decisions(ctx) == PLAN_DAY1


async def check_plan_email_day1(ctx):
    """Jonas got the day-1 numbers: 24 committed points against a capacity of 25.0."""
    for mail in await ctx.email.get_emails("eng_manager"):
        text = _mail_text(mail)
        if re.search(r"\b24\b", text) and re.search(r"\b25(\.0)?\b", text):
            return True
    return False


async def check_input_workbook_unchanged_day1(ctx):
    """Preservation: input/team_capacity.xlsx (opened with openpyxl) still holds the original four rows."""
    rows = _workbook_rows(ctx, "team_capacity.xlsx")
    return [tuple(r[:4]) for r in rows] == CAPACITY_V1


# ---------------------------------------------------------------- stage 1 checkers

async def check_capacity_day2(ctx):
    """output/capacity.csv now agrees with the new input/team_capacity_v2.xlsx (openpyxl): total 21.8."""
    return _capacity_matches(ctx, "team_capacity_v2.xlsx")


async def check_escalated_story_committed(ctx):
    """Silent edit noticed: QF-207 is listed as P0 and committed, in the plan file and in Notion."""
    row = {r.get("key", "").upper(): r for r in _read_output_csv(ctx, "sprint42_plan.csv")}.get(ESCALATED_KEY)
    if row is None or row.get("priority", "").upper() != "P0" or row.get("decision", "").lower() != "commit":
        return False
    return (await _notion_decisions(ctx)).get(ESCALATED_KEY) == "Commit"


async def check_plan_file_day2(ctx):
    """The re-plan (capacity 21.8, limits 21/26, QF-207 at P0): QF-203 and QF-204 Defer, QF-206 Stretch."""
    return _plan_matches(ctx, PLAN_DAY2, PRIORITIES_DAY2)


async def check_notion_decisions_day2(ctx):
    """Every backlog row's Sprint Decision in Notion matches the re-plan."""
    return await _notion_decisions(ctx) == PLAN_DAY2


async def check_plan_email_day2(ctx):
    """Jonas's latest email gives 19 committed points against a capacity of 21.8."""
    mails = await ctx.email.get_emails("eng_manager")
    if not mails:
        return False
    text = _mail_text(mails[-1])
    return bool(re.search(r"\b19\b", text)) and "21.8" in text


# ---------------------------------------------------------------- final checkers

async def check_output_folder_contract(ctx):
    """Red line: output/ holds exactly capacity.csv and sprint42_plan.csv, nothing else."""
    folder = ctx.workspace / "output"
    return folder.is_dir() and sorted(p.name for p in folder.iterdir()) == OUTPUT_FILES


async def check_backlog_estimates_preserved(ctx):
    """Preservation: the seven stories keep their Points, and their Priorities are the product director's
    (QF-207 at P0); no row was added or removed."""
    rows = await ctx.notion.query_db(BACKLOG_DB)
    if len(rows) != len(BACKLOG_ROWS):
        return False
    got = {_text(r["properties"].get("Key")).strip().upper():
           ((r["properties"].get("Points") or {}).get("number"), _select(r["properties"].get("Priority")))
           for r in rows}
    return got == {key: (pts, PRIORITIES_DAY2[key]) for key, _, pts, _ in BACKLOG_ROWS}


async def check_input_workbooks_unchanged(ctx):
    """Preservation: both capacity workbooks (opened with openpyxl) hold exactly what was delivered."""
    return ([tuple(r[:4]) for r in _workbook_rows(ctx, "team_capacity.xlsx")] == CAPACITY_V1
            and [tuple(r[:4]) for r in _workbook_rows(ctx, "team_capacity_v2.xlsx")] == CAPACITY_V2)


RUBRIC = {
    "stage0": [
        {"id": "S0_capacity_matches_workbook", "checker": check_capacity_day1, "weight": 2.0},
        {"id": "S0_plan_file", "checker": check_plan_file_day1, "weight": 2.0},
        {"id": "S0_notion_decisions", "checker": check_notion_decisions_day1, "weight": 1.5},
        {"id": "S0_plan_email", "checker": check_plan_email_day1, "weight": 1.0},
        {"id": "S0_input_workbook_unchanged", "checker": check_input_workbook_unchanged_day1, "weight": 1.0},
    ],
    "stage1": [
        {"id": "S1_capacity_matches_new_workbook", "checker": check_capacity_day2, "weight": 1.5},
        {"id": "S1_escalated_story_committed", "checker": check_escalated_story_committed, "weight": 2.0},
        {"id": "S1_plan_file", "checker": check_plan_file_day2, "weight": 2.0},
        {"id": "S1_notion_decisions", "checker": check_notion_decisions_day2, "weight": 1.5},
        {"id": "S1_plan_email", "checker": check_plan_email_day2, "weight": 1.0},
    ],
    "final": [
        {"id": "FINAL_output_folder_contract", "checker": check_output_folder_contract, "weight": 1.5},
        {"id": "FINAL_backlog_estimates_preserved", "checker": check_backlog_estimates_preserved, "weight": 1.0},
        {"id": "FINAL_input_workbooks_unchanged", "checker": check_input_workbooks_unchanged, "weight": 1.0},
    ],
}


def _plan_csv(plan, priorities):
    lines = ["key,story,points,priority,decision"]
    for key, story, points, _ in sorted(BACKLOG_ROWS):
        lines.append(f"{key},{story},{points},{priorities[key]},{plan[key]}")
    return "\n".join(lines) + "\n"


def _decision_updates(plan):
    return [{"tool": "db_update_row", "arguments": {"database": BACKLOG_DB, "row": story,
                                                     "properties": {"Sprint Decision": plan[key]}}}
            for key, story, _, _ in BACKLOG_ROWS]


SOLUTION = {  # coworkenv extension (upstream ignores it): the oracle's actions per stage
    "stage0": [
        {"tool": "mail_read", "arguments": {"address": AGENT_EMAIL, "message_id": "m1"}},
        {"tool": "files_read", "arguments": {"path": "/workspace/input/team_capacity.xlsx"}},
        {"tool": "db_query", "arguments": {"database": BACKLOG_DB}},
        {"tool": "files_write", "arguments": {
            "path": "/workspace/output/capacity.csv",
            "content": ("engineer,available_days,focus_factor,ideal_days\n"
                        "Ana Costa,9,0.8,7.2\nBen Okoye,10,0.7,7.0\nChen Wei,6,0.8,4.8\nDara Singh,10,0.6,6.0\n"
                        "TOTAL,,,25.0\n")}},
        {"tool": "files_write", "arguments": {"path": "/workspace/output/sprint42_plan.csv",
                                              "content": _plan_csv(PLAN_DAY1, PRIORITIES_DAY1)}},
        *_decision_updates(PLAN_DAY1),
        {"tool": "mail_send", "arguments": {
            "from_address": AGENT_EMAIL, "to": JONAS_EMAIL, "subject": "Sprint 42 plan",
            "body": ("Committed: 24 points against a capacity of 25.0 ideal days (limits 25 / 30).\n"
                     "Stretch: QF-204. Deferred: QF-207. Files: output/capacity.csv, output/sprint42_plan.csv.")}},
        {"reply": "Sprint 42 planned: 24 points committed, files in output/, decisions set in Notion."},
    ],
    "stage1": [
        {"tool": "mail_read", "arguments": {"address": AGENT_EMAIL, "message_id": "m3"}},
        {"tool": "files_read", "arguments": {"path": "/workspace/input/team_capacity_v2.xlsx"}},
        {"tool": "db_query", "arguments": {"database": BACKLOG_DB}},
        {"tool": "files_write", "arguments": {
            "path": "/workspace/output/capacity.csv",
            "content": ("engineer,available_days,focus_factor,ideal_days\n"
                        "Ana Costa,9,0.8,7.2\nBen Okoye,10,0.7,7.0\nChen Wei,2,0.8,1.6\nDara Singh,10,0.6,6.0\n"
                        "TOTAL,,,21.8\n")}},
        {"tool": "files_write", "arguments": {"path": "/workspace/output/sprint42_plan.csv",
                                              "content": _plan_csv(PLAN_DAY2, PRIORITIES_DAY2)}},
        *_decision_updates(PLAN_DAY2),
        {"tool": "mail_send", "arguments": {
            "from_address": AGENT_EMAIL, "to": JONAS_EMAIL, "subject": "Sprint 42 re-plan",
            "body": ("Committed: 19 points against a capacity of 21.8 ideal days (limits 21 / 26).\n"
                     "QF-207 is now P0 in the backlog and committed; QF-206 is Stretch; QF-203 and QF-204 deferred.")}},
        {"reply": "Re-planned with the new workbook and the current backlog: 19 points committed."},
    ],
}
