#!/bin/sh
# log_line: append "LEVEL MESSAGE" to log.txt. Arguments: one JSON object on stdin.
# Deliberately claimed IDEMPOTENT_WRITE in the tests: every replay appends again.
set -eu
args=$(cat)
level=$(printf '%s' "$args" | sed -n 's/.*"level": *"\([a-z]*\)".*/\1/p')
count=$(printf '%s' "$args" | sed -n 's/.*"count": *\([0-9][0-9]*\).*/\1/p')
printf '%s %s\n' "$level" "$count" >> log.txt
