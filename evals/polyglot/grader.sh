#!/bin/sh
# Asks the judge whether the answer meets the criteria; score 1 for yes, 0 for no.
# Plain HTTP: curl for the call, jq for the JSON.
set -eu
payload=$(cat)
question=$(printf '%s' "$payload" | jq -r '"Criteria: \(.criteria)\nAnswer: \(.output)\nDoes the answer meet the criteria? Reply yes or no."')
reply=$(jq -n --arg q "$question" '{question: $q, temperature: 0}' |
  curl -sS --fail-with-body -X POST "$AGENTV_TARGET_PROXY_URL/invoke" \
    -H "Authorization: Bearer $AGENTV_TARGET_PROXY_TOKEN" \
    -H 'Content-Type: application/json' --data-binary @-) || { echo "judge call failed: $reply"; exit 3; }
verdict=$(printf '%s' "$reply" | jq -r '.rawText' | tr '[:upper:]' '[:lower:]' | sed 's/^ *//')
case "$verdict" in
  yes*) score=1.0 ;;
  *) score=0.0 ;;
esac
jq -n --argjson s "$score" --arg v "$verdict" '{score: $s, reason: "judge: \($v)"}'
