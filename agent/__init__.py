"""scholarloop: cited, citation-checked answers to scientific literature questions.

from agent import ask
answer = ask("Which inhibitor remains active against EGFR T790M?", papers="papers/")
print(answer.answer)
"""

from agent.api import Session, aask, aask_many, ask, ask_many
from agent.state import Answer, Claim, Evidence, Status, Verdict

__all__ = [
    "Answer",
    "Claim",
    "Evidence",
    "Session",
    "Status",
    "Verdict",
    "aask",
    "aask_many",
    "ask",
    "ask_many",
]
