#!/system/bin/sh
# The module's Action button (Magisk v28+, KernelSU, APatch): the manager runs this as
# root and shows its output on screen (Magisk runs `cd /data/adb/modules/nl2sh &&
# sh ./action.sh`; KernelSU and APatch run it by its full path from the module directory).
#
# Shows whether the managed service runs and the URLs an agent needs, starting the
# service first if it is stopped, then opens the owner's console: under KernelSU and
# APatch it points to nl2sh's WebUI in the manager (webroot/); under Magisk it opens that
# WebUI in WebUI X when installed, otherwise the Web console in the browser with a fresh
# one-time login (`nl2sh web login --open`). The access token is never shown: the screen
# may be seen or recorded by others. It is in the service's log, readable by root only.

MODDIR=${0%/*}
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$MODDIR/lib.sh"
nl2sh_use_manager_busybox "$0" "$@"

NL2SH_BIN=$MODDIR/system/bin/nl2sh
# This module's id (module.prop), which a WebUI host is given to show its WebUI.
NL2SH_MODULE_ID=nl2sh
# WebUI X, MMRL's standalone WebUI app (for Magisk, whose manager has no WebUI): its
# package, and the exported activity that shows a module's WebUI for the module id in the
# MOD_ID string extra (WebUI-X-Portable: app/src/main/AndroidManifest.xml, WXActivity;
# MMRL: ModId.getModId reads MOD_ID, then id). Root's `am` may start it although the
# activity asks callers for WebUI X's own permission.
NL2SH_WEBUIX_PACKAGE=com.dergoogler.mmrl.wx
NL2SH_WEBUIX_ACTIVITY=$NL2SH_WEBUIX_PACKAGE/.ui.activity.webui.WebUIActivity
umask 077

# The connections of `service status --json`, each as labelled lines in a fixed order.
# Only these fields are ever shown, whatever else the JSON holds. Splitting at every `}`
# puts each connection object (they hold no nested objects) on a line of its own.
show_connections() {
    tr '\n}' ' \n' <"$1" | while IFS= read -r object; do
        for field in mcp_url a2a_url card_url url transport version pid since; do
            value=$(printf '%s\n' "$object" |
                sed -n -E "s/.*\"$field\"[[:space:]]*:[[:space:]]*(\"([^\"]*)\"|([0-9]+)).*/\2\3/p")
            [ -n "$value" ] || continue
            case $field in
            mcp_url) label='MCP:       ' ;;
            a2a_url) label='A2A:       ' ;;
            card_url) label='Agent Card:' ;;
            url) label='Web:       ' ;;
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

# The Web console in the browser, logged in: `web login --open` asks the running service
# for a one-time login link and hands it to the browser (an ACTION_VIEW intent); the link
# itself is never printed. Shows nl2sh's words (redacted) either way.
open_web_console() {
    console_file=$(nl2sh_tmp_output console) || {
        echo "! Cannot write in $NL2SH_DATA_DIR."
        return 1
    }
    "$NL2SH_BIN" --config "$NL2SH_CONFIG" web login --open </dev/null >"$console_file" 2>&1
    console_status=$?
    nl2sh_log "action: web login --open exit $console_status"
    nl2sh_log_output "$console_file"
    if [ "$console_status" -eq 0 ]; then
        echo "Console: the Web console opens in your browser, logged in."
        nl2sh_redact <"$console_file" | sed 's/^/  /'
        return 0
    fi
    echo "! The Web console did not open (exit $console_status):"
    nl2sh_redact <"$console_file" | sed 's/^/  /'
    echo "  From a root shell: nl2sh --config $NL2SH_CONFIG web login"
    return 1
}

# The owner's console: status, URLs and the pending approvals, to approve or reject.
open_console() {
    # KernelSU and APatch set these for every module script; their managers show a
    # module's webroot/ themselves.
    if [ "${KSU:-}" = true ] || [ "${APATCH:-}" = true ]; then
        echo "Console: open nl2sh's WebUI in your manager (Modules, nl2sh, WebUI) for the"
        echo "  status, the URLs and the pending approvals, to approve or reject them."
        return 0
    fi
    if pm path "$NL2SH_WEBUIX_PACKAGE" </dev/null >/dev/null 2>&1; then
        # `am start` says "Error" on a failed start, and not always with an exit status.
        if webuix_out=$(am start -n "$NL2SH_WEBUIX_ACTIVITY" -e MOD_ID "$NL2SH_MODULE_ID" </dev/null 2>&1) &&
            ! printf '%s\n' "$webuix_out" | grep -q Error; then
            echo "Console: opened nl2sh's WebUI in WebUI X."
            return 0
        fi
        echo "! WebUI X did not open nl2sh's WebUI; opening the Web console instead."
    fi
    open_web_console
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
trap 'rm -f "$status_file" "${start_file:-}" "${console_file:-}"' EXIT

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
        nl2sh_sleep 1
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
echo
# The status above is what this button is for: a console that does not open is said,
# not a failure of the Action.
open_console
exit 0
