/* A librdkafka producer with nothing on top, for the produce rows of `make bench`.
 *
 *   rdkafka_produce -b HOST:PORT -t TOPIC -n RECORDS -S RECORD_BYTES [-d MAX_SECONDS]
 *                   [-s STATS_FILE] [-X key=value ...]
 *
 * Loads TOPIC's metadata first (so the timing holds no leader lookup), then produces up to
 * RECORDS records of RECORD_BYTES value bytes each (no key; librdkafka's default partitioner
 * spreads them over the partitions, as it does for the Python clients of bench.compare), with
 * rd_kafka_produce from one buffer that librdkafka neither copies nor frees. It stops
 * producing after MAX_SECONDS, waits for every delivery report, and prints one JSON line:
 * records acknowledged (delivery reports without error), their value bytes, seconds from the
 * first produce call to the last delivery report, the process CPU seconds over the same
 * interval, records sent, and delivery errors. acks=1 and linger.ms=5 unless -X says
 * otherwise; the batch and queue sizes come from the caller (-X): bench.peers.rdkafka_c
 * passes the ones it ships. With -s, librdkafka's statistics JSON (every
 * statistics.interval.ms, 500 ms unless -X sets it) is appended to STATS_FILE, one line each:
 * its per-broker `batchsize`/`batchcnt` are the batches the producer actually sent. */
#define PROG "rdkafka_produce"
#include "common.h"

#include <string.h>
#include <unistd.h>

static long long acked, errors;
static double last_report;

/* Served by rd_kafka_poll/rd_kafka_flush in the producing thread: no locking needed. */
static void on_delivery(rd_kafka_t *rk, const rd_kafka_message_t *m, void *opaque) {
    (void)rk;
    (void)opaque;
    if (m->err) {
        if (errors++ == 0)
            fprintf(stderr, "rdkafka_produce: delivery failed: %s\n", rd_kafka_err2str(m->err));
    } else {
        acked++;
    }
    last_report = now(CLOCK_MONOTONIC);
}

static void set(rd_kafka_conf_t *conf, const char *key, const char *value) {
    char err[512];
    if (rd_kafka_conf_set(conf, key, value, err, sizeof err) != RD_KAFKA_CONF_OK) die(key, err);
}

int main(int argc, char **argv) {
    char err[512];
    const char *topic = NULL;
    long long want = 0;
    long size = -1;
    double max_seconds = 0; /* 0: no limit */
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    set(conf, "acks", "1");
    set(conf, "linger.ms", "5");
    rd_kafka_conf_set_dr_msg_cb(conf, on_delivery);
    int opt;
    int stats_interval_set = 0;
    while ((opt = getopt(argc, argv, "b:t:n:S:d:s:X:")) != -1) {
        switch (opt) {
        case 'b': set(conf, "bootstrap.servers", optarg); break;
        case 't': topic = optarg; break;
        case 'n': want = atoll(optarg); break;
        case 'S': size = atol(optarg); break;
        case 'd': max_seconds = atof(optarg); break;
        case 's':
            stats_to(conf, optarg);
            break;
        case 'X': {
            char *eq = strchr(optarg, '=');
            if (!eq) die(optarg, "not key=value");
            *eq = '\0';
            if (!strcmp(optarg, "statistics.interval.ms")) stats_interval_set = 1;
            set(conf, optarg, eq + 1);
            break;
        }
        default:
            fprintf(stderr, "usage: %s -b HOST:PORT -t TOPIC -n RECORDS -S BYTES [-d S] "
                            "[-s FILE] [-X k=v]...\n", argv[0]);
            return 2;
        }
    }
    if (!topic || want <= 0 || size < 0)
        die("usage", "-t TOPIC, -n RECORDS and -S RECORD_BYTES are required");
    if (stats_out && !stats_interval_set) set(conf, "statistics.interval.ms", "500");

    char *payload = malloc(size ? size : 1);
    if (!payload) die("malloc", "no memory");
    for (long i = 0; i < size; i++) payload[i] = 'A' + (char)((i * 7919) % 26);

    rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, err, sizeof err);
    if (!rk) die("rd_kafka_new", err);
    rd_kafka_topic_t *rkt = rd_kafka_topic_new(rk, topic, NULL);
    const struct rd_kafka_metadata *md;
    rd_kafka_resp_err_t e = rd_kafka_metadata(rk, 0, rkt, &md, 30000);
    if (e) die("metadata", rd_kafka_err2str(e));
    if (md->topic_cnt != 1 || md->topics[0].err)
        die(topic, md->topic_cnt ? rd_kafka_err2str(md->topics[0].err) : "no metadata");
    rd_kafka_metadata_destroy(md);

    long long sent = 0;
    double start = now(CLOCK_MONOTONIC);
    double cpu0 = now(CLOCK_PROCESS_CPUTIME_ID);
    double deadline = max_seconds > 0 ? start + max_seconds : 0;
    while (sent < want) {
        if (rd_kafka_produce(rkt, RD_KAFKA_PARTITION_UA, 0, payload, (size_t)size, NULL, 0,
                             NULL) == -1) {
            e = rd_kafka_last_error();
            if (e != RD_KAFKA_RESP_ERR__QUEUE_FULL) die("produce", rd_kafka_err2str(e));
            rd_kafka_poll(rk, 1); /* the local queue is full: serve reports until it drains */
            continue;
        }
        /* delivery reports are served every 1024 records, as the Python producers do */
        if ((++sent & 1023) == 0) {
            rd_kafka_poll(rk, 0);
            if (deadline && now(CLOCK_MONOTONIC) > deadline) break;
        }
    }
    while (rd_kafka_outq_len(rk) > 0) rd_kafka_poll(rk, 50);
    double cpu = now(CLOCK_PROCESS_CPUTIME_ID) - cpu0;
    double seconds = (acked + errors ? last_report : now(CLOCK_MONOTONIC)) - start;
    printf("{\"records\": %lld, \"bytes\": %lld, \"seconds\": %.6f, \"cpu_seconds\": %.6f, "
           "\"sent\": %lld, \"errors\": %lld, \"librdkafka\": \"%s\"}\n",
           acked, acked * (long long)size, seconds, cpu, sent, errors, rd_kafka_version_str());
    fflush(stdout);
    rd_kafka_topic_destroy(rkt);
    rd_kafka_destroy(rk);
    stats_close();
    free(payload);
    return acked == sent && !errors ? 0 : 1;
}
