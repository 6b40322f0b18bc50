/* A librdkafka consumer with nothing on top, for the consume rows of `make bench`.
 *
 *   rdkafka_consume -b HOST:PORT -t TOPIC -n RECORDS [-T IDLE_SECONDS] [-s STATS_FILE]
 *                   [-C APP_CPU:LIB_CPU] [-X key=value ...]
 *
 * Assigns every partition of TOPIC from its beginning (no group is joined), reads until
 * RECORDS records or IDLE_SECONDS without one, and prints one JSON line: records, key + value
 * bytes, seconds from the first record to the last, and the process CPU seconds over the
 * same interval, in all and split by thread (the polling application thread, librdkafka's
 * broker threads that receive and parse Fetch responses, the rest). The fetch settings come from the caller (-X): bench/compare.py passes the
 * ones odradek ships (odradek.client.consumer_settings), so the client is no unknown.
 * With -s, librdkafka's statistics JSON (every statistics.interval.ms, 100 ms unless -X sets
 * it) is appended to STATS_FILE, one line each, for bench/consumer_bounds.py.
 * With -C, the application thread runs on core APP_CPU and every librdkafka thread on core
 * LIB_CPU (the same number: all on one core): librdkafka's threads are created by
 * rd_kafka_new (its broker threads later by its main thread) and inherit the affinity of
 * the thread that creates them, so the main thread takes LIB_CPU's mask before rd_kafka_new
 * and APP_CPU's after. It shows what handing each message from one core to another costs
 * (bench/RESULTS-s23b.md). */
#define _GNU_SOURCE
#define PROG "rdkafka_consume"
#include "common.h"

#include <dirent.h>
#include <sched.h>
#include <string.h>
#include <unistd.h>

/* CPU seconds of this process's threads by role, from /proc/self/task/<tid>/stat: [0] the
 * application thread (the one polling), [1] librdkafka's broker threads (`rdk:broker*`:
 * receive and parse Fetch responses), [2] the rest (librdkafka's main thread, ...). */
static void pin_to(int cpu) {
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    if (sched_setaffinity(0, sizeof set, &set)) die("sched_setaffinity", "failed");
}

static void thread_cpu(double out[3]) {
    out[0] = out[1] = out[2] = 0;
    DIR *d = opendir("/proc/self/task");
    if (!d) return;
    long tick = sysconf(_SC_CLK_TCK);
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.') continue;
        char path[300], buf[512];
        snprintf(path, sizeof path, "/proc/self/task/%s/stat", e->d_name);
        FILE *f = fopen(path, "r");
        if (!f) continue;
        size_t n = fread(buf, 1, sizeof buf - 1, f);
        fclose(f);
        buf[n] = '\0';
        char *open = strchr(buf, '('), *close = strrchr(buf, ')');
        if (!open || !close) continue;
        /* after ") ": state ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt
         * utime stime: utime is the 12th field, stime the 13th */
        unsigned long utime = 0, stime = 0;
        if (sscanf(close + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu", &utime,
                   &stime) != 2)
            continue;
        double sec = (double)(utime + stime) / tick;
        int role = atoi(e->d_name) == getpid() ? 0 : !strncmp(open + 1, "rdk:broker", 10) ? 1 : 2;
        out[role] += sec;
    }
    closedir(d);
}

int main(int argc, char **argv) {
    char err[512];
    const char *topic = NULL;
    long long want = 0;
    double idle = 10.0;
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    /* librdkafka wants a group id even for assign(); a per-process one joins nothing. */
    char group[64];
    snprintf(group, sizeof group, "odradek-c-bench-%d", (int)getpid());
    if (rd_kafka_conf_set(conf, "group.id", group, err, sizeof err) != RD_KAFKA_CONF_OK ||
        rd_kafka_conf_set(conf, "enable.auto.commit", "false", err, sizeof err) != RD_KAFKA_CONF_OK)
        die("conf", err);
    int opt;
    int stats_interval_set = 0, app_cpu = -1, lib_cpu = -1;
    while ((opt = getopt(argc, argv, "b:t:n:T:s:C:X:")) != -1) {
        switch (opt) {
        case 'b':
            if (rd_kafka_conf_set(conf, "bootstrap.servers", optarg, err, sizeof err))
                die("bootstrap.servers", err);
            break;
        case 't': topic = optarg; break;
        case 'n': want = atoll(optarg); break;
        case 'T': idle = atof(optarg); break;
        case 'C':
            if (sscanf(optarg, "%d:%d", &app_cpu, &lib_cpu) != 2 || app_cpu < 0 || lib_cpu < 0)
                die("-C", "want APP_CPU:LIB_CPU");
            break;
        case 's':
            stats_to(conf, optarg);
            break;
        case 'X': {
            char *eq = strchr(optarg, '=');
            if (!eq) die(optarg, "not key=value");
            *eq = '\0';
            if (!strcmp(optarg, "statistics.interval.ms")) stats_interval_set = 1;
            rd_kafka_conf_res_t r = rd_kafka_conf_set(conf, optarg, eq + 1, err, sizeof err);
            /* Debian's librdkafka (2.0.2) predates fetch.queue.backoff.ms (2.3): say so and
             * go on; there the queue-full backoff is a fixed second, only the queue sizes help. */
            if (r == RD_KAFKA_CONF_UNKNOWN)
                fprintf(stderr, "rdkafka_consume: librdkafka %s ignores %s: %s\n",
                        rd_kafka_version_str(), optarg, err);
            else if (r != RD_KAFKA_CONF_OK)
                die(optarg, err);
            break;
        }
        default:
            fprintf(stderr, "usage: %s -b HOST:PORT -t TOPIC -n RECORDS [-T S] [-s FILE] [-C A:L] [-X k=v]...\n",
                    argv[0]);
            return 2;
        }
    }
    if (!topic || want <= 0) die("usage", "-t TOPIC and -n RECORDS are required");
    if (stats_out && !stats_interval_set &&
        rd_kafka_conf_set(conf, "statistics.interval.ms", "100", err, sizeof err))
        die("statistics.interval.ms", err);

    if (lib_cpu >= 0) pin_to(lib_cpu);
    rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_CONSUMER, conf, err, sizeof err);
    if (!rk) die("rd_kafka_new", err);
    if (app_cpu >= 0) pin_to(app_cpu);
    rd_kafka_poll_set_consumer(rk);

    rd_kafka_topic_t *rkt = rd_kafka_topic_new(rk, topic, NULL);
    const struct rd_kafka_metadata *md;
    rd_kafka_resp_err_t e = rd_kafka_metadata(rk, 0, rkt, &md, 30000);
    if (e) die("metadata", rd_kafka_err2str(e));
    if (md->topic_cnt != 1 || md->topics[0].err)
        die(topic, md->topic_cnt ? rd_kafka_err2str(md->topics[0].err) : "no metadata");
    int parts = md->topics[0].partition_cnt;
    rd_kafka_topic_partition_list_t *list = rd_kafka_topic_partition_list_new(parts);
    for (int i = 0; i < parts; i++)
        rd_kafka_topic_partition_list_add(list, topic, md->topics[0].partitions[i].id)->offset =
            RD_KAFKA_OFFSET_BEGINNING;
    rd_kafka_metadata_destroy(md);
    rd_kafka_topic_destroy(rkt);
    if ((e = rd_kafka_assign(rk, list))) die("assign", rd_kafka_err2str(e));
    rd_kafka_topic_partition_list_destroy(list);

    long long count = 0, bytes = 0, errors = 0;
    double first = 0, last = now(CLOCK_MONOTONIC), cpu0 = 0, threads0[3] = {0, 0, 0};
    /* The clock is read at the first record, every 1,024th, the last one wanted, and when a
     * poll returns nothing (for the idle limit), not per record: per record it was a cost of
     * the tool, not of the broker (perf put 24% of this program's samples in
     * __vdso_clock_gettime on this VM; its CPU per record fell 4-6% without it,
     * bench/RESULTS-s23.md). A run that ends idle (a failed one: too few records) may end its
     * window up to 1,023 records early. */
    while (count < want) {
        rd_kafka_message_t *m = rd_kafka_consumer_poll(rk, 500);
        if (!m) {
            if (now(CLOCK_MONOTONIC) - last > idle) break;
            continue;
        }
        if (m->err) {
            if (m->err != RD_KAFKA_RESP_ERR__PARTITION_EOF && errors++ == 0)
                fprintf(stderr, "rdkafka_consume: %s\n", rd_kafka_message_errstr(m));
        } else {
            if (count == 0) {
                first = last = now(CLOCK_MONOTONIC);
                cpu0 = now(CLOCK_PROCESS_CPUTIME_ID);
                thread_cpu(threads0);
            }
            count++;
            bytes += (long long)m->len + (long long)m->key_len;
            if ((count & 1023) == 0 || count == want) last = now(CLOCK_MONOTONIC);
        }
        rd_kafka_message_destroy(m);
    }
    double cpu = count ? now(CLOCK_PROCESS_CPUTIME_ID) - cpu0 : 0;
    double threads[3];
    thread_cpu(threads);
    printf("{\"records\": %lld, \"bytes\": %lld, \"seconds\": %.6f, \"cpu_seconds\": %.6f, "
           "\"cpu_app\": %.2f, \"cpu_rdk_broker\": %.2f, \"cpu_other\": %.2f, "
           "\"errors\": %lld, \"librdkafka\": \"%s\"}\n",
           count, bytes, count ? last - first : 0.0, cpu, threads[0] - threads0[0],
           threads[1] - threads0[1], threads[2] - threads0[2], errors, rd_kafka_version_str());
    rd_kafka_consumer_close(rk);
    rd_kafka_destroy(rk);
    stats_close();
    return count >= want && !errors ? 0 : 1;
}
