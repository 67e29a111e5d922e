"""Synthesize, check and run executable training environments for tool-using AI-coworker agents

Modules:

- `coworkenv.adversaries`: A suite of adversarial policies, built systematically from each spec's reference solution and workspace, that tries to earn reward for wrong work: the grader of a valid spec must fail every one of them.
- `coworkenv.checks`: Declarative checks over the evidence of an episode, Claw-Eval scoring (completion, safety, robustness), per-turn check events, pass@k / pass^k, and an optional LLM judge.
- `coworkenv.claweval`: Import Claw-Eval task folders (`task.yaml` + fixtures) as `TaskSpec`s, run them in `CoworkEnv`, run their Python graders on our trajectories, export any of our specs as a Claw-Eval task folder, and the `coworkenv claweval import|export|run` commands.
- `coworkenv.clawmark`: Load ClawMark `task.py` folders unchanged, run them as multi-day episodes in process (stage functions, agent turns, snapshots, the task's own async checkers), score them as ClawMark does, report what depends on media, and run them with our agents, `evaluate` and the `coworkenv clawmark import|run` commands.
- `coworkenv.clawmark_services`: The five services a ClawMark task talks to (filesystem, email, Notion, Google Sheets, calendar), its `TaskContext` and a local stand-in for its container, all in memory or in one folder per episode.
- `coworkenv.families_finance_ops`: Eight parametric workflow families from the finance and IT-operations side of an office: expense reimbursement, vendor payment, inventory reorder, month-end reporting, job maintenance, credential rotation, incident triage and knowledge-base upkeep.
- `coworkenv.families_people_comms`: Eight parametric workflow families about people and communication: onboarding and offboarding, access requests, meetings, customer escalations, sales follow-ups, drive clean-ups and news digests.
- `coworkenv.llm`: One timeout/retry policy for every LLM client, an `openai.OpenAI` built from it, and the two guards for what an LLM says before it is stored: secrets redacted, raw output capped.
- `coworkenv.validation`: A staged validator that checks generated task specs *and the behaviour of their graders*, returns machine-readable findings plus a feedback text, and a bounded repair loop that feeds the findings back to the generator and quarantines what never passes."""

__version__ = "0.1.0"
