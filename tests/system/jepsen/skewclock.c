/* The wall clock of one process moved by an offset another process can change at any time.
 *
 * LD_PRELOAD'ed into an odradek node by nemesis/clock.py. ODJ_SKEW_FILE names a file of 8
 * bytes, a signed 64-bit count of nanoseconds, mapped shared: the nemesis writes a new
 * offset and the next clock read sees it. Only CLOCK_REALTIME (and its coarse variant),
 * gettimeofday, time and timespec_get move; CLOCK_MONOTONIC and every sleep or timed wait are
 * left to the kernel, so timers keep their length while timestamps are skewed.
 *
 * Why not libfaketime: Debian 12's 0.9.10 with FAKETIME_DONT_FAKE_MONOTONIC=1 hands
 * clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME) a negative time, so Python 3.11's
 * time.sleep fails with EINVAL (wolfcw/libfaketime#426); without that setting the monotonic
 * clock moves too and absolute-deadline waits (sem_clockwait) hang for the offset.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

static volatile int64_t *offset_ns;
static int (*real_clock_gettime)(clockid_t, struct timespec *);

__attribute__((constructor)) static void skew_init(void) {
    real_clock_gettime = (int (*)(clockid_t, struct timespec *))dlsym(RTLD_NEXT, "clock_gettime");
    const char *path = getenv("ODJ_SKEW_FILE");
    if (!path) return;
    int fd = open(path, O_RDONLY);
    if (fd < 0) return;
    void *p = mmap(NULL, sizeof(int64_t), PROT_READ, MAP_SHARED, fd, 0);
    close(fd);
    if (p != MAP_FAILED) offset_ns = (volatile int64_t *)p;
}

static void shift(struct timespec *ts) {
    int64_t off = offset_ns ? *offset_ns : 0;
    int64_t ns = (int64_t)ts->tv_sec * 1000000000LL + ts->tv_nsec + off;
    ts->tv_sec = ns / 1000000000LL;
    ts->tv_nsec = ns % 1000000000LL;
    if (ts->tv_nsec < 0) { ts->tv_nsec += 1000000000LL; ts->tv_sec -= 1; }
}

int clock_gettime(clockid_t clk, struct timespec *ts) {
    int rc = real_clock_gettime(clk, ts);
    if (rc == 0 && (clk == CLOCK_REALTIME || clk == CLOCK_REALTIME_COARSE)) shift(ts);
    return rc;
}

int gettimeofday(struct timeval *restrict tv, void *restrict tz) {
    (void)tz;
    struct timespec ts;
    int rc = clock_gettime(CLOCK_REALTIME, &ts);
    if (rc == 0) { tv->tv_sec = ts.tv_sec; tv->tv_usec = ts.tv_nsec / 1000; }
    return rc;
}

time_t time(time_t *out) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    if (out) *out = ts.tv_sec;
    return ts.tv_sec;
}

int timespec_get(struct timespec *ts, int base) {
    if (base != TIME_UTC) return 0;
    return clock_gettime(CLOCK_REALTIME, ts) == 0 ? base : 0;
}
