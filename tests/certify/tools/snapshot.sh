#!/bin/sh
# The canonical state of a world directory: every file, sorted, with its content.
set -eu
find . -type f | LC_ALL=C sort | while IFS= read -r file; do
    printf '== %s\n' "$file"
    cat "$file"
done
