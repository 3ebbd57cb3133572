#!/bin/sh
# check-unit.sh - the systemd unit `make install` installs
# (billingd/billingd.service, from examples/billingd.service.in):
# it starts the installed billingd with the configuration file that
# billingd(8) names, and `systemd-analyze security` rates it no worse than
# the 1.1 the unit and doc/operations.md promise (an unprotected unit is
# 9.6; removing any one hardening line raises it). Prints a Check-style
# summary line; skipped (77) without systemd-analyze.
set -u
build=$(cd "${top_builddir:-..}" && pwd)
unit="$build/billingd/billingd.service"
man="$build/billingd/billingd.8"
checks=0
failures=0

ok() {
    checks=$((checks + 1))
    if [ "$1" -eq 0 ]; then
        echo "ok: $2"
    else
        echo "FAILED: $2"
        failures=$((failures + 1))
    fi
}

command -v systemd-analyze >/dev/null 2>&1 || { echo "SKIP: no systemd-analyze"; exit 77; }
test -f "$unit"
ok $? "billingd.service made from examples/billingd.service.in"
test -f "$man"
ok $? "billingd.8 made"

# ExecStart=SBINDIR/billingd --config FILE, FILE being the man page's.
exec_start=$(sed -n 's/^ExecStart=//p' "$unit")
program=${exec_start%% *}
config=$(printf '%s\n' "$exec_start" | sed -n 's/.* --config \([^ ]*\)$/\1/p')
case $program in
    /*/billingd) rc=0 ;;
    *) rc=1 ;;
esac
ok $rc "ExecStart runs an installed billingd by its absolute path ($program)"
test -n "$config" && grep -q "^\\.I $config\$" "$man"
ok $? "the unit's --config file ($config) is the one billingd(8) names under FILES"
case $exec_start in
    *@*) rc=1 ;;
    *) rc=0 ;;
esac
ok $rc "no @placeholder@ left in ExecStart"

# The rating of its hardening, offline (nothing is started).
out=$(systemd-analyze security --offline=true "$unit" 2>&1)
level=$(printf '%s\n' "$out" | sed -n 's/.*Overall exposure level for [^:]*: \([0-9.]*\) .*/\1/p')
echo "exposure level: ${level:-none}"
test -n "$level"
ok $? "systemd-analyze security rates the unit"
# As tenths, so that the shell compares integers: at most 1.1.
tenths=$(printf '%s\n' "${level:-99.9}" | sed 's/\.//')
test "$tenths" -le 11
ok $? "exposure ${level:-none} is at most 1.1 (OK)"
for key in User=billing NoNewPrivileges=yes ProtectSystem=strict CapabilityBoundingSet= \
    RestrictAddressFamilies= SystemCallFilter=@system-service; do
    grep -q "^$key" "$unit"
    ok $? "the unit sets $key"
done

echo "$(((checks - failures) * 100 / checks))%: Checks: $checks, Failures: $failures, Errors: 0"
[ "$failures" -eq 0 ]
