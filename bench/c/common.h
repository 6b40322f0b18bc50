/* What bench/c/rdkafka_produce.c and bench/c/rdkafka_consume.c share: the clock, fatal
 * errors, and librdkafka's statistics appended to a file (-s FILE).
 *
 * A program defines PROG (its name, for messages) before including this header. Every
 * function is static inline: each program is one translation unit, and one that leaves a
 * helper unused gets no warning. */
#ifndef ODRADEK_BENCH_C_COMMON_H
#define ODRADEK_BENCH_C_COMMON_H

#include <librdkafka/rdkafka.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#ifndef PROG
#error "define PROG (the program's name) before including common.h"
#endif

static inline double now(clockid_t clock) {
    struct timespec ts;
    clock_gettime(clock, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* Print "PROG: what: why" and exit with 2 (a usage or setup error, not a failed run). */
static inline void die(const char *what, const char *why) {
    fprintf(stderr, PROG ": %s: %s\n", what, why);
    exit(2);
}

static FILE *stats_out;

/* librdkafka's statistics callback: one JSON document per line. It runs from the thread that
 * serves the main queue (rd_kafka_poll, or rd_kafka_consumer_poll once the main queue is
 * forwarded to the consumer's), so no locking is needed. */
static inline int on_stats(rd_kafka_t *rk, char *json, size_t len, void *opaque) {
    (void)rk;
    (void)opaque;
    fwrite(json, 1, len, stats_out);
    fputc('\n', stats_out);
    return 0; /* librdkafka frees json */
}

/* -s FILE: append the statistics to FILE (the interval is the caller's to set). */
static inline void stats_to(rd_kafka_conf_t *conf, const char *path) {
    if (!(stats_out = fopen(path, "a"))) die(path, "cannot open");
    rd_kafka_conf_set_stats_cb(conf, on_stats);
}

static inline void stats_close(void) {
    if (stats_out) fclose(stats_out);
    stats_out = NULL;
}

#endif
