#!/system/bin/sh
# The module's Action button (Magisk v28+, KernelSU, APatch): the manager runs this as
# root and shows its output on screen (Magisk runs `cd /data/adb/modules/nl2sh &&
# sh ./action.sh`; KernelSU and APatch run it by its full path from the module directory).
#
# Shows whether the managed service runs and the URLs an agent needs, starting the
# service first if it is stopped. The access token is never shown: the screen may be seen
# or recorded by others. It is in the service's log, readable by root only.

MODDIR=${0%/*}
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$MODDIR/lib.sh"
nl2sh_use_manager_busybox "$0" "$@"

NL2SH_BIN=$MODDIR/system/bin/nl2sh
umask 077

# The connections of `service status --json`, each as labelled lines in a fixed order.
# Only these fields are ever shown, whatever else the JSON holds. Splitting at every `}`
# puts each connection object (they hold no nested objects) on a line of its own.
show_connections() {
    tr '\n}' ' \n' <"$1" | while IFS= read -r object; do
        for field in mcp_url a2a_url card_url transport version pid since; do
            value=$(printf '%s\n' "$object" |
                sed -n -E "s/.*\"$field\"[[:space:]]*:[[:space:]]*(\"([^\"]*)\"|([0-9]+)).*/\2\3/p")
            [ -n "$value" ] || continue
            case $field in
            mcp_url) label='MCP:       ' ;;
            a2a_url) label='A2A:       ' ;;
            card_url) label='Agent Card:' ;;
            transport) label='Transport: ' ;;
            version) label='Version:   ' ;;
            pid) label='PID:       ' ;;
            since) label='Since:     ' ;;
            esac
            printf '  %s %s\n' "$label" "$value"
        done
    done | nl2sh_redact
}

# `service status --json` into a private file; the exit status is nl2sh's (0: running).
read_status() {
    "$NL2SH_BIN" --config "$NL2SH_CONFIG" service status --json </dev/null >"$status_file" 2>/dev/null
}

echo "nl2sh device agent (MCP / A2A)"
if [ ! -x "$NL2SH_BIN" ]; then
    echo "! $NL2SH_BIN is missing: reinstall the module."
    exit 1
fi
if [ ! -f "$NL2SH_CONFIG" ]; then
    echo "! No configuration at $NL2SH_CONFIG: reinstall the module to write the default one."
    exit 1
fi
status_file=$(nl2sh_tmp_output status) || {
    echo "! Cannot write in $NL2SH_DATA_DIR."
    exit 1
}
trap 'rm -f "$status_file" "${start_file:-}"' EXIT

if read_status; then
    echo "Status: running"
else
    echo "Status: stopped; starting it..."
    start_file=$(nl2sh_tmp_output start) || {
        echo "! Cannot write in $NL2SH_DATA_DIR."
        exit 1
    }
    "$NL2SH_BIN" --config "$NL2SH_CONFIG" service start </dev/null >"$start_file" 2>&1
    start_status=$?
    nl2sh_log "action: service start exit $start_status"
    nl2sh_log_output "$start_file"
    if [ "$start_status" -ne 0 ]; then
        echo "! The service did not start (exit $start_status):"
        # nl2sh's own words (it names the setting at fault), credential-shaped text removed.
        nl2sh_redact <"$start_file" | sed 's/^/  /'
        if grep -q protocol_start_with_service "$start_file"; then
            echo "Set protocol_start_with_service = true in $NL2SH_CONFIG, then press Action again."
        fi
        echo "Module log: $NL2SH_MODULE_LOG"
        exit 1
    fi
    # `service start` returns once the service runs; give discovery a moment all the same.
    tries=0
    until read_status; do
        tries=$((tries + 1))
        if [ "$tries" -ge 5 ]; then
            echo "! Started, but its status is not available yet: press Action again in a few seconds."
            exit 1
        fi
        sleep 1
    done
    echo "Status: running (started now)"
fi

connections=$(show_connections "$status_file")
if printf '%s\n' "$connections" | grep -q 'MCP:'; then
    printf '%s\n' "$connections"
else
    [ -n "$connections" ] && printf '%s\n' "$connections"
    echo "  No HTTP endpoint is advertised (a local stdio session, or MCP/A2A is off)."
fi
echo
echo "Token: not shown here. As root, read it from"
echo "  $NL2SH_SERVICE_LOG"
echo "  (it changes at every start unless protocol_token is set in $NL2SH_CONFIG)."
echo "Agents send it as 'Authorization: Bearer <token>'. Settings: $NL2SH_CONFIG"
exit 0
