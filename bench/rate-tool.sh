#!/bin/sh
# rate-tool.sh - end-to-end throughput and peak memory of `billing rate`
# over N generated events (default 10 000 000), from JSON Lines and from
# length-delimited protobuf, with and without the event-id dedupe, and
# with the dedupe reading standard input (events kept in temporary files).
#
#   bench/rate-tool.sh [EVENTS] [WORKDIR]      (run from the build tree)
#
# The input files (about 200 and 80 bytes an event) are generated once into
# WORKDIR (default /tmp/billing-bench) by bench/gen_events and read once
# before timing, so that they come from the page cache. Needs /usr/bin/time.
set -eu
events=${1:-10000000}
work=${2:-/tmp/billing-bench}
top=$(cd "$(dirname "$0")/.." && pwd)
gen="$top/bench/gen_events"
billing="$top/billing/billing"
srcdir=$(sed -n 's/^abs_top_srcdir = //p' "$top/Makefile")
pricebook="$srcdir/examples/gpu-cloud/pricebook.json"

mkdir -p "$work"
[ -s "$work/accounts.json" ] || "$gen" --accounts-json >"$work/accounts.json"
[ -s "$work/events-$events.jsonl" ] || "$gen" "$events" >"$work/events-$events.jsonl"
[ -s "$work/events-$events.pb" ] || "$gen" --protobuf "$events" >"$work/events-$events.pb"
cat "$work/events-$events.jsonl" "$work/events-$events.pb" >/dev/null

echo "format    dedupe  input  seconds  events/s   peak RSS (MiB)"
for format in jsonl pb; do
    for mode in on off on-stdin; do
        flag=""
        input="$work/events-$events.$format"
        stdin=/dev/null
        [ "$mode" = off ] && flag="--no-dedupe"
        if [ "$mode" = on-stdin ]; then
            # The same file as standard input: events that cannot be read
            # again are kept in the dedupe's temporary files.
            flag="--input-format $( [ $format = pb ] && echo protobuf || echo jsonl )"
            stdin=$input
            input=-
        fi
        # shellcheck disable=SC2086
        /usr/bin/time -f "%e %M" -o "$work/time" "$billing" rate $flag \
            --pricebook "$pricebook" --accounts "$work/accounts.json" \
            "$input" <"$stdin" >"$work/out.json"
        read -r secs kib <"$work/time"
        # Centiseconds, without leading zeros (sh would read "097" as octal).
        centis=$(echo "$secs" | tr -d . | sed 's/^0*//')
        centis=${centis:-1}
        printf '%-9s %-7s %-6s %7s  %9d  %5d\n' "$format" "${mode%-stdin}" \
            "$( [ "$mode" = on-stdin ] && echo stdin || echo file )" "$secs" \
            $((events * 100 / centis)) $((kib / 1024))
    done
done
