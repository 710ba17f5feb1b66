#!/bin/sh
# Searches sha256 hashes of "<node>-<n>" that start with $1; reports the
# rate as a metric and each hit as a finding (and into results/found.txt).
prefix=${1:-000}
node=${VASTFLEET_NODE_NAME:-node}
mkdir -p results
n=0
while [ $n -lt ${SEARCH_COUNT:-20000} ]; do
	h=$(printf '%s-%s' "$node" "$n" | sha256sum | cut -c1-64)
	case $h in "$prefix"*)
		echo "$h $node-$n" >> results/found.txt
		echo "{\"found\":{\"input\":\"$node-$n\",\"sha256\":\"$h\"}}" ;;
	esac
	n=$((n + 1))
	[ $((n % 500)) -eq 0 ] && echo "{\"metric\":\"hashes\",\"value\":$n}"
done
true
