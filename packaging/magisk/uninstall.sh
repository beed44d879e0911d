#!/system/bin/sh
# Run by the root manager when it removes the module: Magisk and KernelSU at the next
# boot, before removing the module directory (Magisk native/src/core/module.rs
# run_uninstall_script; KernelSU userspace/ksud/src/module.rs prune_modules), and waiting
# for it, so it must not hang.
#
# Stops the managed service if it runs (at that point of a boot it normally does not) and
# keeps /data/adb/nl2sh: the configuration may hold a token the owner chose, and the state
# directory the task and audit history. Deleting them is the owner's decision.

MODDIR=${0%/*}
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$MODDIR/lib.sh"
nl2sh_use_manager_busybox "$0" "$@"

NL2SH_BIN=$MODDIR/system/bin/nl2sh
# Long enough for a drain of in-flight calls; the boot waits for this script.
STOP_TIMEOUT_SECS=30
umask 077

if [ -x "$NL2SH_BIN" ] && [ -f "$NL2SH_CONFIG" ] && output=$(nl2sh_tmp_output stop); then
    if command -v timeout >/dev/null 2>&1; then
        timeout "$STOP_TIMEOUT_SECS" "$NL2SH_BIN" --config "$NL2SH_CONFIG" service stop </dev/null >"$output" 2>&1
    else
        "$NL2SH_BIN" --config "$NL2SH_CONFIG" service stop </dev/null >"$output" 2>&1
    fi
    status=$?
    nl2sh_log "module removed: service stop exit $status"
    nl2sh_log_output "$output"
    rm -f "$output"
fi

message="nl2sh module removed. The configuration and state in $NL2SH_DATA_DIR are kept; delete that directory yourself (as root: rm -rf $NL2SH_DATA_DIR) if you no longer need them."
echo "$message"
nl2sh_log "$message"
exit 0
