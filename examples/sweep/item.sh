#!/bin/sh
# One work item: a small chain of hashes seeded by the item, its result kept
# in results/, and a finding when the last hash starts with "0".
item=$1
h=$(printf 'seed-%s' "$item" | sha256sum | cut -c1-64)
i=0
while [ $i -lt ${ROUNDS:-20} ]; do
	h=$(printf '%s' "$h" | sha256sum | cut -c1-64)
	i=$((i + 1))
done
mkdir -p results
echo "$item $h" > "results/item-$item.txt"
case $h in 0*) echo "{\"found\":{\"item\":\"$item\",\"sha256\":\"$h\"}}" ;; esac
echo "item $item: $h"
