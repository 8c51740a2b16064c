#!/bin/sh
# Claude Code UserPromptSubmit hook: posts the hook's JSON (stdin) to Punk's POST /api/v1/ingest/prompt, with the
# time it was typed, so each prompt becomes an observed run on the ledger (docs/punk-mcp.md "Prompt ingest").
# Fire and forget: a 1-second limit, nothing printed, exit 0 always, with Punk down or the key wrong alike. An
# oversized prompt is Punk's to mark: recorded truncated, or, past what it reads, as a refused prompt (docs/punk-mcp.md).
# Reads PUNK_GATEWAY_URL (default http://localhost:4100) and PUNK_MCP_API_KEY.
url="${PUNK_GATEWAY_URL:-http://localhost:4100}"
url="${url%/}/api/v1/ingest/prompt"
now=$(date -u +%Y-%m-%dT%H:%M:%SZ)
umask 077
# Headers from a private file, so neither the key nor the prompt shows in the process list.
headers=$(mktemp 2>/dev/null) || exit 0
trap 'rm -f "$headers"' EXIT
printf 'Content-Type: application/json\n' >"$headers"
[ -n "$PUNK_MCP_API_KEY" ] && printf 'Authorization: Bearer %s\n' "$PUNK_MCP_API_KEY" >>"$headers"
# The hook input is one JSON object: "time" goes in front of its first field.
sed '1s/^[[:space:]]*{/{"time":"'"$now"'",/' 2>/dev/null |
  curl -s -o /dev/null --max-time 1 -X POST -H @"$headers" --data-binary @- "$url" >/dev/null 2>&1
exit 0
