/* faultshim: an LD_PRELOAD library that kills or fails a process at its Nth I/O call.
 *
 * Used by the reliability tests (tests/reliability) to reach kill points and I/O faults *inside*
 * C code that Python cannot patch: SQLite's pwrite/fdatasync of the WAL, libpq's send/recv of a
 * COMMIT, as well as the JSONL backend's write/fsync/rename. It is inert until armed, so a
 * process can run with it preloaded and only the part under test is counted.
 *
 * Control (through ctypes, from the process itself):
 *   acs_arm(at, action, err, classes)  reset the counter; count `classes` calls; act at call `at`
 *   acs_disarm()                        stop counting
 *   acs_ignore_fd(fd)                   never count this fd (the test's own acknowledgement file)
 *   acs_count()                         calls counted since acs_arm
 *   acs_fired()                         how many times the action was taken
 *
 * Actions: 0 kill before the call, 1 kill after it, 2 write half the bytes then kill (a torn
 * write; other calls: kill before), 3 fail that one call with `err`, 4 fail it and every later
 * counted call with `err` (a disk that has gone bad or full).
 * Classes (bit mask): 1 data writes, 2 syncs, 4 metadata (rename, unlink, ftruncate), 8 network.
 *
 * Not part of the product; compiled by the tests with the system C compiler.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <unistd.h>

#define C_WRITE 1
#define C_SYNC 2
#define C_META 4
#define C_NET 8

static volatile long s_at = 0, s_count = 0, s_fired = 0;
static volatile int s_armed = 0, s_action = 0, s_err = 0, s_failing = 0;
static volatile unsigned s_classes = 0;
static int s_ignored[16];
static int s_nignored = 0;

void acs_arm(long at, int action, int err, unsigned classes) {
    s_at = at; s_action = action; s_err = err; s_classes = classes;
    s_count = 0; s_fired = 0; s_failing = 0; s_armed = 1;
}
void acs_disarm(void) { s_armed = 0; s_failing = 0; }
void acs_ignore_fd(int fd) { if (s_nignored < 16) s_ignored[s_nignored++] = fd; }
long acs_count(void) { return s_count; }
long acs_fired(void) { return s_fired; }

static int ignored(int fd) {
    if (fd >= 0 && fd <= 2) return 1; /* stdin/stdout/stderr: test chatter, not the ledger */
    for (int i = 0; i < s_nignored; i++) if (s_ignored[i] == fd) return 1;
    return 0;
}

static void die(void) { kill(getpid(), SIGKILL); for (;;) pause(); }

/* A network failure must break the connection for real: a socket that reports ECONNRESET but
 * still works would leave client and server each waiting for the other, which no real fault
 * does (libpq, after a failed send, waits to read the server's last words). */
static int fail(unsigned cls, int fd) {
    if (cls == C_NET && fd >= 0) shutdown(fd, SHUT_RDWR);
    errno = s_err;
    return -1;
}

/* Decide what to do for one call: 0 proceed, 1 kill after, 2 torn write, -1 fail (errno set). */
static int decide(unsigned cls, int fd) {
    if (!s_armed || !(s_classes & cls) || (fd >= 0 && ignored(fd))) return 0;
    if (s_failing) return fail(cls, fd);
    long n = ++s_count;
    if (n != s_at) return 0;
    s_fired++;
    switch (s_action) {
    case 0: die(); return 0;
    case 1: return 1;
    case 2: return (cls == C_WRITE) ? 2 : (die(), 0);
    case 3: return fail(cls, fd);
    case 4: s_failing = 1; return fail(cls, fd);
    }
    return 0;
}

#define REAL(name) static __typeof__(name) *real_##name; \
    if (!real_##name) real_##name = (__typeof__(name) *)dlsym(RTLD_NEXT, #name)

ssize_t write(int fd, const void *buf, size_t n) {
    REAL(write);
    int d = decide(C_WRITE, fd);
    if (d < 0) return -1;
    if (d == 2) { real_write(fd, buf, n / 2); die(); }
    ssize_t r = real_write(fd, buf, n);
    if (d == 1) die();
    return r;
}

ssize_t writev(int fd, const struct iovec *iov, int cnt) {
    REAL(writev);
    int d = decide(C_WRITE, fd);
    if (d < 0) return -1;
    if (d == 2 && cnt > 0) { real_writev(fd, iov, 1); die(); }
    ssize_t r = real_writev(fd, iov, cnt);
    if (d == 1) die();
    return r;
}

ssize_t pwrite(int fd, const void *buf, size_t n, off_t off) {
    REAL(pwrite);
    int d = decide(C_WRITE, fd);
    if (d < 0) return -1;
    if (d == 2) { real_pwrite(fd, buf, n / 2, off); die(); }
    ssize_t r = real_pwrite(fd, buf, n, off);
    if (d == 1) die();
    return r;
}

ssize_t pwrite64(int fd, const void *buf, size_t n, off64_t off) {
    REAL(pwrite64);
    int d = decide(C_WRITE, fd);
    if (d < 0) return -1;
    if (d == 2) { real_pwrite64(fd, buf, n / 2, off); die(); }
    ssize_t r = real_pwrite64(fd, buf, n, off);
    if (d == 1) die();
    return r;
}

#define SIMPLE(ret, name, cls, fdexpr, params, args) \
    ret name params { \
        REAL(name); \
        int d = decide(cls, fdexpr); \
        if (d < 0) return -1; \
        ret r = real_##name args; \
        if (d == 1) die(); \
        return r; \
    }

SIMPLE(int, fsync, C_SYNC, fd, (int fd), (fd))
SIMPLE(int, fdatasync, C_SYNC, fd, (int fd), (fd))
SIMPLE(int, ftruncate, C_META, fd, (int fd, off_t len), (fd, len))
SIMPLE(int, ftruncate64, C_META, fd, (int fd, off64_t len), (fd, len))
SIMPLE(int, rename, C_META, -1, (const char *a, const char *b), (a, b))
SIMPLE(int, renameat, C_META, -1, (int da, const char *a, int db, const char *b), (da, a, db, b))
SIMPLE(int, unlink, C_META, -1, (const char *p), (p))
SIMPLE(ssize_t, send, C_NET, fd, (int fd, const void *b, size_t n, int f), (fd, b, n, f))
SIMPLE(ssize_t, recv, C_NET, fd, (int fd, void *b, size_t n, int f), (fd, b, n, f))
