//! Lines that were assessed read-only but did something else, by class: none of them may
//! be read-only now.

use nl2sh_proto::channels::RiskLevel::{Critical, Dangerous, High, Low, Medium};

use super::super::Protected;
use super::{check_rows, Want, Want::Is, Want::Min};

/// 1. GNU long-option prefixes are the options they abbreviate.
const ABBREVIATIONS: &[(&str, Want)] = &[
    ("sed --i 's/a/b/' FILE", Min(Medium)),
    ("sed --in 's/a/b/' FILE", Min(Medium)),
    ("sed --in-place=.bak 's/a/b/' /system/x", Min(Dangerous)),
    ("sort --o=FILE f", Min(Low)),
    ("sort --o FILE f", Min(Low)),
    ("sort --out=/system/x f", Min(Dangerous)),
    ("sort --compress=sh f", Min(High)),
    ("sort --compress-prog=sh f", Min(High)),
    ("tar --to-c=sh -tf a.tar", Min(High)),
    ("tar -tf a.tar --to-comm=sh", Min(High)),
    ("tar --use-comp=sh -tf a.tar", Min(High)),
    ("tar --checkpoint-a=exec=sh -tf a.tar", Min(High)),
    ("tar --lis --to-c=sh -f a.tar", Min(High)),
    ("date --se='2024-01-01'", Min(High)),
    ("dmesg --cl", Min(Medium)),
    ("dmesg --read-c", Min(Medium)),
    ("hostname --fi=/etc/hostname", Min(High)),
    ("mount --al", Min(High)),
    ("ss --ki", Min(High)),
    ("sysctl --wr kernel.x=1", Min(High)),
    ("sysctl --lo", Min(High)),
    ("less --log-f=/tmp/x f", Min(Low)),
    ("less --lesskey-s=/tmp/k f", Min(High)),
    ("env --sp='rm -rf /'", Is(Critical)),
    ("rm --rec --force /", Is(Critical)),
    ("chmod --rec 777 /", Min(Dangerous)),
    ("env - rm -rf /", Is(Critical)),
    ("timeout --sig=KILL 5 rm -rf /", Is(Critical)),
    ("iptables --list-r --modp=/tmp/x", Min(High)),
    // Ambiguous prefixes are not understood.
    ("iptables --li", Min(Medium)),
    ("tar --new -tf x", Min(Medium)),
];

/// 2. An option a known program does not have is not understood.
const UNKNOWN_OPTIONS: &[(&str, Want)] = &[
    ("sed --x 's/a/b/' f", Min(Medium)),
    ("cat --frobnicate f", Min(Medium)),
    ("ls -/ x", Min(Medium)),
    ("grep -Y foo f", Min(Medium)),
    ("head --sandbox f", Min(Medium)),
    ("logcat --cl", Min(Medium)),
    ("dumpsys -o /x", Min(Medium)),
    ("getprop -x", Min(Medium)),
    ("find . -frobnicate", Min(Medium)),
    ("find . -name x -newerXY y", Min(Medium)),
    ("env --foo ls", Min(Medium)),
    ("sort $OPTS f", Min(Medium)),
    ("sort * ", Min(Medium)),
    ("find \"$d\" -name x", Min(Medium)),
    ("tar -tf \"$f\"", Min(Medium)),
    ("ip -frob addr", Min(Medium)),
];

/// 3. Options, variables and scripts that run programs or write files.
const RUNNERS: &[(&str, Want)] = &[
    ("tar --checkpoint-action=exec=sh -tf a.tar", Min(High)),
    ("tar --to-command=sh -tf a.tar", Min(High)),
    ("tar --use-compress-program=sh -tf a.tar", Min(High)),
    ("tar -I sh -tf a.tar", Min(High)),
    ("tar tIf sh a.tar", Min(High)),
    ("tar --info-script=x -tf a.tar", Min(High)),
    ("tar -F x -tf a.tar", Min(High)),
    ("tar --new-volume-script=x -tf a.tar", Min(High)),
    ("tar --rsh-command=x -tf a.tar", Min(High)),
    ("tar -tf host:a.tar", Min(High)),
    ("tar -tMf a.tar", Min(High)),
    ("tar -tf a.tar --index-file=/system/x", Min(Dangerous)),
    ("TAR_OPTIONS=--to-command=sh tar -tf a.tar", Min(High)),
    ("sort --compress-program=sh f", Min(High)),
    ("find . -exec rm {} \\;", Min(High)),
    ("find . -execdir rm {} +", Min(High)),
    ("find . -ok rm {} \\;", Min(High)),
    ("find . -okdir rm {} \\;", Min(High)),
    ("find . -fprint /tmp/x", Min(Low)),
    ("find . -fprintf /tmp/x %p", Min(Low)),
    ("find . -fls /tmp/x", Min(Low)),
    ("find . -delete", Min(Dangerous)),
    ("find /etc -exec cat {} +", Min(Medium)),
    ("rsync -e sh a b", Min(High)),
    ("git -c core.pager=sh log", Min(High)),
    ("git --exec-path=/tmp log", Min(High)),
    ("git -c alias.x='!sh' x", Min(High)),
    ("LESSOPEN='|sh %s' less f", Min(High)),
    ("LESSOPEN='|rm -rf / %s' less f", Is(Critical)),
    ("LESSCLOSE='x %s %s' less f", Min(High)),
    ("LESSEDIT=x less f", Min(High)),
    ("VISUAL=x less f", Min(High)),
    ("EDITOR=x less f", Min(High)),
    ("env LESSOPEN='|x %s' less f", Min(High)),
    ("export LESSOPEN='|x %s'; less f", Min(High)),
    ("PAGER=x man ls", Min(High)),
    ("MANPAGER=x man ls", Min(High)),
    ("GIT_PAGER=x git log", Min(High)),
    ("PAGER=x git log", Min(High)),
    ("GIT_EXTERNAL_DIFF=x git diff", Min(High)),
    ("GIT_SSH_COMMAND=x git fetch", Min(High)),
    (
        "GIT_CONFIG_KEY_0=core.pager GIT_CONFIG_VALUE_0=x git log",
        Min(High),
    ),
    ("less '+!id' f", Min(Medium)),
    ("less -k /tmp/keys f", Min(High)),
    ("awk 'BEGIN { system(\"id\") }'", Min(High)),
    ("awk '{ print | \"sh\" }' f", Min(High)),
    ("awk '{ print > \"/tmp/x\" }' f", Min(Low)),
    ("awk '{ print > \"/system/x\" }' f", Min(Dangerous)),
    (
        "awk 'BEGIN { while ((getline l < \"/etc/shadow\") > 0) print l }'",
        Min(Medium),
    ),
    ("awk -e 'BEGIN { system(\"id\") }'", Min(High)),
    ("gawk -l x 'BEGIN {}'", Min(High)),
    ("awk '@load \"x\"; BEGIN {}'", Min(High)),
    ("sed e f", Min(High)),
    ("sed '1e rm -rf /' f", Is(Critical)),
    ("sed 's/a/b/e' f", Min(High)),
    ("sed 'w /tmp/x' f", Min(Low)),
    ("sed 'W /system/x' f", Min(Dangerous)),
    ("sed 's/a/b/w /tmp/x' f", Min(Low)),
    ("sed 'r /etc/shadow' f", Min(Medium)),
    ("gdb -batch -ex run x", Min(High)),
    ("vim -c '!id'", Min(High)),
    ("perl -pe 's/a/b/' f", Min(High)),
    ("xargs -a /etc/shadow echo", Min(Medium)),
    ("time -o /etc/passwd ls", Min(Dangerous)),
    ("time --out=/etc/passwd ls", Min(Dangerous)),
    ("sudo -e /etc/hosts", Min(High)),
    ("mapfile -C 'rm -rf /' -c 1 < f", Min(High)),
    ("jq -n --rawfile x /etc/shadow '$x'", Min(Medium)),
    ("jq -n --slurpfile x /etc/shadow '$x'", Min(Medium)),
];

/// 4. Here-documents end where the shell ends them.
const HERE_DOCUMENTS: &[(&str, Want)] = &[
    ("cat <<E\\OF\nEOF\ntouch /tmp/x\nE\\OF", Min(Low)),
    ("cat <<'EOF'\nEOF\nreboot\n'EOF'", Min(Dangerous)),
    ("cat <<\"EOF\"\nEOF\nreboot\n\"EOF\"", Min(Dangerous)),
    ("cat <<E\"O\"F\nEOF\nreboot\nE\"O\"F", Min(Dangerous)),
    ("cat <<\\EOF\nEOF\nreboot\n\\EOF", Min(Dangerous)),
    ("cat <<-EOF\n  x\n  EOF\nreboot", Min(Medium)),
    ("cat <<-EOF\n\tx\n\tEOF\nreboot", Min(Dangerous)),
    ("cat <<A <<B\na\nA\nb\nB\nreboot", Min(Dangerous)),
    ("cat <<A <<B\na\nB\nA\nb\nreboot", Min(Medium)),
    ("cat <<EOF\nx\nreboot", Min(Medium)),
    ("cat <<$X\nx\n$X", Min(Medium)),
    ("cat <<EOF\nx\\\nEOF\nEOF", Min(Medium)),
    ("cat <<EOF\n$(reboot)\nEOF", Min(Dangerous)),
    ("sh <<E\\OF\nreboot\nEOF", Min(Dangerous)),
];

/// 5. After an alias, a function or a changed `PATH`, later names are unknown.
const UNKNOWABLE: &[(&str, Want)] = &[
    ("alias ls=cat; ls", Min(Medium)),
    ("alias; ls", Min(Medium)),
    ("unalias -a; ls", Min(Medium)),
    ("f() { :; }; ls", Min(Medium)),
    ("function f { :; }; ls", Min(Medium)),
    ("PATH=/tmp; ls", Min(Medium)),
    ("PATH=/tmp ls", Min(Medium)),
    ("PATH+=:/tmp; ls", Min(Medium)),
    ("PATH[0]=/tmp; ls", Min(Medium)),
    ("IFS=/; ls", Min(Medium)),
    ("ENV=/tmp/x; ls", Min(Medium)),
    ("CDPATH=/tmp; ls", Min(Medium)),
    ("LD_LIBRARY_PATH=/tmp; ls", Min(Medium)),
    ("LD_FOO=1; ls", Min(Medium)),
    ("SHELLOPTS=x; ls", Min(Medium)),
    ("BASHOPTS=x; ls", Min(Medium)),
    ("PS4='$(id)'; ls", Min(Medium)),
    ("PROMPT_COMMAND=id; ls", Min(Medium)),
    ("HOME=/etc; cat ~/shadow", Min(Medium)),
    ("MYPATH=/tmp; ls", Min(Medium)),
    ("export PATH=/tmp; ls", Min(Medium)),
    ("readonly PATH=/tmp; ls", Min(Medium)),
    ("local PATH=/tmp; ls", Min(Medium)),
    ("declare PATH=/tmp; ls", Min(Medium)),
    ("typeset -x PATH=/tmp; ls", Min(Medium)),
    ("declare -n r=PATH; r=/tmp; ls", Min(Medium)),
    ("for PATH in /tmp; do ls; done", Min(Medium)),
    ("echo /tmp | { read PATH; ls; }", Min(Medium)),
    ("read -a PATH; ls", Min(Medium)),
    ("read $X; ls", Min(Medium)),
    ("mapfile PATH < x; ls", Min(Medium)),
    ("readarray -t PATH < x; ls", Min(Medium)),
    ("getopts ab PATH; ls", Min(Medium)),
    ("printf -v PATH /tmp; ls", Min(Medium)),
    ("wait -p PATH; ls", Min(Medium)),
    ("unset PATH; ls", Min(Medium)),
    ("eval PATH=/tmp; ls", Min(Medium)),
    ("eval \"$X\"; ls", Min(High)),
    ("source ./x; ls", Min(Medium)),
    (". ./x; ls", Min(Medium)),
    ("hash -p /tmp/x ls; ls", Min(Medium)),
    ("enable -n echo; echo", Min(Medium)),
    ("enable -f /tmp/x.so ls; ls", Min(High)),
    ("shopt -s expand_aliases; ls", Min(Medium)),
    ("set -k; ls LD_PRELOAD=/tmp/x.so", Min(Medium)),
    ("echo ${PATH:=/tmp}; ls", Min(Medium)),
    ("let PATH=1; ls", Min(Medium)),
    ("let 'IFS += 1'; ls", Min(Medium)),
    (": $((IFS = 1)); ls", Min(Medium)),
    ("while true; do ls; PATH=/tmp; done", Min(Medium)),
    ("trap 'ls' EXIT; PATH=/tmp", Min(Medium)),
];

/// 6. A mode flag inside another option's value is not that flag.
const FLAG_IN_VALUE: &[(&str, Want)] = &[
    ("gzip -S -c FILE", Min(Low)),
    ("gzip -Sc FILE", Min(Low)),
    ("gzip --suffix -c FILE", Min(Low)),
    ("tar -f -t x", Min(Medium)),
    ("tar -ft x", Min(Medium)),
    ("sort -o -c f", Min(Low)),
    ("sort -oc f", Min(Low)),
    ("crontab -u -l", Min(High)),
    ("unzip -d -l x.zip", Min(Medium)),
    ("env -iS'rm -rf /'", Is(Critical)),
    ("xxd f /system/x", Min(Dangerous)),
    ("uniq f /system/x", Min(Dangerous)),
];

/// 7. Subcommands as the program reads them (iproute2 takes prefixes, in its order).
const SUBCOMMANDS: &[(&str, Want)] = &[
    ("ip link s lo down", Min(High)),
    ("ip l s lo down", Min(High)),
    ("ip a a 10.0.0.1/24 dev lo", Min(High)),
    ("ip a d 10.0.0.1/24 dev lo", Min(High)),
    ("ip a f dev lo", Min(High)),
    ("ip r d default", Min(High)),
    ("ip r a default via 10.0.0.1", Min(High)),
    ("ip n f all", Min(High)),
    ("ip ro rep default via 10.0.0.1", Min(High)),
    ("ip addr restore", Min(High)),
    ("ip netns exec x rm -rf /", Is(Critical)),
    ("ip -all netns exec reboot", Min(Dangerous)),
    ("ip vrf exec x reboot", Min(Dangerous)),
    ("ip -b /tmp/cmds", Min(High)),
    ("ip -force -batch /tmp/cmds", Min(High)),
    ("ip xfrm state flush", Min(High)),
    ("ip link property add dev lo altname x", Min(High)),
    ("ip frob", Min(High)),
    ("ip link frob", Min(High)),
    ("ip $CMD", Min(High)),
    ("pm LIST packages", Min(High)),
    ("pm lis packages", Min(High)),
    ("pm install x.apk", Min(High)),
    ("settings PUT global x 1", Min(High)),
    ("settings put global x 1", Min(High)),
    ("systemctl stat x", Min(High)),
    ("systemctl -H host status x", Min(High)),
    ("service call x 1", Min(High)),
    ("svc wifi disable", Min(High)),
    ("cmd wifi set-wifi-enabled disabled", Min(Medium)),
    ("dumpsys battery set level 5", Min(Medium)),
    ("dumpsys batterystats --reset", Min(Medium)),
    ("dumpsys deviceidle whitelist +x", Min(Medium)),
    ("dumpsys $X", Min(Medium)),
    ("iptables -L -Z", Min(Medium)),
    ("iptables -nL -F", Min(High)),
    ("sfdisk -l --delete /dev/sda 1", Is(Critical)),
    ("fastboot -w devices", Is(Critical)),
    ("fastboot getvar all --set-active=b", Min(Dangerous)),
    ("parted -l /dev/sda rm 1", Is(Critical)),
    ("blockdev --getro --setrw /dev/block/sda", Min(High)),
    ("nmcli dev", Min(Medium)),
    ("bluetoothctl show", Min(Medium)),
];

/// 8. Programs that write, delete or run things.
const WRITERS: &[(&str, Want)] = &[
    ("install -m 755 x /usr/bin/y", Min(Dangerous)),
    ("shred f", Min(High)),
    ("truncate -s 0 f", Min(Medium)),
    ("split f", Min(Low)),
    ("csplit f 1", Min(Low)),
    ("tee f", Min(Low)),
    ("dd of=f", Min(Low)),
    ("ln -s a b", Min(Low)),
    ("mkfifo p", Min(Low)),
    ("mknod n c 1 1", Min(High)),
    ("touch f", Min(Low)),
    ("cp a b", Min(Low)),
    ("mv a b", Min(Low)),
    ("rsync a b", Min(Medium)),
    ("patch -p1", Min(Medium)),
    ("unzip x.zip", Min(Medium)),
    ("7z x a.7z", Min(Medium)),
    ("zip a.zip f", Min(Low)),
    ("bzip2 f", Min(Low)),
    ("xz f", Min(Low)),
    ("zstd f", Min(Low)),
    ("lz4 f", Min(Low)),
    ("sqlite3 db", Min(High)),
    ("git commit -m x", Min(Medium)),
    ("git status", Min(Medium)),
    ("ed f", Min(High)),
    ("ex f", Min(High)),
    ("perl -i -pe 's/a/b/' f", Min(High)),
    ("python3 -c 'x'", Min(High)),
    ("node -e x", Min(High)),
    ("curl -o f https://example.com", Min(Medium)),
    ("curl -O https://example.com/f", Min(Medium)),
    ("curl --output f https://example.com", Min(Medium)),
    ("curl --out=/system/x https://example.com", Min(Dangerous)),
    ("wget https://example.com", Min(Medium)),
    ("openssl req -out /system/x", Min(Dangerous)),
    ("base64 -d < in > f", Min(Low)),
    ("logger x", Min(Low)),
    ("wall x", Min(Low)),
    ("write u", Min(Low)),
    ("setprop a b", Min(High)),
    ("settings put a b c", Min(High)),
    ("cmd x set y", Min(Medium)),
    ("resetprop a b", Min(High)),
    ("chcon u:r:x:s0 f", Min(Medium)),
    ("restorecon -R /data", Min(Medium)),
    ("setenforce 0", Is(Critical)),
    ("svc data disable", Min(High)),
    ("input tap 1 1", Min(Low)),
    ("am start -n x/.Y", Min(Low)),
    ("pm clear x", Min(High)),
    ("monkey 10", Min(Low)),
    ("screencap -p /sdcard/x.png", Min(Low)),
    ("uiautomator dump /sdcard/x.xml", Min(Low)),
    ("logcat -f /sdcard/x", Min(Low)),
    ("logcat --file=/sdcard/x", Min(Low)),
    ("dos2unix f", Min(Low)),
    ("foo", Min(Medium)),
];

/// 9. Secrets named indirectly.
const SECRETS: &[(&str, Want)] = &[
    ("f=/etc/shadow; cat \"$f\"", Min(Medium)),
    ("cat ${F}", Min(Medium)),
    ("cat $1", Min(Medium)),
    ("cat /etc/shado[w]", Min(Medium)),
    ("cat /etc/sha*", Min(Medium)),
    ("cat /etc/s?adow", Min(Medium)),
    ("cat /root/.ssh/id_*", Min(Medium)),
    ("cat /home/*/.ssh/id_rsa", Min(Medium)),
    ("cd /etc && cat shadow", Min(Medium)),
    ("cd /root; cat .ssh/id_rsa", Min(Medium)),
    ("cat shadow", Min(Medium)),
    ("cat .ssh/id_ed25519", Min(Medium)),
    ("cd \"$D\" && cat x", Min(Medium)),
    ("cat ../../etc/shadow", Min(Medium)),
    ("cat /proc/self/root/etc/shadow", Min(Medium)),
    ("cat /proc/1/root/etc/shadow", Min(Medium)),
    ("cat /proc/1/task/1/root/etc/shadow", Min(Medium)),
    ("cat /proc/thread-self/root/etc/shadow", Min(Medium)),
    ("cat /proc/*/cwd/x", Min(Medium)),
    ("cd /etc; cat /proc/self/cwd/shadow", Min(Medium)),
    ("cat //etc//shadow", Min(Medium)),
    ("cat /etc/./shadow", Min(Medium)),
    ("cat /etc/../etc/shadow", Min(Medium)),
    ("cat /tmp/link/../shadow", Min(Medium)),
    ("cat /proc/self/fd/3", Min(Medium)),
    ("cat /dev/fd/3", Min(Medium)),
    ("cat ~root/.ssh/id_rsa", Min(Medium)),
    ("cat $HOME/.ssh/id_rsa", Min(Medium)),
    ("cat ~/.ssh/id_rsa", Min(Medium)),
    ("grep -r token /data/data/com.example", Min(Medium)),
    ("grep x /etc/shadow", Min(Medium)),
    ("grep -f /etc/shadow x", Min(Medium)),
    ("sort --files0-from=/etc/shadow", Min(Medium)),
    ("getent shadow", Min(Medium)),
    ("cat /etc/shadow-", Min(Medium)),
    ("echo $(< /etc/shadow)", Min(Medium)),
    ("find / -name x | xargs cat", Min(Medium)),
    ("for f in /etc/*; do cat $f; done", Min(Medium)),
    ("for i in 1 2; do cat $f; f=/etc/shadow; done", Min(Medium)),
    // A `cd` that may fail, may not run, or runs in a subshell leaves the old directory.
    ("cd /nonexistent; cat shadow", Min(Medium)),
    ("cd /sdcard; cd /etc; cd /sdcard; cat shadow", Min(Medium)),
    ("if false; then cd /sdcard; fi; cat shadow", Min(Medium)),
    ("(cd /sdcard); cat shadow", Min(Medium)),
    ("echo $(cd /sdcard); cat shadow", Min(Medium)),
    ("cd /sdcard | true; cat shadow", Min(Medium)),
    ("trap 'cd /sdcard' EXIT; cat shadow", Min(Medium)),
    ("cd .gnupg && cat x", Min(Medium)),
    ("cd .ssh; cat id_rsa", Min(Medium)),
    // A variable assigned again may keep either value.
    (
        "X=/etc/shadow; if false; then X=/tmp/a; fi; cat $X",
        Min(Medium),
    ),
    ("X=/etc/shadow; true || X=/tmp/a; cat $X", Min(Medium)),
    ("(X=/tmp/a); cat $X", Min(Medium)),
];

/// 10. Anything that may outlive the call.
const BACKGROUND: &[(&str, Want)] = &[
    ("ls &", Min(Low)),
    ("ls & wait", Min(Low)),
    ("(ls &)", Min(Low)),
    ("{ ls & }", Min(Low)),
    ("nohup ls", Min(Low)),
    ("setsid ls", Min(Low)),
    ("coproc ls", Min(Low)),
    ("disown", Min(Low)),
    ("daemonize /bin/ls", Min(Medium)),
    ("start-stop-daemon -S -x /bin/ls", Min(High)),
    ("echo ls | at now", Min(Medium)),
    ("echo ls | batch", Min(Medium)),
    ("echo '* * * * * ls' | crontab -", Min(High)),
    ("systemd-run ls", Min(High)),
    ("screen -dm ls", Min(Medium)),
    ("tmux new -d ls", Min(Medium)),
];

/// Every table above, for checks that hold for any line.
pub(super) const ALL: &[&[(&str, Want)]] = &[
    ABBREVIATIONS,
    UNKNOWN_OPTIONS,
    RUNNERS,
    HERE_DOCUMENTS,
    UNKNOWABLE,
    FLAG_IN_VALUE,
    SUBCOMMANDS,
    WRITERS,
    SECRETS,
    BACKGROUND,
];

#[test]
fn abbreviations() {
    check_rows(ABBREVIATIONS, &Protected::default());
}

#[test]
fn unknown_options() {
    check_rows(UNKNOWN_OPTIONS, &Protected::default());
}

#[test]
fn runners() {
    check_rows(RUNNERS, &Protected::default());
}

#[test]
fn here_documents() {
    check_rows(HERE_DOCUMENTS, &Protected::default());
}

#[test]
fn unknowable_names() {
    check_rows(UNKNOWABLE, &Protected::default());
}

#[test]
fn flags_in_values() {
    check_rows(FLAG_IN_VALUE, &Protected::default());
}

#[test]
fn subcommands() {
    check_rows(SUBCOMMANDS, &Protected::default());
}

#[test]
fn writers() {
    check_rows(WRITERS, &Protected::default());
}

#[test]
fn secrets() {
    check_rows(SECRETS, &Protected::default());
}

#[test]
fn background() {
    check_rows(BACKGROUND, &Protected::default());
}
