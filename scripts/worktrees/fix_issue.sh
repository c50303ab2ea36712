#!/bin/sh
# A stand-in for a coding agent: "fixes" an issue by writing the fix into the file it was given
# (relative to its cwd: its own worktree), then answers with what it touched. Arguments: FILE TEXT.
cat > /dev/null
file="$1"
shift
mkdir -p "$(dirname "$file")"
printf '%s\n' "$*" >> "$file"
printf '{"file":"%s"}' "$file" | "$AWF_LAUNCHER" result "$AWF_OP"
