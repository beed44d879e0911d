#!/bin/sh
# The checks of one scripts/kernel-test guest, run by /init as root. Every check prints
#   KT RESULT <name> PASS|FAIL <detail>
# on the serial console; scripts/kernel-test collects them. Other lines: KT INFO (what
# the guest reports: kernel, Landlock ABI, nl2sh_inspect's sandbox and netd objects),
# KT TIME (seconds since boot), KT LOG (a log's tail after a failure).
#
# The attacker is /usr/bin/lsusb: tests/kernel/kt.c installed under a name nl2sh's
# assessment reads as read-only, standing for any read-only-looking program an attacker
# controls. Its paths are hex-encoded, so the assessment cannot see them either: whatever
# it tries, only the kernel sandbox can stop. Everything talks to 127.0.0.1 only; the
# guest has no other interface.
set -u
KT=/run/kt # the harness's own files: root only, outside every snapshot
mkdir -p -m 0700 $KT
FAILS=0
DENY=${KT_DENY:-}

say() { echo "KT $*"; }
oneline() { tr '\n\r' '  ' | cut -c1-400; }
COUNT=0 # results printed, for the host to compare with what it read
pass() {
  say "RESULT $1 PASS $(echo "${2:-}" | oneline)"
  COUNT=$((COUNT + 1))
}
fail() {
  say "RESULT $1 FAIL $(echo "${2:-}" | oneline)"
  FAILS=$((FAILS + 1)) COUNT=$((COUNT + 1))
}
check() { # name detail command...: PASS when the command succeeds
  name=$1 detail=$2
  shift 2
  if "$@"; then pass "$name" "$detail"; else fail "$name" "$detail"; fi
}
verdict() { # status name detail: PASS when status is 0 (`cond && cond; verdict $? ...`)
  if [ "$1" = 0 ]; then pass "$2" "${3:-}"; else fail "$2" "${3:-}"; fi
}
has() { printf '%s\n' "$2" | grep -Eq -- "$1"; } # ERE text
now() { cut -d' ' -f1 /proc/uptime; }
log_tail() { # file: its last lines, for a failure
  tail -n "${2:-15}" "$1" 2>/dev/null | while IFS= read -r l; do say "LOG $(basename "$1"): $l"; done
}
hex() { printf 'hex:'; printf %s "$1" | od -An -tx1 | tr -d ' \n'; }
json_str() { printf %s "$1" | sed 's/\\/\\\\/g; s/"/\\"/g'; }
wait_for() { # seconds command...: poll until the command succeeds (or answers 3: give up)
  t=$(($1 * 10))
  shift
  while :; do
    "$@" 2>/dev/null
    case $? in 0) return 0 ;; 3) return 3 ;; esac
    t=$((t - 1))
    [ $t -gt 0 ] || return 1
    usleep 100000
  done
}

# ---------- MCP over loopback ----------

INIT='{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"kernel-test","version":"0"}}}'
tool() { # port tool arguments-json: the tools/call response
  kt post "$1" /mcp env \
    "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tools/call\",\"params\":{\"name\":\"$2\",\"arguments\":$3}}"
}
invoke() { # port device-tool arguments-json: nl2sh_invoke's output object
  tool "$1" nl2sh_invoke "{\"tool\":\"$2\",\"arguments\":$3}" | kt json result.structuredContent.output
}
run() { # port command-line: shell.exec, unasked; output object (also kept for the secret scan)
  out=$(invoke "$1" shell.exec "{\"command\":\"$(json_str "$2")\"}")
  printf '%s\n%s\n' "$2" "$out" >>$KT/outputs
  printf '%s' "$out"
}
field() { printf '%s\n' "$1" | kt json "$2" 2>/dev/null; } # json path
initialized() { kt post "$1" /mcp env "$INIT" 2>/dev/null | grep -q '"protocolVersion":"2025-11-25"'; }

SERVE_PID=
start_tree() { # name port config [prefix...]: nl2sh protocol serve in the background
  name=$1 port=$2 config=$3
  shift 3
  "$@" nl2sh --config "$config" protocol serve --host 127.0.0.1 --port "$port" \
    >$KT/$name.out 2>$KT/$name.err &
  SERVE_PID=$!
  wait_for 90 started
}
started() { # the startup block is out, or the process ended (fail at once)
  grep -q 'MCP URL:' $KT/$name.out && return 0
  kill -0 "$SERVE_PID" 2>/dev/null || return 3
  return 1
}
stop_tree() { # name: SIGTERM, wait; true when it exited 0 and no worker is left
  kill -TERM "$SERVE_PID" 2>/dev/null
  wait "$SERVE_PID"
  code=$?
  wait_for 10 no_workers && [ $code = 0 ]
}
workers() { # pids of the workers of $SERVE_PID: "role pid" lines
  for p in /proc/[0-9]*; do
    [ "$(awk '/^PPid:/ {print $2}' $p/status 2>/dev/null)" = "$SERVE_PID" ] || continue
    echo "$(cat $p/comm 2>/dev/null) ${p#/proc/}"
  done
}
worker() { workers | awk -v r="nl2sh-$1" '$1 == r {print $2}'; }
no_workers() { ! grep -qs '^nl2sh' /proc/[0-9]*/comm; }
in_range() { # processes whose uid is in the sandbox range (0x90000000 + 64)
  for p in /proc/[0-9]*; do
    u=$(awk '/^Uid:/ {print $2}' $p/status 2>/dev/null)
    [ -n "$u" ] && [ "$u" -ge 2415919104 ] && [ "$u" -lt 2415919168 ] && echo "${p#/proc/}"
  done
}
# The sandboxes the executor keeps built ahead of its calls (executor/src/sandbox/pool.rs)
# run as uids of the range too, waiting for a call. A process of the range is one only if
# its parent is a sandbox helper (`/proc/self/exe __nl2sh-sandbox`, root) of the tree's
# own executor, it is still the nl2sh executable it was forked as (it has run no command),
# and it waits in read(2) on fd 0 for its call (x86_64 system call 0 in
# /proc/<pid>/syscall). Anything else of the range is what a call left behind.
ppid_of() { awk '/^PPid:/ {print $2}' "/proc/$1/status" 2>/dev/null; }
NL2SH_EXE=$(stat -Lc %d:%i /usr/bin/nl2sh)
ready_sandbox() { # pid
  helper=$(ppid_of "$1")
  [ -n "$helper" ] && [ "$(tr '\0' ' ' 2>/dev/null <"/proc/$helper/cmdline")" = "/proc/self/exe __nl2sh-sandbox " ] &&
    [ "$(awk '/^Uid:/ {print $2}' "/proc/$helper/status" 2>/dev/null)" = 0 ] || return 1
  executor=$(ppid_of "$helper")
  [ "$(cat "/proc/$executor/comm" 2>/dev/null)" = nl2sh-executor ] &&
    [ "$(ppid_of "$executor")" = "$SERVE_PID" ] &&
    [ "$(stat -Lc %d:%i "/proc/$1/exe" 2>/dev/null)" = "$NL2SH_EXE" ] &&
    [ "$(cut -d' ' -f1,2 "/proc/$1/syscall" 2>/dev/null)" = "0 0x0" ]
}
leftovers() { # processes of the range that are no sandbox built ahead: pid:comm:syscall
  for p in $(in_range); do
    ready_sandbox "$p" ||
      echo "$p:$(cat "/proc/$p/comm" 2>/dev/null):$(cut -d' ' -f1 "/proc/$p/syscall" 2>/dev/null)"
  done
}
# A sandbox is also being built (after each call, one replaces the one it took), and is
# then not yet waiting: settled waits until one look finds no leftover (at most $1 s),
# LEFT holding the last look's.
settled() {
  tries=$(($1 * 5))
  while :; do
    LEFT=$(leftovers | tr '\n' ' ')
    [ -z "$LEFT" ] && return 0
    tries=$((tries - 1))
    [ "$tries" -gt 0 ] || return 1
    usleep 200000
  done
}
ready_count() { # sandboxes built ahead and waiting
  n=0
  for p in $(in_range); do ready_sandbox "$p" && n=$((n + 1)); done
  echo $n
}
make_config() { # path extra-lines
  mkdir -p "$(dirname "$1")"
  printf 'protocol_token = "%s"\napproval_timeout_secs = 1\n%s' "$TOKEN" "${2:-}" >"$1"
}

# ---------- the guest: secrets, victims, services ----------

TOKEN=KTSECRET-token-$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n')
export KT_TOKEN=$TOKEN # kt post reads it there: a command line is visible to everyone
printf 'root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\n' >/etc/passwd
printf 'root:x:0:\nshadow:x:42:\nnogroup:x:65534:\n' >/etc/group
echo 'root:KTSECRET-shadow-hash:19000:0:99999:7:::' >/etc/shadow
chown 0:42 /etc/shadow && chmod 0640 /etc/shadow
echo kt-guest >/etc/hostname && hostname kt-guest
mkdir -p -m 0755 /root/.ssh /srv/deploy /data/data/com.example.bank /data/adb /data/shared
chmod 0755 /root /data
echo KTSECRET-ssh-key >/root/.ssh/id_ed25519 && chmod 0644 /root/.ssh/id_ed25519 # a mask's job
echo KTSECRET-deploy-key >/srv/deploy/key && chmod 0600 /srv/deploy/key          # the uid's job
echo KTSECRET-app-token >/data/data/com.example.bank/token && chmod 0644 /data/data/com.example.bank/token
echo original >/data/victim && chmod 0666 /data/victim # world-writable: only the mounts hold it
chmod 0777 /data/shared
echo lock-me >/data/lockme
CONF=/data/adb/nl2sh/config.toml
make_config $CONF
chmod 0755 /data/adb /data/adb/nl2sh && chmod 0644 $CONF # world-readable: only the mask hides it
MODDIR=/lib/modules/$(uname -r)
UINPUT_KO=$(find $MODDIR -name 'uinput.ko*' | head -1)

sleep 100000 &
VICTIM=$!
nc -l -p 9000 >$KT/nc.out 2>&1 &
LISTENER=$!
mkdir -p -m 0755 /run/svc
kt serve-unix /run/svc/service.sock kt-abstract-service >$KT/svc.out 2>&1 &
SERVICE=$!
say "INFO device-segment $(kt ipc-setup 4242)"

# What nl2sh will find (a simulated older kernel has no Landlock system calls).
if [ -n "$DENY" ]; then PREFIX="kt deny $DENY --"; else PREFIX=; fi
LANDLOCK_ABI=$($PREFIX kt landlock-abi)
say "INFO kernel $(uname -r)"
say "INFO landlock_abi $LANDLOCK_ABI"
say "INFO lsm $(cat /sys/kernel/security/lsm 2>/dev/null || echo '?')"
say "INFO userns max_user_namespaces=$(cat /proc/sys/user/max_user_namespaces) unprivileged_userns_clone=$(cat /proc/sys/kernel/unprivileged_userns_clone 2>/dev/null || echo -)"
say "INFO simulated ${DENY:-none}"

snapshot() { # what an unasked command must not change (nl2sh's own state aside)
  dirs="/etc /data /root /srv /tmp /bin /sbin /usr /lib /run/svc /dev"
  { find $dirs -type f -exec stat -c '%n %a %u %g %s %Y' {} + -exec md5sum {} +
    find $dirs ! -type f -exec stat -c '%n %F %a %u %g' {} +
  } 2>/dev/null | grep -Ev '(^| )/(dev/(pts|memcg|cpuset)|data/adb/nl2sh/config\.)' | sort
  echo "hostname $(hostname) $(cat /proc/sys/kernel/hostname)"
  ip -o link | cut -d' ' -f2,3,9
  cut -d' ' -f1 /proc/modules | sort
  cat /proc/sysvipc/shm /proc/sysvipc/msg /proc/sysvipc/sem
  cat /proc/sys/net/ipv4/ip_forward /proc/sys/kernel/sysrq
  cut -d' ' -f2,3,4 /proc/1/mounts
}

# ---------- 1. the binary ----------

say "TIME start $(now)"
v=$(nl2sh --version 2>&1)
has '^nl2sh [0-9]+\.[0-9]+\.[0-9]+$' "$v"
verdict $? version "$v"

# ---------- 2. the tree, MCP, inspect ----------

snapshot >$KT/before
t0=$(now)
# Secrets in the supervisor's environment too (the token wins from there; a model key as
# a configuration would name it): the executor keeps neither, so no command sees them.
if start_tree main 8765 $CONF $PREFIX env NL2SH_PROTOCOL_TOKEN="$TOKEN" OPENAI_API_KEY=KTSECRET-model-key; then
  pass serve-start "$(grep 'MCP URL' $KT/main.out) in $(awk "BEGIN {print $(now) - $t0}")s"
else
  fail serve-start "no startup block"
  log_tail $KT/main.err 30
  say "SUMMARY $COUNT results, $FAILS failed"
  exit 1
fi
w=$(workers | sort | tr '\n' ' ')
[ "$(workers | wc -l)" = 3 ]
verdict $? tree-workers "$w"
netd=$(worker netd)
st=$(grep -E '^(Uid|NoNewPrivs|Seccomp|CapEff|CapBnd):' /proc/$netd/status | tr -s '\t ' ' ' | tr '\n' ' ')
say "INFO netd-status $st"
has 'Uid: 65534 ' "$st" && has 'NoNewPrivs: 1' "$st" && has 'Seccomp: 2' "$st" &&
  has 'CapEff: 0{16}' "$st" && has 'CapBnd: 0{16}' "$st"
verdict $? netd-kernel-view "$st"

r=$(kt post 8765 /mcp env "$INIT" 2>&1)
[ "$(field "$r" result.protocolVersion)" = 2025-11-25 ]
verdict $? mcp-initialize "$(field "$r" result.serverInfo)"
r=$(kt post 8765 /mcp - "$INIT" 2>&1)
has 'HTTP 401' "$r"
verdict $? mcp-no-token-401 "$(echo "$r" | tail -1)"

inspect=$(tool 8765 nl2sh_inspect '{}')
sandbox=$(field "$inspect" result.structuredContent.sandbox)
netdr=$(field "$inspect" result.structuredContent.netd)
say "INFO inspect-sandbox $sandbox"
say "INFO inspect-netd $netdr"
say "INFO inspect-kernel $(field "$inspect" result.structuredContent.os)"
[ "$(field "$sandbox" active)" = true ]
verdict $? sandbox-active "$(field "$sandbox" mount_namespace)"
nseccomp=$(field "$netdr" seccomp)
has '^on \(' "$nseccomp"
verdict $? netd-seccomp "$nseccomp"
# Landlock as the kernel has it: off where the LSM is not active, never claimed beyond.
sl=$(field "$sandbox" landlock)
nl=$(field "$netdr" landlock)
if [ "$LANDLOCK_ABI" = 0 ]; then
  has '^off' "$sl" && has '^off' "$nl"
  verdict $? landlock-reported "kernel ABI 0; sandbox: $sl; netd: $nl"
else
  has '^(on|partial)' "$sl" && has '^(on|partial)' "$nl"
  verdict $? landlock-reported "kernel ABI $LANDLOCK_ABI; sandbox: $sl; netd: $nl"
fi

# ---------- 3. what an unasked command gets ----------

say "TIME sandbox $(now)"
out=$(run 8765 "grep -E '^(Uid|Gid|Groups|CapEff|CapBnd|CapAmb|NoNewPrivs|Seccomp):' /proc/self/status")
st=$(field "$out" stdout | tr -s '\t ' ' ' | tr '\n' ' ')
[ "$(field "$out" sandboxed)" = true ] && has 'Uid: 24159191[0-9]{2} ' "$st" &&
  has 'Groups: +CapEff' "$st" && has 'CapEff: 0{16}' "$st" && has 'CapBnd: 0{16}' "$st" &&
  has 'CapAmb: 0{16}' "$st" && has 'NoNewPrivs: 1' "$st" && has 'Seccomp: 2' "$st"
verdict $? sandbox-identity "$st"
for c in 'ls /' 'cat /proc/cpuinfo' 'ps' 'ip addr' 'df -h /' 'uname -a' 'env'; do
  out=$(run 8765 "$c")
  [ "$(field "$out" sandboxed)" = true ] && [ "$(field "$out" exit_code)" = 0 ]
  verdict $? "everyday-$(echo "$c" | tr ' /' '-_')" "exit $(field "$out" exit_code) $(field "$out" stderr)"
done

# proofs GROUP < table: one unasked call runs every attempt of the table as
# `lsusb @name attempt args @name attempt args ...` (words starting with / hex-encoded);
# a row is `name  want  attempt args`, where want is an ERE over the kernel's error name
# (or `done`: the positive controls). A row passes only if the call ran in the sandbox.
proofs() {
  group=$1
  table=$(cat)
  cmd=lsusb
  while read -r name want attempt; do
    [ -n "$name" ] || continue
    cmd="$cmd @$name"
    for w in $attempt; do
      case "$w" in /*) w=$(hex "$w") ;; esac
      cmd="$cmd $w"
    done
  done <<EOF
$table
EOF
  out=$(run 8765 "$cmd")
  # One awk over the table and the attempts' KTR lines prints every row's result.
  { printf '%s\n' "$table"; echo "--- sandboxed $(field "$out" sandboxed)"; field "$out" stdout; } |
    awk -v group="$group" '
      /^--- sandboxed / { sandboxed = $3; results = 1; next }
      !results && NF >= 3 { order[++n] = $1; want[$1] = $2; next }
      results && /^KTR:/ {
        split($0, f, ":")
        if (!(f[2] in got)) got[f[2]] = (f[3] == "done") ? "done" : f[4]
      }
      END {
        for (i = 1; i <= n; i++) {
          name = order[i]; g = (name in got) ? got[name] : "no-result"
          ok = sandboxed == "true" && g ~ ("^(" want[name] ")$")
          if (ok) print "KT RESULT proof-" name " PASS " g
          else print "KT RESULT proof-" name " FAIL " group ": sandboxed=" sandboxed " got=" g " want=" want[name]
        }
      }' >$KT/proofs
  cat $KT/proofs
  n=$(grep -c ' FAIL ' $KT/proofs)
  FAILS=$((FAILS + n)) COUNT=$((COUNT + $(wc -l <$KT/proofs)))
  [ "$n" = 0 ] || say "LOG proofs-$group: $(printf '%s' "$out" | oneline)"
}

proofs controls <<EOF
scratch-writable     done         scratch
pair-stream          done         pair-stream
netlink-route        done         netlink 0
getlk                done         getlk /data/lockme
EOF
proofs writes <<EOF
write-data           EROFS        write /data/victim
append-data          EROFS        append /data/victim
create-shared        EROFS        write /data/shared/new
write-tmp            EROFS        write /tmp/kt-new
write-devshm         EROFS        write /dev/shm/kt-new
write-etc            EROFS|EACCES write /etc/passwd
write-nl2sh          EROFS|EACCES|ETXTBSY write /usr/bin/nl2sh
write-config         EROFS|EACCES write $CONF
unlink               EROFS        unlink /data/victim
rename               EROFS        rename /data/victim /data/moved
chmod                EROFS|EPERM  chmod /data/victim
chown                EROFS|EPERM  chown /data/victim
truncate             EROFS        truncate /data/victim
mkdir                EROFS        mkdir /data/shared/dir
symlink              EROFS        symlink /data/shared/link
mknod                EROFS|EPERM  mknod /data/shared/node
sysctl               EROFS|EACCES write /proc/sys/kernel/hostname
sysrq                EROFS|EACCES write /proc/sysrq-trigger
sysfs                EROFS|EACCES write /sys/kernel/mm/transparent_hugepage/enabled
block-device         ENOENT       open-write /dev/loop0
console              ENOENT       open-write /dev/console
serial-port          ENOENT       open-write /dev/ttyS0
controlling-tty      ENXIO        open-write /dev/tty
uinput               ENOENT       uinput
dev-mem              ENOENT       read /dev/mem
EOF
proofs secrets <<EOF
read-shadow          EACCES       read /etc/shadow
read-ssh-key         EACCES       read /root/.ssh/id_ed25519
read-app-data        EACCES       read /data/data/com.example.bank/token
read-config          EACCES       read $CONF
read-state-dir       EACCES       opendir /data/adb/nl2sh/config.state
read-private         EACCES       read /srv/deploy/key
read-init-environ    EACCES       read /proc/1/environ
read-via-proc-root   EACCES       read /proc/1/root/etc/shadow
read-supervisor-mem  EACCES|EPERM read /proc/$SERVE_PID/mem
read-netd-fd         EACCES|EPERM read /proc/$netd/fd/0
read-supervisor-env  EACCES       read /proc/$SERVE_PID/environ
read-executor-fd     EACCES|EPERM read /proc/$(worker executor)/fd/0
read-supervisor-cwd  EACCES       opendir /proc/$SERVE_PID/cwd
read-connection      EACCES       read /data/adb/nl2sh/config.state/protocol/connection.json
read-uid-claims      EACCES|ENOENT opendir /run/nl2sh-sandbox-uids
open-by-handle       EPERM        open_by_handle /srv/deploy/key
EOF
# kill 1 inside the call's PID namespace is the call's own init (the kernel ignores it).
proofs signals <<EOF
kill-victim          ESRCH|EPERM  kill $VICTIM
kill-supervisor      ESRCH|EPERM  kill $SERVE_PID
kill-netd            ESRCH|EPERM  kill $netd
kill-init            ESRCH|EPERM|done kill 1
ptrace               ESRCH|EPERM  ptrace $VICTIM
setuid-root          EPERM        setuid0
raise-limit          EPERM        raise-limit
oom-score            EROFS|EACCES write /proc/self/oom_score_adj
cgroup-escape        EROFS|EACCES|ENOENT cgroup-join /sys/fs/cgroup/cgroup.procs
EOF
proofs kill-everything <<EOF
kill-everything      ESRCH|EPERM|done kill-all
EOF
proofs background <<EOF
daemon               done         daemon 777.5
EOF
# Nothing of the calls above is left: every process of the range is a sandbox built ahead
# (at most MAX_AHEAD, 8, of them), waiting for a call.
settled 10
ok=$?
ready=$(ready_count)
[ $ok = 0 ] && [ "$ready" -le 8 ]
verdict $? nothing-outlives-the-call "left: ${LEFT:-none}; sandboxes built ahead and waiting: $ready"
# The control: a process of the range as like a waiting sandbox as can be made from
# outside (the nl2sh executable, reading its plan on fd 0) but not the executor's is a
# leftover. It takes the range's last uid, which the executor leases last.
mkfifo $KT/no-plan
kt as 2415919167 2415919167 -- nl2sh __nl2sh-sandbox <>$KT/no-plan &
LOOKALIKE=$!
usleep 500000
settled 5
left=$LEFT
kill -KILL $LOOKALIKE
wait $LOOKALIKE 2>/dev/null
has "(^| )$LOOKALIKE:nl2sh:0 " "$left"
verdict $? leftover-seen "a look-alike of a waiting sandbox: ${left:-not seen}"
proofs network <<EOF
tcp-listener         EPERM|EACCES tcp 127.0.0.1 9000
tcp-netd             EPERM|EACCES tcp 127.0.0.1 8765
tcp6                 EPERM|EACCES tcp6 ::1 9000
udp                  EPERM        udp 127.0.0.1 9000
ping-socket          EPERM|EACCES icmp
tcp-bind             EPERM|EACCES listen 9001
packet-socket        EPERM        packet
netlink-uevent       EPERM        netlink 15
netlink-set-lo-down  EPERM        rtnl-down 1
unix-named           EPERM        unix /run/svc/service.sock
unix-abstract        EPERM        unix-abstract kt-abstract-service
unix-dgram           EPERM        unix-dgram /run/svc/service.sock.dgram
unix-pair-dgram      EPERM        pair-dgram /run/svc/service.sock.dgram
unix-approvals       EPERM        unix /data/adb/nl2sh/config.state/protocol/approvals.sock
EOF
proofs locks <<EOF
flock                ENOLCK       flock /data/lockme
posix-lock           ENOLCK       posix-lock /data/lockme
ofd-lock             ENOLCK       ofd-lock /data/lockme
lease                ENOLCK|EACCES|EPERM lease /data/lockme
EOF
# System V IPC and POSIX queues: the call's own namespace (what it makes dies with it), or
# refused where the kernel has none.
proofs ipc <<EOF
ipc-device-segment   ENOENT|EPERM|ENOSYS shm-find 4242
ipc-shm              done|EPERM|ENOSYS shm-make
ipc-msg              done|EPERM|ENOSYS msg-make
ipc-sem              done|EPERM|ENOSYS sem-make
ipc-mq               done|EPERM|ENOSYS|EACCES mq-make
EOF
ipc=$(cat /proc/sysvipc/shm /proc/sysvipc/msg /proc/sysvipc/sem | grep -vc key)
check ipc-left-behind "$ipc object(s) in the device's namespace (1 is the device's own segment)" [ "$ipc" = 1 ]
proofs escapes <<EOF
unshare-user         EPERM        unshare user
clone-userns         EPERM        clone-userns
unshare-mount        EPERM        unshare mount
unshare-net          EPERM        unshare net
setns-init           EPERM|EACCES setns /proc/1/ns/mnt
chroot               EPERM        chroot /
mount                EPERM        mount /data/shared
remount-rw           EPERM        remount-rw /data
umount-mask          EPERM        umount /data/adb
pivot-root           EPERM        pivot_root / /
EOF
proofs kernel <<EOF
bpf                  EPERM        bpf
perf                 EPERM|EACCES perf
io-uring             EPERM        io_uring
userfaultfd          EPERM        userfaultfd
keyctl               EPERM        keyctl
load-module          EPERM        finit_module $UINPUT_KO
unload-module        EPERM        delete_module uinput
reboot               EPERM        reboot
sethostname          EPERM        sethostname
settime              EPERM        settime
swapoff              EPERM        swapoff
kernel-log           EPERM        syslog
EOF
# Resources: bounded per call.
# A setuid-root program on the device (as old su binaries were): it makes a stranger root
# (the control, outside), and nobody in the sandbox (no_new_privs, nosuid mounts).
cp /usr/bin/kt /usr/bin/kt-suid && chmod 4755 /usr/bin/kt-suid
control=$(kt as 1000 1000 -- /usr/bin/kt-suid euid | grep '^KTR')
out=$(run 8765 "lsusb exec $(hex /usr/bin/kt-suid) euid")
got=$(field "$out" stdout | tr '\n' ' ')
[ "$control" = KTR:done:euid\ 0 ] && [ "$(field "$out" sandboxed)" = true ] && has 'KTR:refused:EPERM' "$got"
verdict $? proof-setuid-binary "outside as uid 1000: $control; in the sandbox: $got"
rm -f /usr/bin/kt-suid

# Memory: the per-process limit (malloc fails), or the call's cgroup (the kernel's OOM
# killer ends it, and the result says which limit).
out=$(run 8765 "lsusb alloc 2048")
got=$(field "$out" stdout | grep -Eo 'KTR:refused:[A-Z]+|^allocated.*' | tr '\n' ' ')
limit=$(field "$out" limit)
[ "$(field "$out" sandboxed)" = true ] && { has ENOMEM "$got" || has '^memory:' "$limit"; }
verdict $? proof-memory "${got}limit: ${limit:-none}; $(printf '%s' "$out" | cut -c1-600)"
out=$(run 8765 "lsusb forkbomb 400")
n=$(field "$out" stdout | awk '/^forked/ {print $2}')
[ -n "$n" ] && [ "$n" -lt 256 ] && [ "$(field "$out" sandboxed)" = true ]
verdict $? proof-forkbomb "forked ${n:-?} of 400 (limit 256)"

# File tools read as the sandbox too.
out=$(invoke 8765 fs.read "{\"path\":\"/srv/deploy/key\"}")
has 'Permission denied' "$out" && ! has KTSECRET "$out"
verdict $? fs-read-private "$(field "$out" error)"

# Asking to run outside the sandbox waits for a person (none here: it expires, nothing runs).
out=$(invoke 8765 shell.exec '{"command":"id -u","unconfined":true}')
has expired "$out" && [ "$(field "$out" sandboxed)" != true ]
verdict $? unconfined-waits "$(field "$out" error)"

# Nothing outside changed; no secret reached an answer.
snapshot >$KT/after
changes=$(diff $KT/before $KT/after | grep '^[-+][^-+]' | head -5)
check nothing-changed "${changes:-no difference}" [ -z "$changes" ]
check victims-alive "victim $VICTIM, listener $LISTENER, unix service $SERVICE" \
  kill -0 $VICTIM $LISTENER $SERVICE
arrived=$(cat $KT/nc.out $KT/svc.out | grep -v 'KTSVC ready' | head -3)
[ -z "$arrived" ]
verdict $? no-connection-arrived "${arrived:-nothing reached the listeners}"
leaks=$(grep -o 'KTSECRET-[a-z-]*' $KT/outputs | sort -u | tr '\n' ' ')
check no-secret-in-answers "${leaks:-none}" [ -z "$leaks" ]

# The control: the same attempts, by an ordinary user outside the sandbox, succeed; so
# the refusals above are the sandbox's, and a hole would show.
echo original >/data/victim-control && chmod 0666 /data/victim-control
nc -l -p 9002 >/dev/null 2>&1 &
CONTROL_LISTENER=$!
mkdir -p -m 0755 /run/ctl
kt serve-unix /run/ctl/ctl.sock kt-control-service >/dev/null 2>&1 &
CONTROL_SERVICE=$!
wait_for 5 test -S /run/ctl/ctl.sock
got=$(kt as 1000 1000 -- lsusb @write write /data/victim-control @tcp tcp 127.0.0.1 9002 \
  @unix unix /run/ctl/ctl.sock @flock flock /data/lockme | cut -d: -f2,3 | tr '\n' ' ')
[ "$got" = "write:done tcp:done unix:done flock:done " ]
verdict $? control-unsandboxed "as uid 1000 outside the sandbox: $got"
kill $CONTROL_LISTENER $CONTROL_SERVICE 2>/dev/null

# ---------- 4. SIGKILL of each worker: the same URL answers again ----------

say "TIME recovery $(now)"
# The supervisor restarts the whole worker set and then counts the restart in
# connection.json. Until then the old set may still answer (netd, while it has not yet seen
# approvald's end, and the executor, whose audit rows then wait in its outbox): only the
# count says the new set runs.
restarts() { kt json restarts </data/adb/nl2sh/config.state/protocol/connection.json 2>/dev/null; }
restarted() { [ "$(restarts)" = "$1" ]; }
nth=0
for role in netd executor approvald; do
  pid=$(worker $role)
  t0=$(now)
  kill -KILL "$pid"
  nth=$((nth + 1))
  if wait_for 20 restarted $nth && wait_for 20 initialized 8765; then
    t=$(awk "BEGIN {printf \"%.2f\", $(now) - $t0}")
    out=$(run 8765 'id -u')
    new=$(worker $role)
    [ "$(field "$out" sandboxed)" = true ] && [ -n "$new" ] && [ "$new" != "$pid" ]
    ok=$?
    verdict $ok "sigkill-$role" "answered again after ${t}s; a sandboxed id -u then said $(field "$out" stdout)"
    if [ $ok != 0 ]; then
      say "LOG sigkill-$role: $(printf '%s' "$out" | oneline)"
      log_tail $KT/main.err
    fi
  else
    fail "sigkill-$role" "no restart counted (restarts=$(restarts), want $nth) or no answer within 20 s"
    log_tail $KT/main.err
  fi
done
restarts=$(restarts)
check restarts-recorded "connection.json restarts=$restarts" [ "$restarts" = 3 ]

# ---------- 5. lifecycle: SIGTERM ends the tree cleanly ----------

say "TIME lifecycle $(now)"
t0=$(now)
if stop_tree main; then
  pass sigterm-clean-exit "exit 0, no worker left, in $(awk "BEGIN {print $(now) - $t0}")s"
else
  fail sigterm-clean-exit "exit $code"
  log_tail $KT/main.err
fi
left=$(in_range | tr '\n' ' ')
check nothing-left-running "sandbox uids: ${left:-none}" [ -z "$left" ]

# The managed service: start, status, an MCP call, stop.
SVC=/data/adb/nl2sh-svc/config.toml
make_config $SVC 'protocol_start_with_service = true
protocol_service_port = 8766
'
nl2sh --config $SVC service start >$KT/svc-start.out 2>&1
c1=$?
nl2sh --config $SVC service status >/dev/null 2>&1
c2=$?
initialized 8766
c3=$?
nl2sh --config $SVC service stop >$KT/svc-stop.out 2>&1
c4=$?
wait_for 10 no_workers
nl2sh --config $SVC service status >/dev/null 2>&1
c5=$?
check service-lifecycle "start $c1, status $c2, initialize $c3, stop $c4, status after $c5 (want 0 0 0 0 3)" \
  [ "$c1 $c2 $c3 $c4 $c5" = "0 0 0 0 3" ]
[ "$c1" = 0 ] || log_tail $KT/svc-start.out

# ---------- 6. an essential part missing: nothing runs unconfined ----------

say "TIME fail-closed $(now)"
# fail_closed NAME REASON-ERE OWNER [prefix...]: a tree whose sandbox cannot be complete,
# its configuration owned by uid OWNER.
fail_closed() {
  name=$1 want=$2 owner=$3
  shift 3
  conf=/data/adb/nl2sh-$name/config.toml
  make_config $conf
  chmod 0600 $conf
  chown -R "$owner:$owner" "$(dirname $conf)"
  if ! start_tree "$name" 8767 $conf "$@"; then
    fail "fail-closed-$name" "did not start: $(tail -3 $KT/$name.err)"
    log_tail $KT/$name.err
    return
  fi
  sb=$(tool 8767 nl2sh_inspect '{}' | kt json result.structuredContent.sandbox)
  out=$(run 8767 'ls /')
  reason=$(field "$sb" reason)
  say "INFO fail-closed-$name $sb"
  if [ "$(field "$sb" active)" = false ] && echo "$reason" | grep -Eq "$want" &&
    [ "$(field "$out" sandboxed)" != true ] && echo "$out" | grep -q 'not run'; then
    pass "fail-closed-$name" "sandbox off ($reason); ls / waited and expired: $(field "$out" error)"
  else
    fail "fail-closed-$name" "sandbox: $sb; ls /: $out"
  fi
  stop_tree "$name" || fail "fail-closed-$name-stop" "exit $code"
}
# Another program runs as a uid of the range.
kt as 2415919105 2415919105 -- sleep 1000 &
STRANGER=$!
fail_closed stranger "not started by nl2sh" 0 $PREFIX
kill $STRANGER
wait $STRANGER 2>/dev/null
# nl2sh is not root (it cannot switch to the sandbox identity).
fail_closed not-root "not root" 1000 $PREFIX kt as 1000 1000 --
# Kernels without a mount namespace or without seccomp (simulated: kt's filter answers the
# way such a kernel would).
fail_closed no-mount-namespace "mount namespace" 0 kt deny "${DENY:+$DENY,}nomntns" --
fail_closed no-seccomp "seccomp" 0 kt deny "${DENY:+$DENY,}noseccomp" --
say "INFO netd-without-seccomp $(grep -o 'netd confined.*' $KT/no-seccomp.err | head -1)"

# ---------- 7. a kernel without PID namespaces (simulated) ----------

say "TIME no-pid-namespace $(now)"
# Not essential: the helper becomes a subreaper and kills what the call left behind. The
# sandbox stays on, the call's processes share the device's PID namespace, and what they
# cannot signal is anything not of their own uid.
conf=/data/adb/nl2sh-nopidns/config.toml
make_config $conf
chmod 0600 $conf
if start_tree nopidns 8769 $conf kt deny "${DENY:+$DENY,}nopidns" --; then
  sb=$(tool 8769 nl2sh_inspect '{}' | kt json result.structuredContent.sandbox)
  [ "$(field "$sb" active)" = true ] && has '^off' "$(field "$sb" pid_namespace)"
  verdict $? nopidns-sandbox-active "pid_namespace: $(field "$sb" pid_namespace)"
  out=$(run 8769 "lsusb @kill-victim kill $VICTIM @kill-netd kill $(worker netd) @daemon daemon 778.5")
  got=$(field "$out" stdout | grep '^KTR' | cut -d: -f2-4 | tr '\n' ' ')
  settled 10
  left=$LEFT
  [ "$(field "$out" sandboxed)" = true ] && has 'kill-victim:refused:EPERM' "$got" &&
    has 'kill-netd:refused:EPERM' "$got" && has 'daemon:done' "$got" && [ -z "$left" ] &&
    kill -0 $VICTIM && [ -n "$(worker netd)" ]
  verdict $? nopidns-nothing-outlives "$got; left in the uid range: ${left:-none}"
  stop_tree nopidns
  verdict $? nopidns-stop "exit $code"
else
  fail nopidns "did not start"
  log_tail $KT/nopidns.err
fi

# ---------- 8. netd's filter and Landlock, from inside netd ----------

say "TIME netd-inject $(now)"
# kt inject makes netd itself perform one system call (ptrace, from root): what an
# attacker who took over netd's control flow would try, in the release binary as shipped.
# A forbidden call kills netd (SIGSYS) and the supervisor restarts the workers; an open of
# the state directory is refused by Landlock (EACCES) or, without it, by the filter (EPERM).
if [ "$LANDLOCK_ABI" = 0 ]; then open_errno=EPERM; else open_errno=EACCES; fi
conf=/data/adb/nl2sh-inject/config.toml
make_config $conf
chmod 0600 $conf
if start_tree inject 8768 $conf $PREFIX; then
  for v in open:/data/adb/nl2sh ptrace execve; do
    name=netd-inject-$(echo "$v" | cut -d: -f1)
    pid=$(worker netd)
    r=$(kt inject "$pid" "$v" 2>&1)
    case "$v" in
      open:*)
        usleep 200000
        [ "$r" = "KTI:returned:$open_errno" ] && [ "$(worker netd)" = "$pid" ] && initialized 8768
        verdict $? "$name" "$r (netd $pid lives on and serves)" ;;
      *)
        wait_for 20 grep -q "worker netd (pid $pid) exited unexpectedly" $KT/inject.err
        said=$(grep -o "worker netd (pid $pid) exited unexpectedly[^\"]*" $KT/inject.err | head -1)
        [ "$r" = KTI:killed:31 ] && has 'killed by signal 31' "$said" && wait_for 20 initialized 8768 &&
          [ -n "$(worker netd)" ] && [ "$(worker netd)" != "$pid" ]
        verdict $? "$name" "$r; supervisor: $said; the workers restarted and answer" ;;
    esac
  done
  stop_tree inject
  verdict $? netd-inject-stop "exit $code"
else
  fail netd-inject "did not start"
  log_tail $KT/inject.err
fi

# ---------- 9. touch: gestures through the kernel ----------

say "TIME touch $(now)"
# A phone as far as nl2sh looks: getprop, input and dumpsys stand-ins on PATH (dumpsys
# states the display and rotation written to /run/android-display; input logs its
# arguments), and a touchscreen kt makes with uinput, its node group input (1004) 0660 as
# Android's ueventd makes them. nl2sh draws each gesture as the shell user (2000, groups
# input and uhid), and a reader on the node (kt events) prints what the kernel passed on.
# The tree approves by itself: these checks are about the events, not the approval.
AB=/run/android-bin
mkdir -p -m 0755 $AB
printf '#!/bin/sh\necho\n' >$AB/getprop
printf '#!/bin/sh\necho "input $*" >>/run/android-input.log\n' >$AB/input
printf '#!/bin/sh\ncat /run/android-display\n' >$AB/dumpsys
chmod 0755 $AB/getprop $AB/input $AB/dumpsys
: >/run/android-input.log && chmod 0666 /run/android-input.log
display() { # WxH rotation: what dumpsys window states
  printf '  init=%s 420dpi cur=%s app=%s\n  mRotation=%s\n' "$1" "$1" "$1" "$2" >/run/android-display
  chmod 0644 /run/android-display
}
display 1080x2400 0
TS_PID=
ts_start() { # name xmax ymax: a touchscreen; TS_NODE is its node
  [ -n "$TS_PID" ] && ts_stop
  # Emptied first: the shell truncates it only in the child, and a look before that
  # would read the last touchscreen's node.
  : >$KT/ts.out
  kt touchscreen "$1" "$2" "$3" >$KT/ts.out 2>&1 &
  TS_PID=$!
  # Seen once taking over 10 s under TCG with two guests at a time.
  wait_for 60 grep -q '^/dev/input/' $KT/ts.out || log_tail $KT/ts.out
  TS_NODE=$(grep -m1 '^/dev/input/' $KT/ts.out)
  # kt names the node from sysfs; devtmpfs may make it a little later (seen under TCG:
  # the chgrp missed it, and the node stayed root's 0600).
  wait_for 30 test -c "$TS_NODE"
  chgrp 1004 "$TS_NODE" && chmod 0660 "$TS_NODE"
}
# The next touchscreen may get the same event number: its node is waited for only once
# the old one is gone (devtmpfs removes it a little after the device), or the chgrp above
# lands on the old node and the new one stays root's 0600 (seen under TCG).
ts_stop() {
  kill -TERM "$TS_PID" 2>/dev/null
  wait "$TS_PID" 2>/dev/null
  TS_PID=
  wait_for 30 sh -c "! test -e '$TS_NODE'"
}
# Under TCG with two guests at a time a process can take seconds to start and a call many
# more: the reader waits for its first event as long as the call may take (kt post's 60 s),
# and once the call has answered (its last event written) is given 10 s to see one.
reader() { # node|new:NAME: a reader of its events, ready before the call
  kt events "$1" 90000 2000 >$KT/events.out 2>$KT/events.err &
  READER=$!
  wait_for 60 grep -q '^ready' $KT/events.out
}
events() { # what the reader saw: "type code value ..." on one line
  wait_for 10 grep -q '^E ' $KT/events.out || kill "$READER" 2>/dev/null
  wait "$READER"
  echo $(grep '^E ' $KT/events.out | cut -d' ' -f3-)
}
answer() { # what a call answered, for a verdict: its error, or all of it when no events came
  if [ -n "$got" ]; then
    field "$out" error
  else
    printf 'answer: %.400s; nodes before the call: %s' "${out:-none}" "$NODE_SEEN"
  fi
}
syn_times() { grep -E '^E [0-9.]+ 0 0 0$' $KT/events.out | cut -d' ' -f2 | tr '\n' ' '; }
node_ready() { # the node as the helper will find it: group input, 0660 (set again if not)
  was=$(stat -c '%g %a' "$TS_NODE" 2>&1)
  if [ "$was" != "1004 660" ]; then
    say "INFO touch-node-regranted $TS_NODE was $was"
    chgrp 1004 "$TS_NODE" && chmod 0660 "$TS_NODE"
  fi
  NODE_SEEN=$(ls -ln /dev/input 2>&1 | tr '\n' ' ')
}
touch_call() { # tool arguments: the call on a fresh phone touchscreen; sets out, got, t
  ts_start kt-phone 1079 2399
  reader "$TS_NODE"
  node_ready
  out=$(invoke 8770 "$1" "$2")
  got=$(events)
  t=$(syn_times)
}
at_least() { awk -v a="$1" -v b="$2" 'BEGIN {exit !(a + 0 >= b + 0)}'; } # a >= b
# A finger down and up on a fresh touchscreen (slot 0 staged: ABS_MT_SLOT 0 is not
# passed on; pressure 127 and touch size 31, the middle and an eighth of 0..255).
down() { echo "3 57 $1 3 58 127 3 48 31 3 53 $2 3 54 $3 1 330 1 1 325 1 0 0 0"; }
UP="3 57 -1 1 330 0 1 325 0 0 0 0"

conf=/data/adb/nl2sh-touch/config.toml
make_config $conf 'protocol_auto_approve = true
'
chmod 0600 $conf
if start_tree touch 8770 $conf $PREFIX env PATH=$AB:$PATH; then
  touch_call android.tap '{"x":100,"y":200}'
  [ "$(field "$out" path)" = "evdev:$TS_NODE" ] && [ "$got" = "$(down 0 100 200) $UP" ] &&
    at_least "$(echo $t | cut -d' ' -f2)" 9
  verdict $? touch-tap "$(field "$out" path) $(field "$out" inject_ms) ms; syn at $t; $got $(answer)"

  touch_call android.long_press '{"x":300,"y":400,"duration_ms":600}'
  [ "$got" = "$(down 0 300 400) $UP" ] && at_least "$(echo $t | cut -d' ' -f2)" 595
  verdict $? touch-long-press "syn at $t; $got $(answer)"

  touch_call android.swipe '{"x1":540,"y1":2000,"x2":540,"y2":1000,"duration_ms":300}'
  ys=$(echo $got | grep -o '3 54 [0-9]*' | cut -d' ' -f3 | tr '\n' ' ')
  moves=$(echo $ys | wc -w)
  [ "$(echo $t | wc -w)" = 32 ] && [ "$moves" = 31 ] &&
    [ "$(echo $ys | cut -d' ' -f1)" = 2000 ] && [ "$(echo $ys | cut -d' ' -f31)" = 1000 ] &&
    [ "$(echo $ys | tr ' ' '\n' | sort -rn | tr '\n' ' ' | sed 's/ $//')" = "$(echo $ys)" ] &&
    at_least "$(echo $t | cut -d' ' -f32)" 295 && has "$UP\$" "$got"
  verdict $? touch-swipe "$(field "$out" path); y: $ys; syn at $t"

  touch_call android.double_tap '{"x":500,"y":600}'
  # The second contact's position, pressure and size are its slot's already: the kernel
  # passes on only what changed.
  [ "$got" = "$(down 0 500 600) $UP 3 57 1 1 330 1 1 325 1 0 0 0 $UP" ] &&
    at_least "$(echo $t | cut -d' ' -f3)" 105 &&
    at_least "$(awk -v a="$(echo $t | cut -d' ' -f3)" -v b="$(echo $t | cut -d' ' -f2)" 'BEGIN {print a - b}')" 90
  verdict $? touch-double-tap "syn at $t; $got $(answer)"

  touch_call android.pinch '{"x":540,"y":1200,"from":400,"to":100,"duration_ms":100}'
  first="3 57 0 3 58 127 3 48 31 3 53 340 3 54 1200 3 47 1 3 57 1 3 58 127 3 48 31 3 53 740 3 54 1200 1 330 1 1 325 1 0 0 0 3 47 0 3 53 355 3 47 1 3 53 725 0 0 0"
  last="3 47 0 3 53 490 3 47 1 3 53 590 0 0 0 3 47 0 3 57 -1 3 47 1 3 57 -1 1 330 0 1 325 0 0 0 0"
  case "$got" in "$first "*" $last") ok=0 ;; *) ok=1 ;; esac
  [ $ok = 0 ] && [ "$(echo $t | wc -w)" = 12 ] && at_least "$(echo $t | cut -d' ' -f12)" 95
  verdict $? touch-pinch "syn at $t; $got $(answer)"

  # Axes ten times the pixels, and the display turned a quarter: (100, 200) on the
  # 2400x1080 view is natural pixel (879, 100), raw (8795, 1005).
  display 1080x2400 1
  ts_start kt-tablet 10799 23999
  reader "$TS_NODE"
  node_ready
  out=$(invoke 8770 android.tap '{"x":100,"y":200}')
  got=$(events)
  [ "$got" = "$(down 0 8795 1005) $UP" ]
  verdict $? touch-rotated-scaled "$got $(answer)"
  display 1080x2400 0

  # A finger on the glass: nothing is written, and the error says why.
  ts_start kt-phone 1079 2399
  kill -USR1 $TS_PID
  wait_for 5 grep -q '^down' $KT/ts.out
  reader "$TS_NODE"
  node_ready
  out=$(invoke 8770 android.tap '{"x":100,"y":200}')
  got=$(events)
  err=$(field "$out" error)
  [ -z "$got" ] && has 'a finger is on the touchscreen \(slot 0 \(tracking id 77\)\)' "$err"
  verdict $? touch-finger-on-glass "${err:-$out}; events: ${got:-none}"
  kill -USR2 $TS_PID
  wait_for 5 grep -q '^up' $KT/ts.out

  # The node readable but not writable for the shell user: a virtual copy through
  # uinput (group uhid, 3011, as on Android), with the same ranges.
  ts_start kt-phone 1079 2399
  chmod 0640 "$TS_NODE"
  chgrp 3011 /dev/uinput && chmod 0660 /dev/uinput
  reader new:nl2sh-touch
  out=$(invoke 8770 android.tap '{"x":100,"y":200}')
  got=$(events)
  [ "$(field "$out" path)" = uinput ] && [ "$(field "$out" copy_of)" = "$TS_NODE" ] &&
    [ "$got" = "$(down 0 100 200) $UP" ]
  verdict $? touch-uinput "$(field "$out" path) copy of $(field "$out" copy_of) ($(field "$out" why)); $got $(answer)"

  # Neither: `input`, saying why.
  chmod 0600 "$TS_NODE" /dev/uinput
  : >/run/android-input.log
  out=$(invoke 8770 android.tap '{"x":100,"y":200}')
  [ "$(field "$out" path)" = input ] && has 'Permission denied' "$(field "$out" why)" &&
    [ "$(cat /run/android-input.log)" = "input tap 100 200" ]
  verdict $? touch-input-fallback "$(field "$out" why); input ran: $(cat /run/android-input.log)"
  out=$(invoke 8770 android.double_tap '{"x":100,"y":200}')
  has 'needs a touchscreen nl2sh can write' "$(field "$out" error)"
  verdict $? touch-no-fallback "$(field "$out" error)"

  # The tap's cost, from the tool's run to the last event written (inject_ms: the
  # dumpsys read of the display, the helper's start, the tap's 10 ms hold) and the
  # helper's own part (write_ms), the touchscreen against `input` (here a shell script,
  # not a JVM as on a phone). Figures only: timing is not a pass or a fail.
  chmod 0660 "$TS_NODE"
  bench() { # n: "inject_ms write_ms" per call in $KT/bench.out; the wall time per call
    t0=$(now)
    for i in $(seq 1 "$1"); do
      r=$(invoke 8770 android.tap "{\"x\":$((100 + i)),\"y\":200}")
      echo "$(field "$r" inject_ms) $(field "$r" write_ms)"
    done >$KT/bench.out
    awk -v a="$t0" -v b="$(now)" -v n="$1" 'BEGIN {printf "%.1f", (b - a) * 1000 / n}'
  }
  median() { # column
    cut -d' ' -f"$1" $KT/bench.out | sort -n | sed -n "$((($(wc -l <$KT/bench.out) + 1) / 2))p"
  }
  per_call=$(bench 20)
  say "INFO touch-bench-evdev median inject_ms $(median 1), helper write_ms $(median 2), per call ${per_call} ms over MCP (20 taps)"
  chmod 0600 "$TS_NODE"
  per_call=$(bench 20)
  say "INFO touch-bench-input median inject_ms $(median 1), per call ${per_call} ms over MCP (20 taps)"
  ts_stop
  chgrp 0 /dev/uinput
  stop_tree touch
  verdict $? touch-stop "exit $code"
else
  fail touch "did not start"
  log_tail $KT/touch.err
fi

say "TIME end $(now)"
say "SUMMARY $COUNT results, $FAILS failed"
exit $FAILS
