// Asks the judge whether the answer meets the criteria; score 1 for yes, 0 for no.
import { createTargetClient, defineScriptGrader } from '../../grader_sdk/js/index.mjs';

defineScriptGrader(async (input) => {
  const judge = createTargetClient();
  const reply = await judge.invoke({
    question: `Criteria: ${input.criteria}\nAnswer: ${input.output}\nDoes the answer meet the criteria? Reply yes or no.`,
    temperature: 0,
  });
  const verdict = reply.rawText.trim().toLowerCase();
  return { score: verdict.startsWith('yes') ? 1.0 : 0.0, reason: `judge: ${verdict}` };
});
