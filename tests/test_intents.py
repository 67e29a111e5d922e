"""The user answers natural questions, one fact at a time, and nothing else (issue 8 §6).

A paraphrase set written for these tests (not the catalogue's own examples): >= 5 natural questions per fact kind the
families and examples use. Each must be answered by the `ScriptedUser` of a spec holding that fact (>= 90% overall, and
the rate is printed), while statements, keyword lists and messages that fish for several facts reveal nothing."""
import itertools
from pathlib import Path
import pytest

from coworkenv.core import Check, Message, TaskSpec, UserFact, UserSpec, load_specs
from coworkenv.intents import FACT_KINDS, INTENTS, KIND_PATTERNS, ONE_AT_A_TIME, GENERIC_WORDS, asks_for, requests, requested_facts
from coworkenv.env import CoworkEnv, ScriptedUser
import coworkenv.checks as checks

ROOT = Path(__file__).resolve().parents[1]

PARAPHRASES = {
    'budget_limit': ["How much can I spend?", "What's my budget for the restock?", "Is there a spending cap I need to respect?",
                     "What's the most we can spend on these orders?", "How much money have we got for this?",
                     "Could you tell me the budget limit?"],
    'preferred_supplier': ["Which supplier should I go with?", "Who do we buy these from?", "Is there a vendor you prefer?",
                           "Where should I order them from?", "Which company do we usually order from?"],
    'cost_category': ["Which cost category should the report cover?", "What kind of costs do you want in it?",
                      "Which expenses should I include?", "What category of spending is this about?", "Which costs are we reporting on?"],
    'start_date': ["When does she start?", "What's his first day?", "When will the new hire join us?",
                   "What is the start date?", "Which date is she starting on?", "When is he joining?"],
    'manager': ["Who will they report to?", "Who is going to be her manager?", "Who's his line manager?",
                "Who will be supervising her?", "What reporting line should I set up?"],
    'last_working_day': ["When is her last day?", "When does he leave?", "What's the leaving date?",
                         "When will they finish with us?", "What is their final working day?"],
    'system_access': ["Which system should I grant?", "What access level was agreed?", "What permissions should they get?",
                      "Which level of access did you agree on?", "What did you agree with them?"],
    'day': ["Which day works best for you?", "What day should I book it on?", "When should we meet?",
            "When would be best for the meeting?", "What date suits you?"],
    'duration': ["How long should it be?", "What duration did you have in mind?", "How many minutes should I block?",
                 "How long do you need the room for?", "What's the length of the meeting?"],
    'new_day': ["Which day should I move it to?", "What's the new date?", "When should we reschedule it?",
                "Which other day works instead?", "Could you give me another day for it?"],
    'tier': ["Which tier should I focus on?", "Which customer tier is this for?", "Which accounts do you own?",
             "What tier are we talking about?", "Which segment should I look at?"],
    'threshold': ["What's the threshold?", "Below what health score should I flag an account?", "What score counts as at risk?",
                  "Is there a cut-off?", "How low does the health score have to be?"],
    'new_hire_name': ["Who is the new hire?", "What's her name?", "What's the new analyst's name?", "Who's joining the team?",
                      "Could you send me her email address?"],
    'room': ["Which room should I book?", "Where should we meet?", "Is there a meeting room you prefer?",
             "What's the location?", "Do you have a venue in mind?"],
}
VOCABULARY = sorted({w for ws in ("budget supplier vendor category manager supervisor start date first day last day leaving "
                                  "access level permissions which day duration how long new date reschedule tier segment "
                                  "threshold cut-off new hire name email room location venue spending limit").split(" ") for w in [ws]})

def spec_with(*facts, **kw):
    return TaskSpec(id="t", request="Please help me with this.", services={"gmail": []}, tools=["gmail_send_message"],
                    user=UserSpec(facts=list(facts), max_rounds=50, **kw))

def answered(question, key):
    "Does the scripted user of a spec with this fact (and one fact of another kind) reveal it to `question`?"
    other = UserFact(key="room" if key != "room" else "duration", value="OTHER-VALUE")
    env = CoworkEnv(spec_with(UserFact(key=key, value="SECRET-VALUE"), other)); env.reset()
    r = env.step(Message(role="assistant", content=question))
    return bool(r.messages) and "SECRET-VALUE" in r.messages[0].content and "OTHER-VALUE" not in r.messages[0].content

def test_paraphrases_are_answered():
    assert set(PARAPHRASES) >= set(k for k in FACT_KINDS if k in ("budget_limit", "manager", "day", "room"))
    assert {FACT_KINDS[k] for k in PARAPHRASES} == set(KIND_PATTERNS), "every fact kind has paraphrases"
    assert all(len(qs) >= 5 for qs in PARAPHRASES.values())
    results = {(k, q): answered(q, k) for k, qs in PARAPHRASES.items() for q in qs}
    rate = sum(results.values()) / len(results)
    print(f"paraphrase answer rate: {sum(results.values())}/{len(results)} = {rate:.1%}")
    assert rate >= 0.9, [kq for kq, ok in results.items() if not ok]
    for k in PARAPHRASES:  # and no kind is left mostly unanswered
        assert sum(results[(k, q)] for q in PARAPHRASES[k]) >= 4, k

@pytest.mark.parametrize("key", sorted(PARAPHRASES))
def test_keyword_stuffing_reveals_nothing(key):
    "Vocabulary lists, with or without a question mark, in one or several sentences: 0 facts revealed."
    facts = [UserFact(key=k, value=f"SECRET-{k}") for k in PARAPHRASES if k != key][:3] + [UserFact(key=key, value="SECRET-VALUE")]
    stuffings = [" ".join(VOCABULARY), ", ".join(VOCABULARY) + "?", "Tell me the " + ", the ".join(VOCABULARY) + ".",
                 " ".join(q for qs in PARAPHRASES.values() for q in qs[:1]),
                 "Quick questions: " + " ".join(PARAPHRASES[key][:1] + [PARAPHRASES[k][0] for k in PARAPHRASES if k != key][:2])]
    for s in stuffings:
        env = CoworkEnv(spec_with(*facts)); env.reset()
        r = env.step(Message(role="assistant", content=s))
        said = r.messages[0].content if r.messages else ""
        assert "SECRET" not in said, (s, said)
        assert not asks_for(s, facts[-1])

def test_two_facts_at_once_get_one_thing_at_a_time():
    budget, supplier = UserFact(key="budget_limit", value="500 USD"), UserFact(key="preferred_supplier", value="BoxCo")
    env = CoworkEnv(spec_with(budget, supplier)); env.reset()
    r = env.step(Message(role="assistant", content="What's the budget, and which supplier should I use?"))
    assert r.messages[0].content == ONE_AT_A_TIME and env.user.revealed == {}
    r = env.step(Message(role="assistant", content="OK. Which supplier should I use?"))
    assert "BoxCo" in r.messages[0].content and "500" not in r.messages[0].content
    r = env.step(Message(role="assistant", content="And how much can I spend?"))
    assert "500 USD" in r.messages[0].content
    assert env.user.revealed == {"preferred_supplier": 2, "budget_limit": 3}

def test_statements_reveal_nothing():
    f = UserFact(key="manager", value="Ana Ruiz")
    for s in ["I'll ask about the manager later.", "The manager field is still empty.", "Reporting line set up."]:
        assert requests(s, [f]) == [] and not asks_for(s, f)
        env = CoworkEnv(spec_with(f)); env.reset()
        r = env.step(Message(role="assistant", content=s))
        assert r.done and "Ana" not in " ".join(m.content for m in r.messages)

def test_generic_words_alone_do_not_ask():
    "Single generic words ('date', 'name', 'when') are never intents, even as aliases."
    f = UserFact(key="start_date", value="2026-04-01", aliases=["date", "when"])
    for q in ["What is the date today?", "When?", "What's the name of the file?", "Is that the right date format?"]:
        assert not asks_for(q, f), q
    assert asks_for("What's her start date?", f)
    assert not any(p.strip("\\b()?:") in GENERIC_WORDS for ps in KIND_PATTERNS.values() for p in ps)

def test_fact_intents_and_unknown_keys():
    "A fact of a kind the catalogue does not know is asked for by its key phrase, specific aliases and its own intents."
    f = UserFact(key="cost_center", value="CC-42", aliases=["budget code"], intents=["Which team pays for this?"])
    for q in ["Which cost center should I use?", "Which budget code applies?", "Which team pays for this?",
              "Could you tell me which team pays for this?"]:
        assert asks_for(q, f), q
    assert not asks_for("The team pays for this.", f)
    assert INTENTS["budget_limit"] is KIND_PATTERNS["budget"]

def test_checks_asks_for_is_the_intents_matcher():
    "The grader's `asked_for` credits exactly what the user answers."
    assert checks.asks_for is asks_for
    f = UserFact(key="budget_limit", value="500 USD")
    spec = spec_with(f).model_copy(update={"checks": [Check(id="asked", type="asked_for", source="fact:budget_limit",
                                                            params={"fact": "budget_limit"})]})
    for text, ok in [("How much can I spend?", True), ("budget supplier manager room?", False), ("The budget is tight.", False)]:
        env = CoworkEnv(spec); env.reset(); env.step(Message(role="assistant", content=text))
        assert env.grade().item("asked").passed is ok, text

def test_scripted_user_is_deterministic():
    spec = spec_with(UserFact(key="day", value="Thursday"), UserFact(key="duration", value="30 minutes"))
    def run():
        env = CoworkEnv(spec); env.reset()
        for q in ["Which day works?", "How long?", "Which day and how long?", "Thanks, done."]:
            if not env.done: env.step(Message(role="assistant", content=q))
        return env.trajectory().to_json()
    assert run() == run()

@pytest.mark.parametrize("spec", load_specs(ROOT / "data" / "examples"), ids=lambda s: s.id)
def test_oracle_questions_are_answered(spec):
    "The reference plans' `ask` steps (the oracle's polite requests) still reveal exactly their fact."
    from coworkenv.agents import OracleAgent, run_episode
    t = run_episode(CoworkEnv(spec), OracleAgent(spec))
    asked = [s.fact for s in spec.solution if s.kind == "ask"]
    assert set(asked) <= set(t.info["revealed"]), (asked, t.info["revealed"])
    assert all(i.passed for i in t.grade.items if i.type == "asked_for")

def test_stuffing_every_fact_word_reveals_nothing_on_real_specs():
    "One message with every fact word and intent of the examples and synthesized families: 0 facts, 0 asked_for credit."
    import coworkenv.families_finance_ops, coworkenv.families_people_comms
    from coworkenv.workflows import FAMILIES
    specs = list(load_specs(ROOT / "data" / "examples"))
    for fam in FAMILIES.values():
        for d in ("easy", "hard"):
            try: specs.append(fam.generate(0, d))
            except Exception: pass  # a family under construction is tested by its own tests
    mt = [s for s in specs if s.user.facts]
    words = sorted({w for s in mt for f in s.user.facts for w in [*f.words, *f.intents]})
    assert len(mt) >= 10 and len(words) >= 30
    for text in (" ".join(words), ", ".join(words) + "?", " ".join(w if w.endswith("?") else f"What is the {w}?" for w in words)):
        revealed = credited = 0
        for s in mt:
            env = CoworkEnv(s); env.reset(); env.step(Message(role="assistant", content=text))
            revealed += len(env.user.revealed)
            credited += sum(i.passed for i in env.grade().items if i.type == "asked_for")
        assert (revealed, credited) == (0, 0), text[:80]
