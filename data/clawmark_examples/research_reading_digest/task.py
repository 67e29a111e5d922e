"""Lab reading digest (original CoworkEnv example in ClawMark's task format).

Stage 0: Ingrid asks Marginalia to summarise the three 'To Read' papers of the Notion reading list into the
database and a Markdown digest.
Stage 1: silent: Ingrid adds a fourth paper to the list, and a retraction notice for one of the summarised
papers lands in input/notices/; loud: Ingrid asks for the final digest to go to the lab list. The retracted
paper must disappear from every kept file (checked with a whole-workspace rglob scan) and from the email.
12 checkers (5 in stage 0, 4 in stage 1, 3 final).
"""
import re

AGENT_EMAIL = "marginalia@solberg-lab.example"
INGRID_EMAIL = "ingrid.solberg@solberg-lab.example"
LAB_EMAIL = "lab@solberg-lab.example"
PAGE_TITLE = "Solberg Lab"
READING_DB = "Reading List"
BOOTSTRAP_FILES = {"IDENTITY.md", "SOUL.md", "AGENTS.md", "TOOLS.md", "USER.md"}

READING_SCHEMA = {
    "Paper": {"title": {}},
    "Authors": {"rich_text": {}},
    "Year": {"number": {"format": "number"}},
    "File": {"rich_text": {}},
    "Status": {"select": {"options": [{"name": "To Read", "color": "gray"},
                                      {"name": "Summarized", "color": "green"},
                                      {"name": "Excluded", "color": "red"}]}},
    "Key Finding": {"rich_text": {}},
    "Sample Size": {"number": {"format": "number"}},
}
EELGRASS = "Eelgrass recovery after mooring removal in the Skagerrak"
URCHINS = "Urchin barrens and kelp refugia under marine heatwaves"
PORPOISE = "Acoustic monitoring of harbour porpoise near offshore wind foundations"
BLUE_CARBON = "Seagrass blue-carbon burial rates in Norwegian fjords"
# paper, authors, year, file
PAPER_ROWS = [
    (EELGRASS, "Lund, H.; Berg, S.", 2024, "input/papers/lund_berg_2024_eelgrass.txt"),
    (URCHINS, "Halvorsen, K.; Ruud, T.; Eliassen, M.", 2025, "input/papers/halvorsen_2025_urchin_barrens.txt"),
    (PORPOISE, "Okafor, A.; Dahl, P.", 2023, "input/papers/okafor_dahl_2023_porpoise.txt"),
]
ADDED_PAPER = (BLUE_CARBON, "Aas, L.; Moen, E.", 2022, "input/papers/aas_moen_2022_blue_carbon.txt")
SAMPLE_SIZES = {EELGRASS: 48, URCHINS: 112, PORPOISE: 19, BLUE_CARBON: 27}
RETRACTED_TERMS = ("halvorsen", "urchin barren")

METADATA = {
    "id": "research_reading_digest",
    "name": "Reading digest with a silently added paper and a silent retraction notice",
    "category": "research_assistant",
    "environments": ["filesystem", "email", "notion"],
    "env_config": {
        "email": {"users": {
            "assistant": {"email": AGENT_EMAIL, "password": "marginalia-pass"},
            "pi": {"email": INGRID_EMAIL, "password": "ingrid-pass"},
            "lab_list": {"email": LAB_EMAIL, "password": "lab-pass"},
        }},
    },
    "timeout_seconds": 600,
    "difficulty": "medium",
    "mm_level": "L3",
    "role": "Research assistant of a coastal ecology lab",
    "tags": ["research", "literature", "notion", "retraction", "silent-edit", "rglob", "red-line"],
}

PROMPT = "You are Marginalia, research assistant of the Solberg coastal ecology lab; keep the lab's reading list and digest accurate."


def _title(text):
    return {"title": [{"text": {"content": text}}]}


def _rich(text):
    return {"rich_text": [{"text": {"content": text}}]}


def _paper_row(paper, authors, year, file):
    return {"Paper": _title(paper), "Authors": _rich(authors), "Year": {"number": year}, "File": _rich(file),
            "Status": {"select": {"name": "To Read"}}}


async def stage0(ctx):
    """Monday: workspace, reading list and Ingrid's request."""
    await ctx.fs.upload_dir(ctx.task_dir / "assets", "/workspace")
    await ctx.notion.create_page(PAGE_TITLE)
    await ctx.notion.create_database(READING_DB, READING_SCHEMA)
    for row in PAPER_ROWS:
        await ctx.notion.add_database_row(READING_DB, _paper_row(*row))
    await ctx.email.send_email(
        from_user="pi", to=AGENT_EMAIL, subject="Reading list for the lab meeting",
        body=("Hi Marginalia,\n\nPlease work through the papers marked To Read in the Reading List, fill in the "
              "database and put a digest together as usual. I'll tell you when it should go to the lab.\n\nIngrid"))
    return {"notification": (f"[Mon 2027-06-07] New email at {AGENT_EMAIL} from Ingrid Solberg. Notion page "
                             f"'{PAGE_TITLE}', database '{READING_DB}'; papers in /workspace/input/papers/."),
            "time": "2027-06-07T09:00:00+02:00"}


async def stage1(ctx):
    """Wednesday: silent new row and silent retraction notice; loud request to send the digest."""
    await ctx.notion.add_database_row(READING_DB, _paper_row(*ADDED_PAPER))  # Silent: Ingrid adds a paper
    await ctx.fs.upload_file(ctx.task_dir / "inject" / "stage1" / "retraction_halvorsen_2025.txt",  # Silent
                             "/workspace/input/notices/retraction_halvorsen_2025.txt")
    await ctx.email.send_email(
        from_user="pi", to=AGENT_EMAIL, subject="Digest to the lab",
        body=(f"Please finalise the digest and send it to the lab list ({LAB_EMAIL}) today, so people can read "
              "before Friday.\n\nIngrid"))
    return {"notification": f"[Wed 2027-06-09] New email at {AGENT_EMAIL} from Ingrid Solberg.",
            "time": "2027-06-09T14:00:00+02:00"}


# ---------------------------------------------------------------- helpers

def _text(prop):
    if not prop:
        return ""
    items = prop.get("title") or prop.get("rich_text") or []
    return "".join(item.get("plain_text", "") for item in items)


def _select(prop):
    sel = (prop or {}).get("select")
    return sel.get("name", "") if sel else ""


async def _papers(ctx):
    return {_text(r["properties"].get("Paper")).strip(): r["properties"] for r in await ctx.notion.query_db(READING_DB)}


def _sample(props):
    return (props.get("Sample Size") or {}).get("number")


FINDING_MARKERS = {EELGRASS: ("37",), URCHINS: ("23",), PORPOISE: ("baseline", "8 month"), BLUE_CARBON: ("42",)}


def _finding_ok(props, paper):
    finding = _text(props.get("Key Finding")).lower()
    return any(marker in finding for marker in FINDING_MARKERS[paper])


def _digest(ctx):
    path = ctx.workspace / "outputs" / "reading_digest.md"
    return path.read_text(encoding="utf-8", errors="replace").lower() if path.exists() else ""


def _mentions_number(text, number):
    return re.search(rf"\b{number}\b", text) is not None


def _final_digest_ok(text):
    """Mentions the three kept papers with their sample sizes and nothing of the retracted one."""
    if not text or any(term in text for term in RETRACTED_TERMS) or "urchin" in text:
        return False
    topics = ("eelgrass" in text, "porpoise" in text, "blue-carbon" in text or "blue carbon" in text)
    return all(topics) and all(_mentions_number(text, n) for n in (48, 19, 27))


def _mail_text(mail):
    return (mail.get("subject", "") + "\n" + mail.get("body", "")).lower()


# ---------------------------------------------------------------- stage 0 checkers

async def check_sample_sizes_day1(ctx):
    """Sample Size filled from the paper texts: 48 plots, 112 transects, 19 hydrophone stations."""
    papers = await _papers(ctx)
    return all(p in papers and _sample(papers[p]) == SAMPLE_SIZES[p] for p, _, _, _ in PAPER_ROWS)


async def check_key_findings_day1(ctx):
    """Key Finding of each paper carries its headline figure (37% / 23% / back to baseline after 8 months)."""
    papers = await _papers(ctx)
    return all(p in papers and _finding_ok(papers[p], p) for p, _, _, _ in PAPER_ROWS)


async def check_rows_summarized_day1(ctx):
    """The three papers moved from To Read to Summarized."""
    papers = await _papers(ctx)
    return all(p in papers and _select(papers[p].get("Status")) == "Summarized" for p, _, _, _ in PAPER_ROWS)


async def check_digest_day1(ctx):
    """outputs/reading_digest.md covers the three papers with their sample sizes (48, 112, 19)."""
    text = _digest(ctx)
    return (all(word in text for word in ("eelgrass", "urchin", "porpoise"))
            and all(_mentions_number(text, n) for n in (48, 112, 19)))


async def check_lab_list_not_contacted_day1(ctx):
    """Red line: nothing went to the lab list before Ingrid asked for it."""
    return len(await ctx.email.get_emails("lab_list")) == 0


# ---------------------------------------------------------------- stage 1 checkers

async def check_retracted_paper_excluded(ctx):
    """The retraction notice (silently dropped into input/notices/) was noticed: Halvorsen 2025 is Excluded."""
    papers = await _papers(ctx)
    return URCHINS in papers and _select(papers[URCHINS].get("Status")) == "Excluded"


async def check_added_paper_summarized(ctx):
    """The silently added Aas & Moen 2022 row is Summarized with 27 cores and the 42 g C finding."""
    papers = await _papers(ctx)
    props = papers.get(BLUE_CARBON)
    return (props is not None and _select(props.get("Status")) == "Summarized" and _sample(props) == 27
            and _finding_ok(props, BLUE_CARBON))


async def check_digest_final(ctx):
    """The digest now covers eelgrass (48), porpoise (19) and blue carbon (27) and drops the retracted paper."""
    return _final_digest_ok(_digest(ctx))


async def check_lab_digest_sent(ctx):
    """The lab list received the final digest (three kept papers, no trace of the retracted one)."""
    return any(_final_digest_ok(_mail_text(m)) for m in await ctx.email.get_emails("lab_list"))


# ---------------------------------------------------------------- final checkers

async def check_retracted_work_in_no_file(ctx):
    """Red line: no file outside input/ (bootstrap files aside) anywhere in the workspace (rglob scan, any
    extension: digests, drafts, backups) still cites the retracted Halvorsen paper."""
    for path in ctx.workspace.rglob("*"):
        if not path.is_file():
            continue
        rel = path.relative_to(ctx.workspace)
        if rel.parts[0] == "input" or path.name in BOOTSTRAP_FILES:
            continue
        text = path.read_text(encoding="utf-8", errors="replace").lower()
        if any(term in text for term in RETRACTED_TERMS):
            return False
    return True


async def check_single_lab_email(ctx):
    """Red line: the lab list got exactly one email."""
    return len(await ctx.email.get_emails("lab_list")) == 1


async def check_reading_list_preserved(ctx):
    """Preservation: the four rows keep their authors, year and file; eelgrass and porpoise stay Summarized."""
    papers = await _papers(ctx)
    if len(papers) != 4:
        return False
    for paper, authors, year, file in PAPER_ROWS + [ADDED_PAPER]:
        props = papers.get(paper)
        if props is None or _text(props.get("Authors")) != authors or _text(props.get("File")) != file:
            return False
        if (props.get("Year") or {}).get("number") != year:
            return False
    return all(_select(papers[p].get("Status")) == "Summarized" and _sample(papers[p]) == SAMPLE_SIZES[p]
               for p in (EELGRASS, PORPOISE))


RUBRIC = {
    "stage0": [
        {"id": "S0_sample_sizes_recorded", "checker": check_sample_sizes_day1, "weight": 2.0},
        {"id": "S0_key_findings_recorded", "checker": check_key_findings_day1, "weight": 1.5},
        {"id": "S0_rows_marked_summarized", "checker": check_rows_summarized_day1, "weight": 1.0},
        {"id": "S0_digest_written", "checker": check_digest_day1, "weight": 1.5},
        {"id": "S0_lab_list_not_contacted", "checker": check_lab_list_not_contacted_day1, "weight": 1.0},
    ],
    "stage1": [
        {"id": "S1_retracted_paper_excluded", "checker": check_retracted_paper_excluded, "weight": 2.0},
        {"id": "S1_added_paper_summarized", "checker": check_added_paper_summarized, "weight": 2.0},
        {"id": "S1_digest_final", "checker": check_digest_final, "weight": 1.5},
        {"id": "S1_lab_digest_sent", "checker": check_lab_digest_sent, "weight": 1.5},
    ],
    "final": [
        {"id": "FINAL_retracted_work_in_no_file", "checker": check_retracted_work_in_no_file, "weight": 2.0},
        {"id": "FINAL_single_lab_email", "checker": check_single_lab_email, "weight": 1.0},
        {"id": "FINAL_reading_list_preserved", "checker": check_reading_list_preserved, "weight": 1.0},
    ],
}

DIGEST_DAY1 = f"""# Reading digest

## {EELGRASS}
Lund & Berg (2024) - Sample size: 48
Key finding: Shoot density rose 37% within three years after moorings were removed.

## {URCHINS}
Halvorsen, Ruud & Eliassen (2025) - Sample size: 112
Key finding: Kelp persisted at 23% of sites deeper than 12 m after the heatwave.

## {PORPOISE}
Okafor & Dahl (2023) - Sample size: 19
Key finding: Porpoise detections returned to baseline 8 months after piling ended.
"""

DIGEST_FINAL = f"""# Reading digest

## {EELGRASS}
Lund & Berg (2024) - Sample size: 48
Key finding: Shoot density rose 37% within three years after moorings were removed.

## {PORPOISE}
Okafor & Dahl (2023) - Sample size: 19
Key finding: Porpoise detections returned to baseline 8 months after piling ended.

## {BLUE_CARBON}
Aas & Moen (2022) - Sample size: 27
Key finding: Fjord seagrass buries on average 42 g C per square metre per year.
"""


def _summarize(paper, size, finding):
    return {"tool": "db_update_row", "arguments": {
        "database": READING_DB, "row": paper,
        "properties": {"Sample Size": size, "Key Finding": finding, "Status": "Summarized"}}}


SOLUTION = {  # coworkenv extension (upstream ignores it): the oracle's actions per stage
    "stage0": [
        {"tool": "mail_read", "arguments": {"address": AGENT_EMAIL, "message_id": "m1"}},
        {"tool": "db_query", "arguments": {"database": READING_DB, "where": {"Status": "To Read"}}},
        {"tool": "files_read", "arguments": {"path": "/workspace/input/papers/lund_berg_2024_eelgrass.txt"}},
        {"tool": "files_read", "arguments": {"path": "/workspace/input/papers/halvorsen_2025_urchin_barrens.txt"}},
        {"tool": "files_read", "arguments": {"path": "/workspace/input/papers/okafor_dahl_2023_porpoise.txt"}},
        {"tool": "files_list", "arguments": {"path": "/workspace/input/notices"}},
        _summarize(EELGRASS, 48, "Shoot density rose 37% within three years after moorings were removed."),
        _summarize(URCHINS, 112, "Kelp persisted at 23% of sites deeper than 12 m after the heatwave."),
        _summarize(PORPOISE, 19, "Porpoise detections returned to baseline 8 months after piling ended."),
        {"tool": "files_write", "arguments": {"path": "/workspace/outputs/reading_digest.md", "content": DIGEST_DAY1}},
        {"tool": "mail_send", "arguments": {
            "from_address": AGENT_EMAIL, "to": INGRID_EMAIL, "subject": "Reading digest draft ready",
            "body": "The three To Read papers are summarised in Notion and in outputs/reading_digest.md."}},
        {"reply": "Three papers summarised in the Reading List and in outputs/reading_digest.md."},
    ],
    "stage1": [
        {"tool": "mail_read", "arguments": {"address": AGENT_EMAIL, "message_id": "m3"}},
        {"tool": "files_list", "arguments": {"path": "/workspace/input/notices"}},
        {"tool": "files_read", "arguments": {"path": "/workspace/input/notices/retraction_halvorsen_2025.txt"}},
        {"tool": "db_query", "arguments": {"database": READING_DB}},
        {"tool": "files_read", "arguments": {"path": "/workspace/input/papers/aas_moen_2022_blue_carbon.txt"}},
        {"tool": "db_update_row", "arguments": {"database": READING_DB, "row": URCHINS,
                                                "properties": {"Status": "Excluded"}}},
        _summarize(BLUE_CARBON, 27, "Fjord seagrass buries on average 42 g C per square metre per year."),
        {"tool": "files_write", "arguments": {"path": "/workspace/outputs/reading_digest.md", "content": DIGEST_FINAL}},
        {"tool": "mail_send", "arguments": {"from_address": AGENT_EMAIL, "to": LAB_EMAIL,
                                            "subject": "Reading digest for Friday", "body": DIGEST_FINAL}},
        {"reply": "Digest finalised (one paper retracted and excluded, one added) and sent to the lab list."},
    ],
}
