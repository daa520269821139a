"""Asks the judge whether the answer meets the criteria; score 1 for yes, 0 for no."""

from grader_sdk import TargetClient, script_grader


@script_grader
def grade(case):
    judge = TargetClient.from_env()
    reply = judge.invoke(
        f"Criteria: {case.criteria}\nAnswer: {case.output}\nDoes the answer meet the criteria? Reply yes or no.",
        temperature=0,
    )
    verdict = reply.raw_text.strip().lower()
    return {"score": 1.0 if verdict.startswith("yes") else 0.0, "reason": f"judge: {verdict}"}
