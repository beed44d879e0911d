/*
 * kt: the one helper of scripts/kernel-test's guests, a static program (zig cc, target
 * x86_64-linux-musl). Run as root by tests/kernel/checks.sh:
 *
 *   kt post PORT PATH TOKEN BODY     HTTP POST to 127.0.0.1:PORT (loopback, always); prints
 *                                    the body (an SSE `data:` line's JSON, dechunked); exit
 *                                    0 on 2xx, else "HTTP <status>" on stderr and exit 1.
 *                                    TOKEN `env` takes it from $KT_TOKEN (a command line is
 *                                    visible to every process, sandboxed ones too); `-`
 *                                    sends no Authorization.
 *   kt json PATH                     the value at PATH (dots; numbers index arrays) of the
 *                                    JSON on stdin: a string unescaped, else its JSON text.
 *   kt deny SPEC[,SPEC...] -- PROG ARGS
 *                                    a seccomp filter that makes this kernel answer as one
 *                                    without a feature, then exec PROG (everything it starts
 *                                    inherits the filter):
 *                                      after=N    system calls above N fail ENOSYS (440 is
 *                                                 Linux 5.10's last on x86_64)
 *                                      nopidns / noipcns / nomntns
 *                                                 CLONE_NEWPID / NEWIPC / NEWNS fail EINVAL
 *                                      nosysvipc  System V IPC and POSIX queues fail ENOSYS
 *                                      noseccomp  seccomp() and PR_{GET,SET}_SECCOMP EINVAL
 *                                    (a namespace spec also makes clone3 ENOSYS: its flags
 *                                    are behind a pointer; C libraries fall back to clone).
 *   kt landlock-abi                  the kernel's Landlock ABI (0: none).
 *   kt as UID GID -- PROG ARGS       PROG as another user (no groups).
 *   kt serve-unix PATH NAME          a device service: stream socket PATH, datagram socket
 *                                    PATH.dgram (both 0777), abstract socket NAME; prints a
 *                                    line for whatever reaches it.
 *   kt ipc-setup KEY                 a System V segment of the device's, left in place.
 *   kt touchscreen NAME XMAX YMAX    a phone's touchscreen made with uinput (multi-touch
 *                                    protocol B: 10 slots, tracking ids 0..65535, positions
 *                                    0..XMAX and 0..YMAX, pressure and touch size 0..255,
 *                                    BTN_TOUCH, BTN_TOOL_FINGER, INPUT_PROP_DIRECT); prints
 *                                    its event node, then waits: SIGUSR1 puts a finger on
 *                                    it (slot 0, tracking id 77) and prints "down", SIGUSR2
 *                                    lifts it ("up"), SIGTERM removes the device.
 *   kt events NODE|new:NAME MAX_MS IDLE_MS
 *                                    a reader on an event node (or on the first new one
 *                                    named NAME): prints "ready", then each event as
 *                                    "E <ms since the first event> <type> <code> <value>"
 *                                    (kernel timestamps), until IDLE_MS pass without one
 *                                    after the first, MAX_MS in all, or the device goes.
 *   kt inject PID execve|ptrace|open:PATH
 *                                    makes process PID perform that system call (ptrace),
 *                                    in its own context, under its own seccomp filter and
 *                                    Landlock domain: prints KTI:killed:<signal> or
 *                                    KTI:returned:<ERRNO or value>.
 *
 * Every other subcommand is the attacker: one attempt at something an unasked, read-only
 * command must not be able to do (see attack() below). In the guest this program is also
 * /usr/bin/lsusb, a name nl2sh's assessment reads as read-only, standing for any
 * read-only-looking program an attacker controls: the kernel sandbox alone must stop it.
 * Arguments written `hex:2f6574...` are decoded first, so the assessment cannot read a
 * path either. One attempt prints
 *
 *   KTR:done:<what>                  it succeeded (a hole, unless the check expects it,
 *                                    e.g. writing the scratch directory)
 *   KTR:refused:<ERRNO>:<what>       the kernel refused it, with that error
 *
 * `@name attempt args @name attempt args ...` runs several, each line labelled
 * `KTR:name:...`.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <net/if.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <dirent.h>
#include <linux/input.h>
#include <linux/uinput.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <time.h>
#include <sched.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <grp.h>
#include <sys/ipc.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/msg.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/reboot.h>
#include <sys/resource.h>
#include <sys/select.h>
#include <sys/sem.h>
#include <sys/shm.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <sys/types.h>
#include <sys/user.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

/* ---------- errno names ---------- */

static const char *errname(int e) {
  switch (e) {
#define E(x) case x: return #x;
    E(EPERM) E(ENOENT) E(ESRCH) E(EINTR) E(EIO) E(ENXIO) E(E2BIG) E(ENOEXEC) E(EBADF)
    E(ECHILD) E(EAGAIN) E(ENOMEM) E(EACCES) E(EFAULT) E(EBUSY) E(EEXIST) E(EXDEV)
    E(ENODEV) E(ENOTDIR) E(EISDIR) E(EINVAL) E(ENFILE) E(EMFILE) E(ENOTTY) E(ETXTBSY)
    E(EFBIG) E(ENOSPC) E(ESPIPE) E(EROFS) E(EMLINK) E(EPIPE) E(ENOSYS) E(ENOLCK)
    E(ENOTEMPTY) E(ELOOP) E(ENOTSOCK) E(EPROTONOSUPPORT) E(EAFNOSUPPORT) E(EADDRINUSE)
    E(EADDRNOTAVAIL) E(ENETUNREACH) E(ECONNREFUSED) E(ECONNRESET) E(ETIMEDOUT)
    E(EOPNOTSUPP) E(ENOKEY) E(EKEYREJECTED)
#undef E
  default: return "E?";
  }
}

/* The attempt's name in a batch (`@name`), printed before its result. */
static const char *label = NULL;

static int refused(const char *what) {
  int e = errno;
  printf("KTR:%s%srefused:%s:%s (%s)\n", label ? label : "", label ? ":" : "", errname(e),
         what, strerror(e));
  return 1;
}

static int done(const char *what) {
  printf("KTR:%s%sdone:%s\n", label ? label : "", label ? ":" : "", what);
  return 0;
}

/* ---------- kt post ---------- */

static void die(const char *what) {
  fprintf(stderr, "kt: %s: %s\n", what, strerror(errno));
  exit(2);
}

/* Decode a chunked body in place; returns the new length. */
static size_t dechunk(char *b, size_t n) {
  size_t in = 0, out = 0;
  while (in < n) {
    char *end;
    unsigned long len = strtoul(b + in, &end, 16);
    char *crlf = strstr(b + in, "\r\n");
    if (!crlf || end == b + in) break;
    in = (size_t)(crlf - b) + 2;
    if (len == 0 || in + len > n) break;
    memmove(b + out, b + in, len);
    out += len;
    in += len + 2;
  }
  return out;
}

static int cmd_post(int argc, char **argv) {
  if (argc != 6) {
    fprintf(stderr, "usage: kt post PORT PATH TOKEN BODY\n");
    return 2;
  }
  int port = atoi(argv[2]);
  const char *path = argv[3], *body = argv[5];
  /* The token comes from $KT_TOKEN when TOKEN is "env": a command line is visible to
     every process of the device, sandboxed ones included (ps). */
  const char *token = strcmp(argv[4], "env") == 0 ? getenv("KT_TOKEN") : argv[4];
  if (!token) token = "-";
  int s = socket(AF_INET, SOCK_STREAM, 0);
  if (s < 0) die("socket");
  struct timeval tv = {.tv_sec = 60};
  setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port)};
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK); /* loopback only, always */
  if (connect(s, (struct sockaddr *)&a, sizeof a) < 0) die("connect");
  size_t cap = strlen(body) + 1024;
  char *req = malloc(cap);
  char auth[600] = "";
  if (strcmp(token, "-") != 0) snprintf(auth, sizeof auth, "Authorization: Bearer %s\r\n", token);
  int n = snprintf(req, cap,
                   "POST %s HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n%s"
                   "Content-Type: application/json\r\n"
                   "Accept: application/json, text/event-stream\r\n"
                   "MCP-Protocol-Version: 2025-11-25\r\n"
                   "Content-Length: %zu\r\nConnection: close\r\n\r\n%s",
                   path, port, auth, strlen(body), body);
  for (int off = 0; off < n;) {
    ssize_t w = write(s, req + off, n - off);
    if (w <= 0) die("write");
    off += w;
  }
  size_t len = 0, size = 1 << 16;
  char *resp = malloc(size + 1);
  for (;;) {
    if (len == size) resp = realloc(resp, (size *= 2) + 1);
    ssize_t r = read(s, resp + len, size - len);
    if (r < 0) die("read");
    if (r == 0) break;
    len += r;
  }
  resp[len] = 0;
  int status = 0;
  sscanf(resp, "HTTP/%*s %d", &status);
  char *head_end = strstr(resp, "\r\n\r\n");
  if (!head_end) {
    fprintf(stderr, "HTTP no-response\n");
    return 1;
  }
  *head_end = 0;
  char *b = head_end + 4;
  size_t blen = len - (size_t)(b - resp);
  for (char *h = resp; *h; h++) *h = (char)((*h >= 'A' && *h <= 'Z') ? *h + 32 : *h);
  if (strstr(resp, "transfer-encoding: chunked")) blen = dechunk(b, blen);
  b[blen] = 0;
  if (strstr(resp, "content-type: text/event-stream")) {
    /* The JSON-RPC message is the last `data:` line. */
    char *data = NULL, *p = b;
    while ((p = strstr(p, "data:"))) {
      if (p == b || p[-1] == '\n') data = p + 5;
      p += 5;
    }
    if (data) {
      while (*data == ' ') data++;
      char *nl = strchr(data, '\n');
      if (nl) *nl = 0;
      b = data;
    }
  }
  fputs(b, stdout);
  fputc('\n', stdout);
  if (status < 200 || status > 299) {
    fprintf(stderr, "HTTP %d\n", status);
    return 1;
  }
  return 0;
}

/* ---------- kt json ---------- */

static const char *ws(const char *p) {
  while (*p == ' ' || *p == '\n' || *p == '\r' || *p == '\t') p++;
  return p;
}

/* The end of the JSON value starting at p (after whitespace), or NULL. */
static const char *skip(const char *p) {
  p = ws(p);
  if (*p == '"') {
    for (p++; *p && *p != '"'; p++)
      if (*p == '\\' && p[1]) p++;
    return *p ? p + 1 : NULL;
  }
  if (*p == '{' || *p == '[') {
    char close = *p == '{' ? '}' : ']';
    p = ws(p + 1);
    if (*p == close) return p + 1;
    for (;;) {
      if (close == '}') {
        p = skip(p); /* key */
        if (!p) return NULL;
        p = ws(p);
        if (*p++ != ':') return NULL;
      }
      p = skip(p);
      if (!p) return NULL;
      p = ws(p);
      if (*p == ',') { p++; continue; }
      if (*p == close) return p + 1;
      return NULL;
    }
  }
  while (*p && !strchr(",}] \n\r\t", *p)) p++;
  return p;
}

static void put_utf8(unsigned cp) {
  if (cp < 0x80) putchar(cp);
  else if (cp < 0x800) { putchar(0xc0 | cp >> 6); putchar(0x80 | (cp & 0x3f)); }
  else if (cp < 0x10000) {
    putchar(0xe0 | cp >> 12); putchar(0x80 | ((cp >> 6) & 0x3f)); putchar(0x80 | (cp & 0x3f));
  } else {
    putchar(0xf0 | cp >> 18); putchar(0x80 | ((cp >> 12) & 0x3f));
    putchar(0x80 | ((cp >> 6) & 0x3f)); putchar(0x80 | (cp & 0x3f));
  }
}

static void print_string(const char *p, const char *end) {
  for (p++; p < end - 1; p++) {
    if (*p != '\\') { putchar(*p); continue; }
    p++;
    switch (*p) {
    case 'n': putchar('\n'); break;
    case 't': putchar('\t'); break;
    case 'r': putchar('\r'); break;
    case 'b': putchar('\b'); break;
    case 'f': putchar('\f'); break;
    case 'u': {
      unsigned cp = (unsigned)strtoul((char[]){p[1], p[2], p[3], p[4], 0}, NULL, 16);
      p += 4;
      if (cp >= 0xd800 && cp < 0xdc00 && p[1] == '\\' && p[2] == 'u') {
        unsigned lo = (unsigned)strtoul((char[]){p[3], p[4], p[5], p[6], 0}, NULL, 16);
        cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
        p += 6;
      }
      put_utf8(cp);
      break;
    }
    default: putchar(*p);
    }
  }
}

/* Does the JSON string at p (with quotes) equal key? */
static int key_is(const char *p, const char *end, const char *key) {
  size_t n = strlen(key);
  return (size_t)(end - p) == n + 2 && memcmp(p + 1, key, n) == 0;
}

static int cmd_json(int argc, char **argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: kt json PATH < json\n");
    return 2;
  }
  size_t len = 0, size = 1 << 16;
  char *in = malloc(size + 1);
  for (ssize_t r; (r = read(0, in + len, size - len)) > 0;) {
    len += r;
    if (len == size) in = realloc(in, (size *= 2) + 1);
  }
  in[len] = 0;
  const char *p = ws(in);
  char *path = strdup(argv[2]);
  for (char *seg = strtok(path, "."); seg; seg = strtok(NULL, ".")) {
    p = ws(p);
    const char *found = NULL;
    if (*p == '{') {
      const char *q = ws(p + 1);
      while (*q == '"') {
        const char *kend = skip(q);
        if (!kend) return 1;
        const char *v = ws(kend);
        if (*v != ':') return 1;
        v = ws(v + 1);
        if (key_is(q, kend, seg)) { found = v; break; }
        const char *vend = skip(v);
        if (!vend) return 1;
        q = ws(vend);
        if (*q == ',') q = ws(q + 1);
      }
    } else if (*p == '[') {
      char *endnum;
      long want = strtol(seg, &endnum, 10);
      if (*endnum) return 1;
      const char *q = ws(p + 1);
      for (long i = 0; *q && *q != ']'; i++) {
        if (i == want) { found = q; break; }
        q = skip(q);
        if (!q) return 1;
        q = ws(q);
        if (*q == ',') q = ws(q + 1);
      }
    }
    if (!found) return 1;
    p = found;
  }
  const char *end = skip(p);
  if (!end) return 1;
  if (*p == '"') print_string(p, end);
  else fwrite(p, 1, (size_t)(end - p), stdout);
  putchar('\n');
  return 0;
}

/* ---------- kt deny ---------- */

#define ALLOW BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW)
#define NR_OFF offsetof(struct seccomp_data, nr)
#define ARG_LO(n) (offsetof(struct seccomp_data, args) + 8 * (n))

static struct sock_filter prog[512];
static int plen;

static void emit(struct sock_filter f) {
  if (plen == (int)(sizeof prog / sizeof prog[0])) {
    fprintf(stderr, "kt deny: filter too long\n");
    exit(2);
  }
  prog[plen++] = f;
}

/* if (nr == n) return errno e; (the accumulator holds nr, and is reloaded after) */
static void deny_nr(int n, int e) {
  emit((struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS, NR_OFF));
  emit((struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, n, 0, 1));
  emit((struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | e));
}

/* if (nr == n && args[arg] OP value) return errno e; OP is BPF_JSET (any bit of
   value set) or BPF_JEQ (equal) */
static void deny_when(int n, int arg, unsigned op, unsigned value, int e) {
  emit((struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS, NR_OFF));
  emit((struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, n, 0, 3));
  emit((struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS, ARG_LO(arg)));
  emit((struct sock_filter)BPF_JUMP(BPF_JMP | op | BPF_K, value, 0, 1));
  emit((struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | e));
}

static int cmd_deny(int argc, char **argv) {
  if (argc < 5 || strcmp(argv[3], "--") != 0) {
    fprintf(stderr, "usage: kt deny SPEC[,SPEC...] -- PROG ARGS\n");
    return 2;
  }
  /* Only this architecture's own calls (x32 and i386 ones are killed: nl2sh uses none). */
  emit((struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)));
  emit((struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, 1, 0));
  emit((struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS));
  emit((struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS, NR_OFF));
  emit((struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JGE | BPF_K, 0x40000000, 0, 1));
  emit((struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS));
  unsigned ns = 0;
  char *specs = strdup(argv[2]);
  for (char *s = strtok(specs, ","); s; s = strtok(NULL, ",")) {
    if (strncmp(s, "after=", 6) == 0) {
      int last = atoi(s + 6);
      emit((struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS, NR_OFF));
      emit((struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JGT | BPF_K, last, 0, 1));
      emit((struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | ENOSYS));
    } else if (strcmp(s, "nopidns") == 0) {
      ns |= CLONE_NEWPID;
    } else if (strcmp(s, "noipcns") == 0) {
      ns |= CLONE_NEWIPC;
    } else if (strcmp(s, "nomntns") == 0) {
      ns |= CLONE_NEWNS;
    } else if (strcmp(s, "nosysvipc") == 0) {
      int calls[] = {SYS_shmget, SYS_shmat, SYS_shmctl, SYS_shmdt, SYS_msgget, SYS_msgsnd,
                     SYS_msgrcv, SYS_msgctl, SYS_semget, SYS_semop, SYS_semctl,
                     SYS_semtimedop, SYS_mq_open, SYS_mq_unlink, SYS_mq_timedsend,
                     SYS_mq_timedreceive, SYS_mq_notify, SYS_mq_getsetattr};
      for (size_t i = 0; i < sizeof calls / sizeof calls[0]; i++) deny_nr(calls[i], ENOSYS);
    } else if (strcmp(s, "noseccomp") == 0) {
      deny_nr(SYS_seccomp, EINVAL);
      deny_when(SYS_prctl, 0, BPF_JEQ, PR_SET_SECCOMP, EINVAL);
      deny_when(SYS_prctl, 0, BPF_JEQ, PR_GET_SECCOMP, EINVAL);
    } else {
      fprintf(stderr, "kt deny: unknown spec %s\n", s);
      return 2;
    }
  }
  if (ns) {
    deny_when(SYS_unshare, 0, BPF_JSET, ns, EINVAL);
    deny_when(SYS_clone, 0, BPF_JSET, ns, EINVAL);
    deny_nr(SYS_clone3, ENOSYS);
  }
  emit((struct sock_filter)ALLOW);
  struct sock_fprog fp = {.len = (unsigned short)plen, .filter = prog};
  /* Root holds CAP_SYS_ADMIN, so no no_new_privs: the tree starts as it would. */
  if (syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &fp) != 0) die("seccomp");
  execvp(argv[4], argv + 4);
  die(argv[4]);
  return 2;
}

/* ---------- kt landlock-abi ---------- */

static int cmd_landlock_abi(void) {
  long abi = syscall(444 /* landlock_create_ruleset */, NULL, 0, 1 /* VERSION */);
  printf("%ld\n", abi < 0 ? 0 : abi);
  return 0;
}

/* ---------- the attacker ---------- */

static int tcp_connect(int family, const char *host, int port) {
  int s = socket(family, SOCK_STREAM, 0);
  if (s < 0) return refused("socket");
  struct sockaddr_storage ss = {0};
  socklen_t sl;
  if (family == AF_INET6) {
    struct sockaddr_in6 *a = (struct sockaddr_in6 *)&ss;
    a->sin6_family = AF_INET6;
    a->sin6_port = htons(port);
    inet_pton(AF_INET6, host, &a->sin6_addr);
    sl = sizeof *a;
  } else {
    struct sockaddr_in *a = (struct sockaddr_in *)&ss;
    a->sin_family = AF_INET;
    a->sin_port = htons(port);
    inet_pton(AF_INET, host, &a->sin_addr);
    sl = sizeof *a;
  }
  if (connect(s, (struct sockaddr *)&ss, sl) < 0) return refused("connect");
  return done("connected");
}

static int unix_addr(struct sockaddr_un *a, const char *path, int abstract) {
  memset(a, 0, sizeof *a);
  a->sun_family = AF_UNIX;
  size_t n = strlen(path);
  if (n + 2 > sizeof a->sun_path) n = sizeof a->sun_path - 2;
  memcpy(a->sun_path + (abstract ? 1 : 0), path, n);
  return (int)(offsetof(struct sockaddr_un, sun_path) + n + (abstract ? 1 : 0));
}

/* What `alloc` holds, so no compiler can drop the allocations. */
volatile char *held[1 << 16];

static int attack(int argc, char **argv) {
  const char *c = argv[1];
  const char *a1 = argc > 2 ? argv[2] : "", *a2 = argc > 3 ? argv[3] : "";

  /* Files. */
  if (!strcmp(c, "write")) {
    int fd = open(a1, O_WRONLY | O_CREAT | O_TRUNC, 0666);
    if (fd < 0) return refused("open for writing");
    if (write(fd, "changed\n", 8) != 8) return refused("write");
    return done("written");
  }
  if (!strcmp(c, "append")) {
    int fd = open(a1, O_WRONLY | O_APPEND);
    if (fd < 0) return refused("open for appending");
    return write(fd, "x\n", 2) == 2 ? done("appended") : refused("write");
  }
  if (!strcmp(c, "unlink")) return unlink(a1) ? refused("unlink") : done("unlinked");
  if (!strcmp(c, "rename")) return rename(a1, a2) ? refused("rename") : done("renamed");
  if (!strcmp(c, "chmod")) return chmod(a1, 0777) ? refused("chmod") : done("chmod");
  if (!strcmp(c, "chown")) return chown(a1, getuid(), getgid()) ? refused("chown") : done("chown");
  if (!strcmp(c, "mkdir")) return mkdir(a1, 0755) ? refused("mkdir") : done("mkdir");
  if (!strcmp(c, "truncate")) return truncate(a1, 0) ? refused("truncate") : done("truncated");
  if (!strcmp(c, "symlink")) return symlink("/", a1) ? refused("symlink") : done("symlinked");
  if (!strcmp(c, "mknod"))
    return mknod(a1, S_IFCHR | 0666, makedev(1, 1)) ? refused("mknod") : done("mknod");
  if (!strcmp(c, "open-write")) { /* an existing file or device, never created */
    int fd = open(a1, O_WRONLY);
    return fd < 0 ? refused("open for writing") : done("opened for writing");
  }
  if (!strcmp(c, "read")) {
    int fd = open(a1, O_RDONLY);
    if (fd < 0) return refused("open for reading");
    char buf[4096];
    ssize_t n = read(fd, buf, sizeof buf - 1);
    if (n < 0) return refused("read");
    buf[n] = 0;
    printf("%s\n", buf);
    return done("read");
  }
  if (!strcmp(c, "opendir")) {
    int fd = open(a1, O_RDONLY | O_DIRECTORY);
    return fd < 0 ? refused("open the directory") : done("opened");
  }
  if (!strcmp(c, "scratch")) { /* the positive control: TMPDIR is writable scratch */
    char p[256];
    snprintf(p, sizeof p, "%s/kt-scratch", getenv("TMPDIR") ? getenv("TMPDIR") : "/nonexistent");
    int fd = open(p, O_WRONLY | O_CREAT, 0600);
    if (fd < 0 || write(fd, "s", 1) != 1) return refused("write to TMPDIR");
    return done(p);
  }

  /* Processes. */
  if (!strcmp(c, "kill")) return kill(atoi(a1), SIGKILL) ? refused("kill") : done("killed");
  if (!strcmp(c, "kill-all")) {
    /* Everything this uid may signal; in the sandbox that is the call itself (we ignore
       the signal by being its sender: kill(-1) spares the caller). */
    return kill(-1, SIGKILL) ? refused("kill -1") : done("sent kill -1");
  }
  if (!strcmp(c, "ptrace")) {
    return ptrace(PTRACE_ATTACH, atoi(a1), 0, 0) ? refused("ptrace attach") : done("attached");
  }
  if (!strcmp(c, "daemon")) { /* try to outlive the call */
    pid_t p = fork();
    if (p < 0) return refused("fork");
    if (p == 0) {
      setsid();
      if (fork() == 0) {
        char *av[] = {"sleep", (char *)a1, NULL};
        execvp("sleep", av);
        _exit(1);
      }
      _exit(0);
    }
    waitpid(p, NULL, 0);
    return done("daemon started");
  }
  if (!strcmp(c, "forkbomb")) { /* hold as many processes as we may, briefly */
    int want = atoi(a1), n = 0;
    for (; n < want; n++) {
      pid_t p = fork();
      if (p < 0) break;
      if (p == 0) { sleep(3); _exit(0); }
    }
    int e = errno;
    printf("forked %d\n", n);
    while (wait(NULL) > 0) {}
    errno = e;
    return n < want ? refused("fork") : done("forked all");
  }
  if (!strcmp(c, "alloc")) { /* touch N MiB */
    long mib = atol(a1);
    for (long i = 0; i < mib && i < (1 << 16); i++) {
      volatile char *m = malloc(1 << 20);
      if (!m) { printf("allocated %ld MiB\n", i); return refused("malloc"); }
      for (long off = 0; off < (1 << 20); off += 4096) m[off] = 1; /* really touch it */
      held[i] = m;
    }
    return done("allocated all");
  }
  if (!strcmp(c, "setuid0")) return setuid(0) ? refused("setuid 0") : done("root again");
  if (!strcmp(c, "cgroup-join")) { /* move itself to another cgroup (out of its caps) */
    int fd = open(a1, O_WRONLY);
    if (fd < 0) return refused("open cgroup.procs");
    char pid[16];
    int n = snprintf(pid, sizeof pid, "%d\n", (int)getpid());
    return write(fd, pid, n) != n ? refused("write cgroup.procs") : done("moved");
  }
  if (!strcmp(c, "raise-limit")) { /* past the hard process limit the call was given */
    struct rlimit rl;
    getrlimit(RLIMIT_NPROC, &rl);
    if (rl.rlim_max != RLIM_INFINITY) rl.rlim_max += 1000;
    rl.rlim_cur = rl.rlim_max;
    return setrlimit(RLIMIT_NPROC, &rl) ? refused("setrlimit") : done("raised");
  }
  if (!strcmp(c, "euid")) { /* who this process is (after a setuid exec, say) */
    printf("euid %u\n", (unsigned)geteuid());
    return geteuid() == 0 ? done("euid 0") : (errno = EPERM, refused("not root"));
  }

  /* Network (loopback only in the guest: there is no other interface). */
  if (!strcmp(c, "tcp")) return tcp_connect(AF_INET, a1, atoi(a2));
  if (!strcmp(c, "tcp6")) return tcp_connect(AF_INET6, a1, atoi(a2));
  if (!strcmp(c, "udp")) {
    int s = socket(AF_INET, SOCK_DGRAM, 0);
    if (s < 0) return refused("socket");
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(atoi(a2))};
    inet_pton(AF_INET, a1, &a.sin_addr);
    return sendto(s, "x", 1, 0, (struct sockaddr *)&a, sizeof a) < 0 ? refused("sendto")
                                                                       : done("sent");
  }
  if (!strcmp(c, "listen")) {
    int s = socket(AF_INET, SOCK_STREAM, 0);
    if (s < 0) return refused("socket");
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(atoi(a1))};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (bind(s, (struct sockaddr *)&a, sizeof a) || listen(s, 1)) return refused("bind");
    return done("listening");
  }
  if (!strcmp(c, "icmp")) { /* an unprivileged ping socket */
    int s = socket(AF_INET, SOCK_DGRAM, IPPROTO_ICMP);
    return s < 0 ? refused("ping socket") : done("ping socket");
  }
  if (!strcmp(c, "rtnl-down")) { /* the routing socket a reader may open, asked to write:
                                    bring interface a1 (an index; 1 is lo) down */
    int s = socket(AF_NETLINK, SOCK_RAW, NETLINK_ROUTE);
    if (s < 0) return refused("netlink socket");
    struct {
      struct nlmsghdr nh;
      struct ifinfomsg ifi;
    } req = {.nh = {.nlmsg_len = sizeof req, .nlmsg_type = RTM_NEWLINK,
                    .nlmsg_flags = NLM_F_REQUEST | NLM_F_ACK, .nlmsg_seq = 1},
             .ifi = {.ifi_family = AF_UNSPEC, .ifi_index = atoi(a1), .ifi_change = IFF_UP}};
    if (send(s, &req, sizeof req, 0) < 0) return refused("send");
    char buf[4096];
    ssize_t n = recv(s, buf, sizeof buf, 0);
    if (n < 0) return refused("recv");
    struct nlmsghdr *h = (struct nlmsghdr *)buf;
    if (h->nlmsg_type == NLMSG_ERROR) {
      int e = ((struct nlmsgerr *)NLMSG_DATA(h))->error;
      if (e < 0) {
        errno = -e;
        return refused("RTM_NEWLINK");
      }
    }
    return done("interface changed");
  }
  if (!strcmp(c, "packet")) {
    int s = socket(AF_PACKET, SOCK_RAW, htons(3 /* ETH_P_ALL */));
    return s < 0 ? refused("packet socket") : done("packet socket");
  }
  if (!strcmp(c, "netlink")) { /* a1: protocol number */
    int s = socket(AF_NETLINK, SOCK_RAW, atoi(a1));
    return s < 0 ? refused("netlink socket") : done("netlink socket");
  }
  if (!strcmp(c, "unix") || !strcmp(c, "unix-abstract")) {
    int s = socket(AF_UNIX, SOCK_STREAM, 0);
    if (s < 0) return refused("socket");
    struct sockaddr_un a;
    int l = unix_addr(&a, a1, !strcmp(c, "unix-abstract"));
    return connect(s, (struct sockaddr *)&a, l) ? refused("connect") : done("connected");
  }
  if (!strcmp(c, "unix-dgram")) {
    int s = socket(AF_UNIX, SOCK_DGRAM, 0);
    if (s < 0) return refused("socket");
    struct sockaddr_un a;
    int l = unix_addr(&a, a1, 0);
    return sendto(s, "x", 1, 0, (struct sockaddr *)&a, l) < 0 ? refused("sendto") : done("sent");
  }
  if (!strcmp(c, "pair-dgram")) { /* a datagram pair can send to any named socket */
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_DGRAM, 0, sv)) return refused("socketpair");
    struct sockaddr_un a;
    int l = unix_addr(&a, a1, 0);
    return sendto(sv[0], "x", 1, 0, (struct sockaddr *)&a, l) < 0 ? refused("sendto")
                                                                   : done("sent");
  }
  if (!strcmp(c, "pair-stream")) { /* the positive control: plumbing between own processes */
    int sv[2];
    char b[2] = {0};
    if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv)) return refused("socketpair");
    if (write(sv[0], "p", 1) != 1 || read(sv[1], b, 1) != 1) return refused("pair");
    return done("paired");
  }

  /* Locks. */
  if (!strcmp(c, "flock")) {
    int fd = open(a1, O_RDONLY);
    if (fd < 0) return refused("open");
    return flock(fd, LOCK_SH | LOCK_NB) ? refused("flock") : done("locked");
  }
  if (!strcmp(c, "posix-lock") || !strcmp(c, "ofd-lock") || !strcmp(c, "getlk")) {
    int fd = open(a1, O_RDONLY);
    if (fd < 0) return refused("open");
    struct flock fl = {.l_type = F_RDLCK, .l_whence = SEEK_SET};
    int cmd = !strcmp(c, "posix-lock") ? F_SETLK : !strcmp(c, "ofd-lock") ? F_OFD_SETLK : F_GETLK;
    return fcntl(fd, cmd, &fl) ? refused("fcntl lock") : done("fcntl lock");
  }
  if (!strcmp(c, "lease")) {
    int fd = open(a1, O_RDONLY);
    if (fd < 0) return refused("open");
    return fcntl(fd, F_SETLEASE, F_RDLCK) ? refused("lease") : done("lease");
  }

  /* System V IPC and POSIX queues. */
  if (!strcmp(c, "shm-find")) { /* a1: key (decimal) of the device's segment */
    int id = shmget((key_t)atol(a1), 0, 0);
    return id < 0 ? refused("shmget existing") : done("found the device's segment");
  }
  if (!strcmp(c, "shm-make")) {
    int id = shmget(IPC_PRIVATE, 65536, IPC_CREAT | 0600);
    return id < 0 ? refused("shmget") : done("segment made");
  }
  if (!strcmp(c, "msg-make")) {
    int id = msgget(IPC_PRIVATE, IPC_CREAT | 0600);
    return id < 0 ? refused("msgget") : done("queue made");
  }
  if (!strcmp(c, "sem-make")) {
    int id = semget(IPC_PRIVATE, 1, IPC_CREAT | 0600);
    return id < 0 ? refused("semget") : done("semaphore made");
  }
  if (!strcmp(c, "mq-make")) {
    long fd = syscall(SYS_mq_open, "kt-queue", O_CREAT | O_RDWR, 0600, NULL);
    return fd < 0 ? refused("mq_open") : done("POSIX queue made");
  }

  /* Escapes and the kernel. */
  if (!strcmp(c, "unshare")) { /* a1: user|mount|net|pid|ipc|uts */
    int f = !strcmp(a1, "user") ? CLONE_NEWUSER : !strcmp(a1, "mount") ? CLONE_NEWNS
          : !strcmp(a1, "net") ? CLONE_NEWNET : !strcmp(a1, "pid") ? CLONE_NEWPID
          : !strcmp(a1, "ipc") ? CLONE_NEWIPC : CLONE_NEWUTS;
    return unshare(f) ? refused("unshare") : done("unshared");
  }
  if (!strcmp(c, "clone-userns")) {
    long r = syscall(SYS_clone, CLONE_NEWUSER | SIGCHLD, 0, 0, 0, 0);
    if (r == 0) _exit(0);
    return r < 0 ? refused("clone(CLONE_NEWUSER)") : done("cloned");
  }
  if (!strcmp(c, "setns")) {
    int fd = open(a1, O_RDONLY);
    if (fd < 0) return refused("open namespace");
    return setns(fd, 0) ? refused("setns") : done("entered");
  }
  if (!strcmp(c, "chroot")) return chroot(a1) ? refused("chroot") : done("chrooted");
  if (!strcmp(c, "mount"))
    return mount("none", a1, "tmpfs", 0, "") ? refused("mount") : done("mounted");
  if (!strcmp(c, "remount-rw"))
    return mount(NULL, a1, NULL, MS_REMOUNT | MS_BIND, NULL) ? refused("remount") : done("rw");
  if (!strcmp(c, "umount")) return umount2(a1, MNT_DETACH) ? refused("umount") : done("unmounted");
  if (!strcmp(c, "pivot_root"))
    return syscall(SYS_pivot_root, a1, a2) ? refused("pivot_root") : done("pivoted");
  if (!strcmp(c, "open_by_handle")) {
    union { struct file_handle h; unsigned char b[sizeof(struct file_handle) + 128]; } fh;
    fh.h.handle_bytes = 128;
    int mount_id;
    if (name_to_handle_at(AT_FDCWD, a1, &fh.h, &mount_id, 0)) return refused("name_to_handle_at");
    return open_by_handle_at(AT_FDCWD, &fh.h, O_RDONLY) < 0 ? refused("open_by_handle_at")
                                                            : done("opened by handle");
  }
  if (!strcmp(c, "bpf")) return syscall(SYS_bpf, 0, NULL, 0) < 0 ? refused("bpf") : done("bpf");
  if (!strcmp(c, "perf")) {
    unsigned char attr[128] = {0};
    return syscall(SYS_perf_event_open, attr, 0, -1, -1, 0) < 0 ? refused("perf_event_open")
                                                                : done("perf");
  }
  if (!strcmp(c, "io_uring")) {
    unsigned char params[120] = {0};
    return syscall(SYS_io_uring_setup, 4, params) < 0 ? refused("io_uring_setup") : done("ring");
  }
  if (!strcmp(c, "userfaultfd"))
    return syscall(SYS_userfaultfd, 0) < 0 ? refused("userfaultfd") : done("userfaultfd");
  if (!strcmp(c, "keyctl")) /* KEYCTL_GET_KEYRING_ID of the session keyring */
    return syscall(SYS_keyctl, 0, -3, 0) < 0 ? refused("keyctl") : done("keyctl");
  if (!strcmp(c, "finit_module")) {
    int fd = open(a1, O_RDONLY);
    if (fd < 0) return refused("open the module");
    return syscall(SYS_finit_module, fd, "", 0) ? refused("finit_module") : done("loaded");
  }
  if (!strcmp(c, "delete_module"))
    return syscall(SYS_delete_module, a1, O_NONBLOCK) ? refused("delete_module") : done("unloaded");
  if (!strcmp(c, "reboot")) /* if this ever succeeds the guest restarts and the run fails */
    return reboot(RB_AUTOBOOT) ? refused("reboot") : done("rebooting");
  if (!strcmp(c, "sethostname"))
    return sethostname("kt-evil", 7) ? refused("sethostname") : done("renamed");
  if (!strcmp(c, "settime")) {
    struct timeval tv;
    gettimeofday(&tv, NULL);
    return settimeofday(&tv, NULL) ? refused("settimeofday") : done("clock set");
  }
  if (!strcmp(c, "swapoff")) return syscall(SYS_swapoff, "/") ? refused("swapoff") : done("swapoff");
  if (!strcmp(c, "syslog")) {
    char b[64];
    return syscall(SYS_syslog, 3 /* READ_ALL */, b, sizeof b) < 0 ? refused("syslog") : done("syslog");
  }
  if (!strcmp(c, "uinput")) { /* inject input: open /dev/uinput and make a device */
    int fd = open("/dev/uinput", O_WRONLY | O_NONBLOCK);
    if (fd < 0) return refused("open /dev/uinput");
    return done("uinput open");
  }
  if (!strcmp(c, "exec")) { /* run a program inside the sandbox */
    execvp(a1, argv + 2);
    return refused("exec");
  }
  fprintf(stderr, "kt: unknown command %s\n", c);
  return 2;
}

/* Arguments written `hex:2f6574...` are decoded first: a path the assessment cannot read
   is one only the kernel can stop. */
static void decode_hex_args(int argc, char **argv) {
  for (int i = 2; i < argc; i++) {
    if (strncmp(argv[i], "hex:", 4) != 0) continue;
    char *h = argv[i] + 4, *o = argv[i];
    for (; h[0] && h[1]; h += 2) {
      unsigned v;
      sscanf(h, "%2x", &v);
      *o++ = (char)v;
    }
    *o = 0;
  }
}

/* ---------- the device's side (run as root by the checks, never sandboxed) ---------- */

/* A host service: a world-writable named stream socket at PATH, a datagram socket at
   PATH.dgram and an abstract one named NAME; prints a line for every connection or
   datagram that reaches it (none must). */
static int cmd_serve_unix(int argc, char **argv) {
  if (argc != 4) return 2;
  int fds[3];
  struct sockaddr_un a;
  char dgram[200];
  snprintf(dgram, sizeof dgram, "%s.dgram", argv[2]);
  const char *paths[3] = {argv[2], dgram, argv[3]};
  for (int i = 0; i < 3; i++) {
    fds[i] = socket(AF_UNIX, i == 1 ? SOCK_DGRAM : SOCK_STREAM, 0);
    int l = unix_addr(&a, paths[i], i == 2);
    if (fds[i] < 0 || bind(fds[i], (struct sockaddr *)&a, l)) die("bind");
    if (i != 2) chmod(paths[i], 0777);
    if (i != 1 && listen(fds[i], 8)) die("listen");
  }
  printf("KTSVC ready\n");
  fflush(stdout);
  for (;;) {
    fd_set set;
    FD_ZERO(&set);
    for (int i = 0; i < 3; i++) FD_SET(fds[i], &set);
    if (select(fds[2] + 1, &set, NULL, NULL, NULL) < 0) continue;
    for (int i = 0; i < 3; i++) {
      if (!FD_ISSET(fds[i], &set)) continue;
      char b[64];
      if (i == 1) recv(fds[i], b, sizeof b, 0);
      else close(accept(fds[i], NULL, NULL));
      printf("KTSVC reached %s\n", paths[i]);
      fflush(stdout);
    }
  }
}

/* A System V segment of the device's, with KEY, left in place. */
static int cmd_ipc_setup(int argc, char **argv) {
  if (argc != 3) return 2;
  int id = shmget((key_t)atol(argv[2]), 4096, IPC_CREAT | 0666);
  if (id < 0) die("shmget");
  printf("%d\n", id);
  return 0;
}

/* Whether SIGSYS is pending for the thread pid (or its process). */
static int pending_sigsys(pid_t pid) {
  char path[64], line[256];
  snprintf(path, sizeof path, "/proc/%d/status", pid);
  FILE *f = fopen(path, "r");
  if (!f) return 0;
  int found = 0;
  while (fgets(line, sizeof line, f)) {
    if (strncmp(line, "SigPnd:", 7) && strncmp(line, "ShdPnd:", 7)) continue;
    unsigned long long mask = strtoull(line + 7, NULL, 16);
    if (mask & (1ULL << (SIGSYS - 1))) found = 1;
  }
  fclose(f);
  return found;
}

/* kt inject PID execve|ptrace|open:PATH: make the process PID (netd, as root) perform
   one system call, through ptrace: the call runs in its own context, under its own
   seccomp filter and Landlock domain, as if an attacker had taken over its control flow.
   Prints `KTI:killed:<signal>` if the kernel killed it, else `KTI:returned:<ERRNO or
   value>`; the process then goes on where it was. */
/* ---------- a touchscreen and a reader of its events ---------- */

static volatile sig_atomic_t ts_signal;
static void ts_on(int s) { ts_signal = s; }

static void ts_emit(int fd, int type, int code, int value) {
  struct input_event e;
  memset(&e, 0, sizeof e);
  e.type = type;
  e.code = code;
  e.value = value;
  if (write(fd, &e, sizeof e) != (ssize_t)sizeof e) die("write /dev/uinput");
}

/* /dev/input/eventN of input device SYSNAME (inputM), from sysfs. */
static int event_node_of(const char *sysname, char *out, size_t n) {
  char dir[160];
  snprintf(dir, sizeof dir, "/sys/class/input/%s", sysname);
  DIR *d = opendir(dir);
  if (!d) return -1;
  struct dirent *e;
  int found = -1;
  while ((e = readdir(d)))
    if (!strncmp(e->d_name, "event", 5)) {
      snprintf(out, n, "/dev/input/%s", e->d_name);
      found = 0;
      break;
    }
  closedir(d);
  return found;
}

static int cmd_touchscreen(int argc, char **argv) {
  if (argc < 5) return 2;
  int fd = open("/dev/uinput", O_WRONLY | O_CLOEXEC);
  if (fd < 0) die("open /dev/uinput");
  struct { int code, max; } axes[] = {
      {ABS_MT_SLOT, 9},           {ABS_MT_TRACKING_ID, 65535},
      {ABS_MT_POSITION_X, atoi(argv[3])}, {ABS_MT_POSITION_Y, atoi(argv[4])},
      {ABS_MT_PRESSURE, 255},     {ABS_MT_TOUCH_MAJOR, 255},
  };
  if (ioctl(fd, UI_SET_EVBIT, EV_KEY) || ioctl(fd, UI_SET_EVBIT, EV_ABS) ||
      ioctl(fd, UI_SET_KEYBIT, BTN_TOUCH) || ioctl(fd, UI_SET_KEYBIT, BTN_TOOL_FINGER) ||
      ioctl(fd, UI_SET_PROPBIT, INPUT_PROP_DIRECT))
    die("uinput bits");
  for (size_t i = 0; i < sizeof axes / sizeof axes[0]; i++) {
    struct uinput_abs_setup a;
    memset(&a, 0, sizeof a);
    a.code = axes[i].code;
    a.absinfo.maximum = axes[i].max;
    if (ioctl(fd, UI_SET_ABSBIT, axes[i].code) || ioctl(fd, UI_ABS_SETUP, &a)) die("UI_ABS_SETUP");
  }
  struct uinput_setup setup;
  memset(&setup, 0, sizeof setup);
  setup.id.bustype = BUS_I2C;
  snprintf(setup.name, sizeof setup.name, "%s", argv[2]);
  if (ioctl(fd, UI_DEV_SETUP, &setup) || ioctl(fd, UI_DEV_CREATE)) die("UI_DEV_CREATE");
  char sys[64] = {0}, node[128] = {0};
  if (ioctl(fd, UI_GET_SYSNAME(sizeof sys), sys) < 0) die("UI_GET_SYSNAME");
  for (int i = 0; i < 500; i++) {
    if (!event_node_of(sys, node, sizeof node) && !access(node, F_OK)) break;
    node[0] = 0;
    usleep(10000);
  }
  if (!node[0]) die("no event node");
  signal(SIGUSR1, ts_on);
  signal(SIGUSR2, ts_on);
  signal(SIGTERM, ts_on);
  sigset_t block, old;
  sigemptyset(&block);
  sigaddset(&block, SIGUSR1);
  sigaddset(&block, SIGUSR2);
  sigaddset(&block, SIGTERM);
  sigprocmask(SIG_BLOCK, &block, &old);
  printf("%s\n", node);
  for (;;) {
    while (!ts_signal) sigsuspend(&old);
    int s = ts_signal;
    ts_signal = 0;
    if (s == SIGTERM) break;
    int down = s == SIGUSR1;
    ts_emit(fd, EV_ABS, ABS_MT_SLOT, 0);
    ts_emit(fd, EV_ABS, ABS_MT_TRACKING_ID, down ? 77 : -1);
    if (down) {
      ts_emit(fd, EV_ABS, ABS_MT_POSITION_X, 10);
      ts_emit(fd, EV_ABS, ABS_MT_POSITION_Y, 10);
    }
    ts_emit(fd, EV_KEY, BTN_TOUCH, down);
    ts_emit(fd, EV_SYN, SYN_REPORT, 0);
    printf("%s\n", down ? "down" : "up");
  }
  ioctl(fd, UI_DEV_DESTROY);
  return 0;
}

static double ev_ms(const struct input_event *e) {
  return e->input_event_sec * 1000.0 + e->input_event_usec / 1000.0;
}

/* The first event node that appears after the start and is named NAME. */
static int open_new_named(const char *name, int max_ms) {
  char seen[64] = {0};
  DIR *d = opendir("/dev/input");
  struct dirent *e;
  while (d && (e = readdir(d)))
    if (!strncmp(e->d_name, "event", 5)) {
      int n = atoi(e->d_name + 5);
      if (n >= 0 && n < 512) seen[n / 8] |= 1 << (n % 8);
    }
  if (d) closedir(d);
  printf("ready\n");
  for (int waited = 0; waited < max_ms; waited += 2) {
    d = opendir("/dev/input");
    while (d && (e = readdir(d))) {
      if (strncmp(e->d_name, "event", 5)) continue;
      int n = atoi(e->d_name + 5);
      if (n < 0 || n >= 512 || seen[n / 8] & (1 << (n % 8))) continue;
      char path[300], got[256] = {0};
      snprintf(path, sizeof path, "/dev/input/%s", e->d_name);
      int fd = open(path, O_RDONLY | O_CLOEXEC);
      if (fd < 0) continue;
      if (ioctl(fd, EVIOCGNAME(sizeof got - 1), got) >= 0 && !strcmp(got, name)) {
        closedir(d);
        fprintf(stderr, "reading %s\n", path);
        return fd;
      }
      close(fd);
      seen[n / 8] |= 1 << (n % 8);
    }
    if (d) closedir(d);
    usleep(2000);
  }
  return -1;
}

static int cmd_events(int argc, char **argv) {
  if (argc < 5) return 2;
  int max_ms = atoi(argv[3]), idle_ms = atoi(argv[4]), fd;
  if (!strncmp(argv[2], "new:", 4)) {
    fd = open_new_named(argv[2] + 4, max_ms);
    if (fd < 0) { printf("none\n"); return 1; }
  } else {
    fd = open(argv[2], O_RDONLY | O_CLOEXEC);
    if (fd < 0) die(argv[2]);
    printf("ready\n");
  }
  struct timespec t0;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  double first = -1;
  for (;;) {
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    int spent = (now.tv_sec - t0.tv_sec) * 1000 + (now.tv_nsec - t0.tv_nsec) / 1000000;
    int wait = first < 0 ? max_ms - spent : idle_ms;
    if (wait <= 0) break;
    struct pollfd p = {.fd = fd, .events = POLLIN};
    int r = poll(&p, 1, wait);
    if (r <= 0) break;
    struct input_event ev[64];
    ssize_t n = read(fd, ev, sizeof ev);
    if (n <= 0) break; /* ENODEV: the device went */
    for (ssize_t i = 0; i < n / (ssize_t)sizeof ev[0]; i++) {
      if (first < 0) first = ev_ms(&ev[i]);
      printf("E %.1f %u %u %d\n", ev_ms(&ev[i]) - first, ev[i].type, ev[i].code, ev[i].value);
    }
  }
  return 0;
}

static int cmd_inject(int argc, char **argv) {
  if (argc != 4) return 2;
  pid_t pid = atoi(argv[2]);
  const char *what = argv[3];
  if (ptrace(PTRACE_SEIZE, pid, 0, 0)) die("PTRACE_SEIZE");
  if (ptrace(PTRACE_INTERRUPT, pid, 0, 0)) die("PTRACE_INTERRUPT");
  int st;
  if (waitpid(pid, &st, __WALL) < 0) die("waitpid");
  struct user_regs_struct saved, r;
  if (ptrace(PTRACE_GETREGS, pid, 0, &saved)) die("PTRACE_GETREGS");
  /* A syscall instruction (0f 05): the one the thread was stopped in, just before rip. */
  unsigned long at = 0;
  for (long d = -2; d <= 0 && !at; d += 2) {
    errno = 0;
    long w = ptrace(PTRACE_PEEKTEXT, pid, saved.rip + d, 0);
    if (!errno && (w & 0xffff) == 0x050f) at = saved.rip + d;
  }
  if (!at) {
    fprintf(stderr, "kt inject: no syscall instruction at rip %llx\n",
            (unsigned long long)saved.rip);
    return 2;
  }
  r = saved;
  r.orig_rax = -1;
  r.rip = at;
  r.rdi = r.rsi = r.rdx = r.r10 = r.r8 = r.r9 = 0;
  if (!strcmp(what, "execve")) {
    r.rax = SYS_execve;
  } else if (!strcmp(what, "ptrace")) {
    r.rax = SYS_ptrace; /* PTRACE_TRACEME */
  } else if (!strncmp(what, "open:", 5)) {
    /* The path on the thread's stack, well below its red zone. */
    const char *path = what + 5;
    unsigned long buf = (saved.rsp - 4096) & ~15UL;
    size_t n = strlen(path) + 1;
    for (size_t i = 0; i < n; i += sizeof(long)) {
      long word = 0;
      memcpy(&word, path + i, n - i < sizeof(long) ? n - i : sizeof(long));
      if (ptrace(PTRACE_POKEDATA, pid, buf + i, word)) die("PTRACE_POKEDATA");
    }
    r.rax = SYS_openat;
    r.rdi = AT_FDCWD;
    r.rsi = buf;
    r.rdx = O_RDONLY | O_CLOEXEC; /* as File::open */
  } else {
    return 2;
  }
  if (ptrace(PTRACE_SETREGS, pid, 0, &r)) die("PTRACE_SETREGS");
  /* To the syscall-entry stop (ptrace reports before seccomp decides), then on. */
  for (int stop = 0; stop < 2; stop++) {
    if (ptrace(PTRACE_SYSCALL, pid, 0, 0)) die("PTRACE_SYSCALL");
    if (waitpid(pid, &st, __WALL) < 0) die("waitpid");
    if (WIFSIGNALED(st)) {
      printf("KTI:killed:%d\n", WTERMSIG(st));
      return 0;
    }
    if (WIFEXITED(st)) {
      printf("KTI:exited:%d\n", WEXITSTATUS(st));
      return 0;
    }
    if (WIFSTOPPED(st) && WSTOPSIG(st) == SIGSYS) { /* a SECCOMP_RET_TRAP-style signal */
      ptrace(PTRACE_CONT, pid, 0, SIGSYS);
      waitpid(pid, &st, __WALL);
      printf("KTI:killed:%d\n", WIFSIGNALED(st) ? WTERMSIG(st) : -1);
      return 0;
    }
  }
  /* The syscall-exit stop. A call seccomp kills for is skipped, and reaches this stop too,
     with the process's SIGSYS pending: let it be delivered, and see the end. */
  if (pending_sigsys(pid)) {
    for (int sig = 0;;) {
      if (ptrace(PTRACE_CONT, pid, 0, sig)) die("PTRACE_CONT");
      if (waitpid(pid, &st, __WALL) < 0) die("waitpid");
      if (WIFSIGNALED(st)) {
        printf("KTI:killed:%d\n", WTERMSIG(st));
        return 0;
      }
      if (WIFEXITED(st)) {
        printf("KTI:exited:%d\n", WEXITSTATUS(st));
        return 0;
      }
      sig = WIFSTOPPED(st) ? WSTOPSIG(st) : 0;
      if (sig == SIGTRAP || sig == SIGSTOP) sig = 0;
    }
  }
  /* Its result; then the thread's own call again, from the start, as the kernel restarts
     an interrupted one. */
  if (ptrace(PTRACE_GETREGS, pid, 0, &r)) die("PTRACE_GETREGS");
  long ret = (long)r.rax;
  if (ret < 0 && ret > -4096) printf("KTI:returned:%s\n", errname((int)-ret));
  else printf("KTI:returned:%ld\n", ret);
  saved.rax = saved.orig_rax;
  saved.orig_rax = -1;
  saved.rip = at;
  if (ptrace(PTRACE_SETREGS, pid, 0, &saved)) die("PTRACE_SETREGS");
  if (ptrace(PTRACE_DETACH, pid, 0, 0)) die("PTRACE_DETACH");
  return 0;
}

int main(int argc, char **argv) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  if (argc < 2) {
    fprintf(stderr, "usage: kt post|json|deny|landlock-abi|<attack> ...\n");
    return 2;
  }
  if (!strcmp(argv[1], "post")) return cmd_post(argc, argv);
  if (!strcmp(argv[1], "json")) return cmd_json(argc, argv);
  if (!strcmp(argv[1], "deny")) return cmd_deny(argc, argv);
  if (!strcmp(argv[1], "landlock-abi")) return cmd_landlock_abi();
  if (!strcmp(argv[1], "serve-unix")) return cmd_serve_unix(argc, argv);
  if (!strcmp(argv[1], "ipc-setup")) return cmd_ipc_setup(argc, argv);
  if (!strcmp(argv[1], "inject")) return cmd_inject(argc, argv);
  if (!strcmp(argv[1], "touchscreen")) return cmd_touchscreen(argc, argv);
  if (!strcmp(argv[1], "events")) return cmd_events(argc, argv);
  if (!strcmp(argv[1], "as")) { /* kt as UID GID -- PROG ARGS: another program's identity */
    if (argc < 6 || strcmp(argv[4], "--")) return 2;
    uid_t uid = (uid_t)strtoul(argv[2], NULL, 10);
    gid_t gid = (gid_t)strtoul(argv[3], NULL, 10);
    if (setgroups(0, NULL) || setresgid(gid, gid, gid) || setresuid(uid, uid, uid)) die("as");
    execvp(argv[5], argv + 5);
    die(argv[5]);
  }
  decode_hex_args(argc, argv);
  if (argv[1][0] != '@') return attack(argc, argv);
  /* Several attempts in one run: `@name cmd args @name cmd args ...`; each result line
     is labelled `KTR:name:...`. */
  int failed = 0;
  for (int i = 1; i < argc;) {
    int j = i + 1;
    while (j < argc && argv[j][0] != '@') j++;
    char *saved = argv[j < argc ? j : argc];
    argv[j < argc ? j : argc] = NULL;
    label = argv[i] + 1;
    argv[i] = argv[0];
    failed |= attack(j - i, argv + i);
    if (j < argc) argv[j] = saved;
    i = j;
  }
  return failed;
}
