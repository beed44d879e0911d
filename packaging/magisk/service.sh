#!/system/bin/sh
# late_start service script: Magisk, KernelSU and APatch run it once per boot, as root,
# in parallel with the rest of the boot (Magisk docs/guides.md "Boot Scripts"; KernelSU
# website/docs/guide/module.md "Boot scripts"; APatch docs/apm-guide.md "Boot scripts").
#
# Waits until Android reports the boot completed (the network, input and screen services
# the tools use are up by then), then starts nl2sh's managed background service once with
# the module's configuration. One attempt: a binary that fails at once is logged, not
# retried, so a broken configuration cannot turn into a restart loop. What happened is in
# /data/adb/nl2sh/module.log (0600); the service's own log, with the connection details
# and the token, is /data/adb/nl2sh/config.service/service.log (0600, written by nl2sh).

# The module's directory, never hard-coded (all three managers' guides: MODDIR=${0%/*}).
MODDIR=${0%/*}
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$MODDIR/lib.sh"
nl2sh_use_manager_busybox "$0" "$@"

# The binary inside the module, not /system/bin/nl2sh: KernelSU mounts a module's
# system/ only with a mounting metamodule installed (KernelSU module.md "Metamodule").
NL2SH_BIN=$MODDIR/system/bin/nl2sh
# Up to 150 polls 2 s apart: 5 minutes, longer than any healthy boot.
BOOT_POLL_SECS=2
BOOT_MAX_POLLS=150

umask 077
if [ ! -d "$NL2SH_DATA_DIR" ]; then
    # Deleted since the install: recreate it so that this boot's log has a place.
    mkdir -p "$NL2SH_DATA_DIR" && chmod 0700 "$NL2SH_DATA_DIR"
fi
nl2sh_rotate_log

polls=0
while [ "$(getprop sys.boot_completed 2>/dev/null)" != 1 ]; do
    if [ "$polls" -ge "$BOOT_MAX_POLLS" ]; then
        nl2sh_log "boot did not complete within $((BOOT_POLL_SECS * BOOT_MAX_POLLS)) s; the service was not started (press Action in the root manager to start it)"
        exit 1
    fi
    polls=$((polls + 1))
    nl2sh_sleep "$BOOT_POLL_SECS"
done

module_version=$(sed -n 's/^version=//p' "$MODDIR/module.prop" 2>/dev/null)
nl2sh_log "boot completed; starting the managed service (module ${module_version:-unknown})"

if [ ! -x "$NL2SH_BIN" ]; then
    nl2sh_log "$NL2SH_BIN is missing or not executable; reinstall the module"
    exit 1
fi
if [ ! -f "$NL2SH_CONFIG" ]; then
    nl2sh_log "no configuration at $NL2SH_CONFIG; reinstall the module to write the default one"
    exit 1
fi

output=$(nl2sh_tmp_output start) || {
    nl2sh_log "cannot write in $NL2SH_DATA_DIR"
    exit 1
}
"$NL2SH_BIN" --config "$NL2SH_CONFIG" service start </dev/null >"$output" 2>&1
status=$?
if [ "$status" -eq 0 ]; then
    nl2sh_log "service started; connection details: $NL2SH_SERVICE_LOG"
else
    nl2sh_log "service start failed (exit $status); not retrying until the next boot or the Action button:"
fi
nl2sh_log_output "$output"
rm -f "$output"
exit "$status"
