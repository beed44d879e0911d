# shellcheck shell=sh
# Sourced (not run) by the root manager's installer after it extracted the zip into
# $MODPATH and applied default permissions; it provides MODPATH, ARCH, API, IS64BIT,
# BOOTMODE, ui_print, abort and set_perm, and runs this in BusyBox ash. Errors go
# through abort, never exit, so the installer can clean up (Magisk docs/guides.md
# "Customization" and "Notes"; KernelSU website/docs/guide/module.md "Customization";
# APatch docs/apm-guide.md "Customization").
#
# Checks that this zip's binary fits the device, makes it executable, and creates
# /data/adb/nl2sh (0700) with a default config.toml (0600) only when there is none: an
# upgrade never touches the owner's configuration. Nothing here reads or prints a token.

# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$MODPATH/lib.sh"

nl2sh_bin=$MODPATH/system/bin/nl2sh

# The ABI a static Linux executable is built for, from its ELF header (e_ident, then
# e_machine at byte 18): arm64-v8a, x86_64, or unknown. The binary says which zip this is.
nl2sh_elf_abi() {
    if [ "$(dd if="$1" bs=1 count=4 2>/dev/null)" != "$(printf '\177ELF')" ] ||
        [ "$(dd if="$1" bs=1 skip=4 count=1 2>/dev/null)" != "$(printf '\002')" ]; then
        echo unknown
        return
    fi
    case "$(dd if="$1" bs=1 skip=18 count=1 2>/dev/null)" in
    "$(printf '\267')") echo arm64-v8a ;; # EM_AARCH64 (183)
    '>') echo x86_64 ;;                   # EM_X86_64 (62)
    *) echo unknown ;;
    esac
}

nl2sh_version=$(sed -n 's/^version=//p' "$MODPATH/module.prop")

# The device's primary ABI. The installers derive ARCH (arm, arm64, x86, x64, riscv64)
# from the same property; it is the fallback if getprop says nothing.
nl2sh_device_abi=$(getprop ro.product.cpu.abi 2>/dev/null)
if [ -z "$nl2sh_device_abi" ]; then
    case "${ARCH:-}" in
    arm64) nl2sh_device_abi=arm64-v8a ;;
    x64) nl2sh_device_abi=x86_64 ;;
    *) nl2sh_device_abi=${ARCH:-unknown} ;;
    esac
fi

if [ ! -f "$nl2sh_bin" ]; then
    abort "! This zip holds no system/bin/nl2sh; build it with packaging/build."
fi
nl2sh_zip_abi=$(nl2sh_elf_abi "$nl2sh_bin")
case "$nl2sh_device_abi" in
arm64-v8a | x86_64) ;;
*)
    abort "! Unsupported device ABI '$nl2sh_device_abi': nl2sh runs on 64-bit arm64-v8a and x86_64 Android only."
    ;;
esac
if [ "$nl2sh_zip_abi" = unknown ]; then
    abort "! system/bin/nl2sh is not an arm64-v8a or x86_64 executable; the zip is damaged."
fi
if [ "$nl2sh_zip_abi" != "$nl2sh_device_abi" ]; then
    abort "! This zip holds the $nl2sh_zip_abi build but this device is $nl2sh_device_abi: install nl2sh-$nl2sh_version-$nl2sh_device_abi.zip instead."
fi

ui_print "- nl2sh $nl2sh_version ($nl2sh_zip_abi)"
# Root-owned, executable by all (root shells find it on PATH as /system/bin/nl2sh), in the
# system_file context the manager gives module files (set_perm's default).
set_perm "$nl2sh_bin" 0 0 0755 || abort "! Cannot set the permissions of $nl2sh_bin"

# The data directory: private to root whether new or left by an earlier install.
if [ ! -d "$NL2SH_DATA_DIR" ]; then
    (umask 077 && mkdir -p "$NL2SH_DATA_DIR") || abort "! Cannot create $NL2SH_DATA_DIR"
fi
chmod 0700 "$NL2SH_DATA_DIR" || abort "! Cannot make $NL2SH_DATA_DIR private"

if [ -e "$NL2SH_CONFIG" ] || [ -L "$NL2SH_CONFIG" ]; then
    # Never rewritten; only made private if it was not (it may hold protocol_token).
    chmod go-rwx "$NL2SH_CONFIG" 2>/dev/null
    ui_print "- Kept your configuration: $NL2SH_CONFIG"
else
    # Written beside the target and renamed, so no partial file is ever seen.
    nl2sh_new_config=$NL2SH_DATA_DIR/.config.toml.new.$$
    if (umask 077 && cp "$MODPATH/config.default.toml" "$nl2sh_new_config") &&
        chmod 0600 "$nl2sh_new_config" &&
        mv -f "$nl2sh_new_config" "$NL2SH_CONFIG"; then
        ui_print "- Wrote the default configuration: $NL2SH_CONFIG"
        ui_print "  (MCP/A2A on port 8765 from boot; edit it, then press Action or reboot)"
    else
        rm -f "$nl2sh_new_config"
        abort "! Cannot write $NL2SH_CONFIG"
    fi
fi

if [ "${KSU:-}" = true ]; then
    ui_print "- KernelSU: /system/bin/nl2sh is on PATH only with a mounting metamodule"
    ui_print "  (meta-overlayfs); the service runs without one. Otherwise use"
    ui_print "  /data/adb/modules/nl2sh/system/bin/nl2sh."
fi
ui_print "- Reboot to start the service (an upgrade keeps the running one until then)."
ui_print "- After boot, press Action for the status, the MCP/A2A URLs and the console"
ui_print "  (nl2sh's WebUI in KernelSU/APatch/WebUI X, else the Web console)."
ui_print "- The access token is never shown here; as root, read it from"
ui_print "  $NL2SH_SERVICE_LOG"
