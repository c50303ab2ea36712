#!/bin/sh
# A `command` agent that runs inside its sandbox (see scripts/sandboxed.rhai) and reports what it
# can reach from there: the workspace's files, the operator's home folders, the root file
# system, the network and the environment. It answers through the launcher like any agent.
cat > /dev/null
# The project's files (its own control folder shows under .awf; the run records do not).
files=$(find . -path ./.awf -prune -o -type f -print 2>/dev/null | wc -l)
home_entries=$(ls -A /root /home 2>/dev/null | grep -v -e ':$' -e '^$' | wc -l)
can_write_root=false
if (: > /usr/.awf-survey) 2>/dev/null; then
  rm -f /usr/.awf-survey
  can_write_root=true
fi
# Network interfaces besides loopback (in a sandbox with network = "none" there are none).
interfaces=$(tail -n +3 /proc/net/dev | grep -v -c '^ *lo:')
variables=$(env | wc -l)
printf '{"files":%d,"home_entries":%d,"can_write_root":%s,"interfaces":%d,"variables":%d,"home":"%s"}' \
  "$files" "$home_entries" "$can_write_root" "$interfaces" "$variables" "$HOME" |
  "$AWF_LAUNCHER" result "$AWF_OP"
