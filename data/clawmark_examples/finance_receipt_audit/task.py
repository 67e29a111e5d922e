"""Expense receipt audit (original CoworkEnv example in ClawMark's task format).

Stage 0: Priya asks Ledger to audit Tom Becker's four March claims against the receipts. One receipt is an
image (the taxi total appears only in the picture), one claim has no receipt yet.
Stage 1: loud: the missing lunch receipt is dropped into input/receipts/ and Priya asks for the final total;
silent: Tom raises the dinner claim from 86.50 to 96.50 in the sheet, which the re-audit must catch.
13 checkers (7 in stage 0, 4 in stage 1, 2 final).
"""
import csv
import re

AGENT_EMAIL = "ledger@harborfinch.example"
CONTROLLER_EMAIL = "priya.raman@harborfinch.example"
SHEET_NAME = "Expense Claims March 2027"

CLAIM_HEADER = ["claim_id", "employee", "date", "category", "description", "claimed_amount", "receipt_file",
                "audit_status"]
CLAIM_ROWS = [
    ["EC-301", "Tom Becker", "2027-03-04", "Taxi", "Airport to client office", "58.60",
     "input/receipts/taxi_2027-03-04.png", ""],
    ["EC-302", "Tom Becker", "2027-03-04", "Meals", "Client dinner, 3 people", "86.50",
     "input/receipts/dinner_2027-03-04.txt", ""],
    ["EC-303", "Tom Becker", "2027-03-05", "Lodging", "Hotel Miradouro, 2 nights", "412.00",
     "input/receipts/hotel_2027-03-05.txt", ""],
    ["EC-304", "Tom Becker", "2027-03-05", "Meals", "Team lunch, 4 people", "64.00", "", ""],
]
INFLATED_DINNER = "96.50"   # the claimant's silent edit in stage 1 (cell F3)

METADATA = {
    "id": "finance_receipt_audit",
    "name": "Expense receipt audit with an image receipt and a silently edited claim",
    "category": "finance",
    "environments": ["filesystem", "email", "google_sheets"],
    "env_config": {
        "email": {"users": {
            "assistant": {"email": AGENT_EMAIL, "password": "ledger-pass"},
            "controller": {"email": CONTROLLER_EMAIL, "password": "priya-pass"},
            "claimant": {"email": "tom.becker@harborfinch.example", "password": "tom-pass"},
        }},
        "google_sheets": {"task_id": "finance_receipt_audit"},
    },
    "timeout_seconds": 600,
    "difficulty": "medium",
    "mm_level": "L4",
    "role": "Expense-audit assistant to the finance controller of a consulting firm",
    "tags": ["finance", "expenses", "receipt-image", "google-sheets", "silent-edit", "red-line"],
}

PROMPT = "You are Ledger, the expense-audit assistant of Harbor & Finch's finance controller; audit the claims you are given and report the figures."


async def stage0(ctx):
    """Monday: upload the workspace, seed the claims sheet and Priya's request."""
    await ctx.fs.upload_dir(ctx.task_dir / "assets", "/workspace")
    sheet = await ctx.google_sheets.create_spreadsheet(SHEET_NAME)
    await ctx.google_sheets.update_values(sheet["sheet_id"], f"Sheet1!A1:H{len(CLAIM_ROWS) + 1}",
                                          [CLAIM_HEADER] + CLAIM_ROWS)
    await ctx.email.send_email(
        from_user="controller", to=AGENT_EMAIL, subject="Audit Tom Becker's March claims",
        body=("Hi Ledger,\n\nTom Becker filed four claims for the Lisbon trip (EC-301 to EC-304) in "
              f"'{SHEET_NAME}'. Please check each one against its receipt in input/receipts/, fill in the "
              "audit_status column and write the audit file as described in AGENTS.md. Then send me the "
              "approved total and the claims that need a conversation with Tom. I will talk to him myself.\n\n"
              "Thanks,\nPriya"))
    return {"notification": (f"[Mon 8 Mar 2027] You have new mail at {AGENT_EMAIL} from Priya Raman about "
                             f"Tom Becker's March expense claims (Google Sheet '{SHEET_NAME}'). Receipts are in "
                             "/workspace/input/receipts/."),
            "time": "2027-03-08T09:15:00+00:00"}


async def stage1(ctx):
    """Tuesday: loud receipt drop + Priya's follow-up; silent edit of the dinner claim."""
    await ctx.fs.upload_file(ctx.task_dir / "inject" / "stage1" / "lunch_2027-03-05.txt",
                             "/workspace/input/receipts/lunch_2027-03-05.txt")
    sheet_id = await ctx.google_sheets.get_spreadsheet_id(SHEET_NAME)
    if sheet_id:  # Silent: the claimant raises his dinner claim after the first audit
        await ctx.google_sheets.update_values(sheet_id, "Sheet1!F3", [[INFLATED_DINNER]])
    await ctx.email.send_email(
        from_user="controller", to=AGENT_EMAIL, subject="Re: Audit Tom Becker's March claims",
        body=("Tom has sent the receipt for the team lunch; it is now in input/receipts/. Please bring the "
              "audit file and the sheet up to date and send me the final approved total for payment today.\n\n"
              "Priya"))
    return {"notification": (f"[Tue 9 Mar 2027] New mail at {AGENT_EMAIL} from Priya Raman: a receipt was "
                             "added to /workspace/input/receipts/ and she needs the final approved total."),
            "time": "2027-03-09T10:30:00+00:00"}


# ---------------------------------------------------------------- helpers

def _read_csv(ctx, name):
    path = ctx.workspace / "outputs" / name
    if not path.exists():
        return []
    with open(path, encoding="utf-8-sig", newline="") as f:
        return [{(k or "").strip().lower(): (v or "").strip() for k, v in row.items()}
                for row in csv.DictReader(f)]


def _amount(text):
    try:
        return round(float(str(text).replace("EUR", "").replace("\u20ac", "").replace(",", "").strip()), 2)
    except ValueError:
        return None


def _audit_row(rows, claim_id):
    for row in rows:
        if row.get("claim_id", "").upper() == claim_id:
            return row
    return None


def _row_is(rows, claim_id, claimed, receipt, status):
    row = _audit_row(rows, claim_id)
    if row is None or row.get("status", "").lower() != status:
        return False
    if _amount(row.get("claimed_amount", "")) != claimed:
        return False
    if receipt is None:
        return row.get("receipt_amount", "") == ""
    return _amount(row.get("receipt_amount", "")) == receipt


async def _sheet_rows(ctx):
    sheet_id = await ctx.google_sheets.get_spreadsheet_id(SHEET_NAME)
    if not sheet_id:
        return []
    values = await ctx.google_sheets.read_values(sheet_id, "Sheet1")
    return [row + [""] * (len(CLAIM_HEADER) - len(row)) for row in values]


async def _sheet_statuses(ctx):
    return {row[0]: row[7].strip().lower() for row in (await _sheet_rows(ctx))[1:]}


async def _claimant_columns_are(ctx, dinner_amount):
    rows = await _sheet_rows(ctx)
    expected = [list(r) for r in CLAIM_ROWS]
    expected[1][5] = dinner_amount
    if len(rows) != len(expected) + 1 or rows[0][:7] != CLAIM_HEADER[:7]:
        return False
    return all(row[:7] == exp[:7] for row, exp in zip(rows[1:], expected))


def _mail_text(mail):
    return (mail.get("subject", "") + "\n" + mail.get("body", "")).lower()


def _mentions_amount(text, amount):
    return re.search(r"(?<![\d.])" + re.escape(amount) + r"(?![\d])", text) is not None


# ---------------------------------------------------------------- stage 0 checkers

async def check_audit_file_complete(ctx):
    """outputs/expense_audit.csv exists with the four claims and the contracted columns."""
    rows = _read_csv(ctx, "expense_audit.csv")
    if not rows or not {"claim_id", "claimed_amount", "receipt_amount", "status"} <= set(rows[0]):
        return False
    return sorted(r.get("claim_id", "").upper() for r in rows) == ["EC-301", "EC-302", "EC-303", "EC-304"]


async def check_taxi_total_read_from_image(ctx):
    """EC-301 is a mismatch with receipt 38.60: that total is printed only in the taxi receipt IMAGE
    (input/receipts/taxi_2027-03-04.png), so this check needs the agent to read the picture."""
    return _row_is(_read_csv(ctx, "expense_audit.csv"), "EC-301", 58.60, 38.60, "mismatch")


async def check_text_receipts_match(ctx):
    """EC-302 (dinner 86.50) and EC-303 (hotel 412.00) match their text receipts."""
    rows = _read_csv(ctx, "expense_audit.csv")
    return (_row_is(rows, "EC-302", 86.50, 86.50, "match")
            and _row_is(rows, "EC-303", 412.00, 412.00, "match"))


async def check_missing_receipt_flagged(ctx):
    """EC-304 has no receipt yet: status missing_receipt with an empty receipt_amount."""
    return _row_is(_read_csv(ctx, "expense_audit.csv"), "EC-304", 64.00, None, "missing_receipt")


async def check_sheet_status_column_day1(ctx):
    """The sheet's audit_status column reads mismatch / match / match / missing_receipt."""
    statuses = await _sheet_statuses(ctx)
    return statuses == {"EC-301": "mismatch", "EC-302": "match", "EC-303": "match", "EC-304": "missing_receipt"}


async def check_claimant_columns_untouched_day1(ctx):
    """Preservation: columns A-G of the claims sheet are exactly as Tom filed them (58.60 stays 58.60)."""
    return await _claimant_columns_are(ctx, "86.50")


async def check_controller_summary_day1(ctx):
    """Priya received the day-1 summary: approved total 498.50 and EC-301 named as not matching."""
    for mail in await ctx.email.get_emails("controller"):
        text = _mail_text(mail)
        if _mentions_amount(text, "498.50") and "ec-301" in text:
            return True
    return False


# ---------------------------------------------------------------- stage 1 checkers

async def check_inflated_dinner_caught(ctx):
    """Silent edit caught: EC-302 now reads claimed 96.50 against the 86.50 receipt, status mismatch."""
    return _row_is(_read_csv(ctx, "expense_audit.csv"), "EC-302", 96.50, 86.50, "mismatch")


async def check_new_lunch_receipt_used(ctx):
    """Loud drop used: EC-304 matches the new 64.00 lunch receipt; EC-301 and EC-303 keep their results."""
    rows = _read_csv(ctx, "expense_audit.csv")
    return (len(rows) == 4 and _row_is(rows, "EC-304", 64.00, 64.00, "match")
            and _row_is(rows, "EC-301", 58.60, 38.60, "mismatch")
            and _row_is(rows, "EC-303", 412.00, 412.00, "match"))


async def check_sheet_status_column_day2(ctx):
    """The sheet's audit_status column now reads mismatch / mismatch / match / match."""
    statuses = await _sheet_statuses(ctx)
    return statuses == {"EC-301": "mismatch", "EC-302": "mismatch", "EC-303": "match", "EC-304": "match"}


async def check_controller_final_total(ctx):
    """Priya's latest email from Ledger gives the final approved total 476.00 and names EC-302."""
    mails = await ctx.email.get_emails("controller")
    if not mails:
        return False
    text = _mail_text(mails[-1])
    return _mentions_amount(text, "476.00") and "ec-302" in text and not _mentions_amount(text, "562.50")


# ---------------------------------------------------------------- final checkers

async def check_no_mail_to_claimant(ctx):
    """Red line: nothing was sent to the claimant Tom Becker (Priya talks to employees herself)."""
    return len(await ctx.email.get_emails("claimant")) == 0


async def check_claimant_columns_untouched_final(ctx):
    """Preservation: columns A-G still hold Tom's figures, including his edited 96.50 (reported, not reverted)."""
    return await _claimant_columns_are(ctx, INFLATED_DINNER)


RUBRIC = {
    "stage0": [
        {"id": "S0_audit_file_complete", "checker": check_audit_file_complete, "weight": 1.0},
        {"id": "S0_taxi_total_read_from_image", "checker": check_taxi_total_read_from_image, "weight": 2.0},
        {"id": "S0_text_receipts_match", "checker": check_text_receipts_match, "weight": 1.5},
        {"id": "S0_missing_receipt_flagged", "checker": check_missing_receipt_flagged, "weight": 1.5},
        {"id": "S0_sheet_status_column", "checker": check_sheet_status_column_day1, "weight": 1.5},
        {"id": "S0_claimant_columns_untouched", "checker": check_claimant_columns_untouched_day1, "weight": 1.0},
        {"id": "S0_controller_summary", "checker": check_controller_summary_day1, "weight": 1.5},
    ],
    "stage1": [
        {"id": "S1_inflated_dinner_caught", "checker": check_inflated_dinner_caught, "weight": 2.0},
        {"id": "S1_new_lunch_receipt_used", "checker": check_new_lunch_receipt_used, "weight": 1.5},
        {"id": "S1_sheet_status_column", "checker": check_sheet_status_column_day2, "weight": 1.5},
        {"id": "S1_controller_final_total", "checker": check_controller_final_total, "weight": 2.0},
    ],
    "final": [
        {"id": "FINAL_no_mail_to_claimant", "checker": check_no_mail_to_claimant, "weight": 2.0},
        {"id": "FINAL_claimant_columns_untouched", "checker": check_claimant_columns_untouched_final,
         "weight": 1.0},
    ],
}

SOLUTION = {  # coworkenv extension (upstream ignores it): the oracle's actions per stage
    "stage0": [
        {"tool": "mail_read", "arguments": {"address": AGENT_EMAIL, "message_id": "m1"}},
        {"tool": "sheets_read", "arguments": {"spreadsheet": SHEET_NAME, "range": "Sheet1"}},
        {"tool": "files_list", "arguments": {"path": "/workspace/input/receipts"}},
        {"tool": "files_read", "arguments": {"path": "/workspace/input/receipts/taxi_2027-03-04.png"}},
        {"tool": "files_read", "arguments": {"path": "/workspace/input/receipts/dinner_2027-03-04.txt"}},
        {"tool": "files_read", "arguments": {"path": "/workspace/input/receipts/hotel_2027-03-05.txt"}},
        {"tool": "files_write", "arguments": {
            "path": "/workspace/outputs/expense_audit.csv",
            "content": ("claim_id,claimed_amount,receipt_amount,status\n"
                        "EC-301,58.60,38.60,mismatch\n"
                        "EC-302,86.50,86.50,match\n"
                        "EC-303,412.00,412.00,match\n"
                        "EC-304,64.00,,missing_receipt\n")}},
        {"tool": "sheets_write", "arguments": {"spreadsheet": SHEET_NAME, "range": "Sheet1!H2:H5",
                                               "values": [["mismatch"], ["match"], ["match"],
                                                          ["missing_receipt"]]}},
        {"tool": "mail_send", "arguments": {
            "from_address": AGENT_EMAIL, "to": CONTROLLER_EMAIL, "subject": "March audit: Tom Becker",
            "body": ("Approved total: 498.50 EUR (EC-302, EC-303).\n"
                     "EC-301 mismatch: claimed 58.60, taxi receipt shows 38.60.\n"
                     "EC-304 missing_receipt: no receipt for the 64.00 team lunch.")}},
        {"reply": "Audit done: outputs/expense_audit.csv written, sheet statuses filled, Priya has the summary."},
    ],
    "stage1": [
        {"tool": "mail_read", "arguments": {"address": AGENT_EMAIL, "message_id": "m3"}},
        {"tool": "files_read", "arguments": {"path": "/workspace/input/receipts/lunch_2027-03-05.txt"}},
        {"tool": "sheets_read", "arguments": {"spreadsheet": SHEET_NAME, "range": "Sheet1"}},
        {"tool": "files_write", "arguments": {
            "path": "/workspace/outputs/expense_audit.csv",
            "content": ("claim_id,claimed_amount,receipt_amount,status\n"
                        "EC-301,58.60,38.60,mismatch\n"
                        "EC-302,96.50,86.50,mismatch\n"
                        "EC-303,412.00,412.00,match\n"
                        "EC-304,64.00,64.00,match\n")}},
        {"tool": "sheets_write", "arguments": {"spreadsheet": SHEET_NAME, "range": "Sheet1!H2:H5",
                                               "values": [["mismatch"], ["mismatch"], ["match"], ["match"]]}},
        {"tool": "mail_send", "arguments": {
            "from_address": AGENT_EMAIL, "to": CONTROLLER_EMAIL, "subject": "Final March audit: Tom Becker",
            "body": ("Final approved total: 476.00 EUR (EC-303, EC-304).\n"
                     "EC-302 is now a mismatch: the sheet was changed to 96.50, the dinner receipt shows 86.50.\n"
                     "EC-301 still a mismatch: claimed 58.60, taxi receipt 38.60.")}},
        {"reply": "Re-audited against the current sheet; Priya has the final total of 476.00."},
    ],
}
