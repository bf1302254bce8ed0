#!/bin/sh
# kv_put: set KEY to VALUE in settings/KEY (put semantics: a replay leaves the same file).
# Usage: sh kv_put.sh '{"key": "volume", "value": 7}'   (run in the world directory)
# It writes the file in two steps, and declares a kill point before and between them with
# "$KILLPOINT_POINT" (set by `killpoint certify`; unset, the points cost nothing).
set -eu
args=$1
key=$(printf '%s' "$args" | sed -n 's/.*"key": *"\([a-z_]*\)".*/\1/p')
value=$(printf '%s' "$args" | sed -n 's/.*"value": *\(-\{0,1\}[0-9][0-9]*\).*/\1/p')
if [ -z "$key" ] || [ -z "$value" ]; then
    echo "kv_put: give {\"key\": NAME, \"value\": INTEGER}, got $args" >&2
    exit 2
fi
point() { if [ -n "${KILLPOINT_POINT:-}" ]; then "$KILLPOINT_POINT" "$@"; fi; }
mkdir -p settings
point "before writing settings/$key"
printf 'key=%s\n' "$key" > "settings/$key"
point "between the two lines of settings/$key"
printf 'value=%s\n' "$value" >> "settings/$key"
