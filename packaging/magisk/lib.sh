# shellcheck shell=sh
# shellcheck disable=SC2034 # the variables are for the scripts that source this
# Shared by the module's scripts (sourced, never run). POSIX sh: the root managers run
# every module script in their BusyBox `ash` with ASH_STANDALONE=1 (Magisk docs/guides.md
# "BusyBox"; KernelSU website/docs/guide/module.md "BusyBox"; APatch docs/apm-guide.md
# "BusyBox"), and a root shell may run them with Android's mksh and toybox.
#
# Every name here starts with nl2sh_ / NL2SH_: customize.sh is sourced into the manager's
# installer shell, whose own variables (ABI, ARCH, MODPATH, TMPDIR, ...) must stay intact.
#
# Environment, for tests only (a device never sets them):
#   NL2SH_DATA_DIR       the data directory instead of /data/adb/nl2sh
#   NL2SH_BUSYBOX_PATHS  the busybox candidates instead of the three managers' paths
#                        (space-separated; empty means none)
#   NL2SH_SLEEP          the program that waits instead of `sleep` (a test's, which
#                        records the waits: the managers' standalone ash runs its own
#                        `sleep` applet before any `sleep` on PATH)

NL2SH_DATA_DIR=${NL2SH_DATA_DIR:-/data/adb/nl2sh}
NL2SH_CONFIG=$NL2SH_DATA_DIR/config.toml
# The script log of this module; the service writes its own log (below).
NL2SH_MODULE_LOG=$NL2SH_DATA_DIR/module.log
# Written by the service itself (0600): its startup block, with the token when generated.
NL2SH_SERVICE_LOG=$NL2SH_DATA_DIR/config.service/service.log
# module.log is rotated once it grows past this, so a device that boots for years keeps
# it small.
NL2SH_MODULE_LOG_MAX_BYTES=262144

# Re-run the calling script under a root manager's busybox in standalone mode unless it
# already runs there: the manager's busybox has every applet these scripts use, while the
# toybox of an old Android may lack one. Call as: nl2sh_use_manager_busybox "$0" "$@".
nl2sh_use_manager_busybox() {
    if [ "${ASH_STANDALONE:-}" = 1 ]; then
        return 0
    fi
    for nl2sh_bb in ${NL2SH_BUSYBOX_PATHS-/data/adb/magisk/busybox /data/adb/ksu/bin/busybox /data/adb/ap/bin/busybox}; do
        if [ -x "$nl2sh_bb" ]; then
            ASH_STANDALONE=1
            export ASH_STANDALONE
            exec "$nl2sh_bb" sh "$@"
        fi
    done
    # No manager busybox (a custom ROM, or a test): the system shell and toybox will do.
    return 0
}

# Wait $1 seconds.
nl2sh_sleep() {
    "${NL2SH_SLEEP:-sleep}" "$1"
}

# Output of nl2sh with anything shaped like a credential replaced: a run of 32 or more
# token characters (the generated token is 64 hex digits), and whatever follows
# `#login=` (a Web console login link works once, but it is a login while it lasts). URLs
# and paths never have such a run, since dots, colons and slashes break it. Used on every
# nl2sh output a script logs or shows, in case a version prints more than it promises.
nl2sh_redact() {
    sed -E -e 's/#login=[^[:space:]]*/#login=[redacted]/g' -e 's/[A-Za-z0-9_-]{32,}/[redacted]/g'
}

# One timestamped line in module.log, which stays private (0600) whoever created it.
nl2sh_log() {
    if [ ! -d "$NL2SH_DATA_DIR" ]; then
        return 0
    fi
    (
        umask 077
        printf '%s %s\n' "$(date '+%Y-%m-%d %H:%M:%S')" "$*" >>"$NL2SH_MODULE_LOG"
    )
    chmod 0600 "$NL2SH_MODULE_LOG" 2>/dev/null
    return 0
}

# Append a file of nl2sh output to module.log, redacted and indented.
nl2sh_log_output() {
    if [ -s "$1" ] && [ -d "$NL2SH_DATA_DIR" ]; then
        (
            umask 077
            nl2sh_redact <"$1" | sed 's/^/    /' >>"$NL2SH_MODULE_LOG"
        )
    fi
}

# Keep one previous module.log and start a new one once it is large.
nl2sh_rotate_log() {
    if [ -f "$NL2SH_MODULE_LOG" ] &&
        [ "$(wc -c <"$NL2SH_MODULE_LOG")" -gt "$NL2SH_MODULE_LOG_MAX_BYTES" ]; then
        mv -f "$NL2SH_MODULE_LOG" "$NL2SH_MODULE_LOG.1"
    fi
}

# A private temporary file in the data directory for the output of one nl2sh command
# (a file, not a pipe: a started service that kept an inherited pipe open would make a
# command substitution wait for ever).
nl2sh_tmp_output() {
    nl2sh_tmp="$NL2SH_DATA_DIR/.$1.$$"
    (
        umask 077
        : >"$nl2sh_tmp"
    ) || return 1
    printf '%s\n' "$nl2sh_tmp"
}
