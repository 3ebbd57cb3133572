# server-cpu.sh - sourced by the bench scripts that report PostgreSQL's
# CPU (close-bench.sh, finalize-bench.sh): server_cpu prints the CPU
# seconds (user+sys) the server has used so far, when it runs on this
# machine and we may read its processes' /proc entries: exited backends
# count in the postmaster's cutime/cstime, live processes in their own.
# Prints nothing when unknown. Needs psql to reach the server (PG*).
pm_pid=$(psql -tA -d postgres -c "SHOW data_directory" 2>/dev/null |
    xargs -I{} head -n 1 {}/postmaster.pid 2>/dev/null || true)
server_cpu() {
    local ticks=0
    local p
    local f
    [ -n "$pm_pid" ] && [ -r "/proc/$pm_pid/stat" ] || return 0
    for p in $pm_pid $(pgrep -P "$pm_pid"); do
        f=$(cut -d')' -f2- "/proc/$p/stat" 2>/dev/null) || continue
        # shellcheck disable=SC2086
        set -- $f
        ticks=$((ticks + ${12} + ${13} + ${14} + ${15}))
    done
    echo "scale=2; $ticks / $(getconf CLK_TCK)" | bc
}
