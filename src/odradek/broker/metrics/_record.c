/* odradek.broker.metrics._record: the per-request timing of issue 18 in one C call.
 *
 * Timing every request inline in Python cost a pipelined 1-record produce ~5,200 of its
 * ~125,000 interpreter instructions (bench/RESULTS.md, issue 18), however few bytecodes it
 * was written in: the clock read, the subtractions, the list slots and the int objects are
 * each a C call or an allocation. Here the server makes one call per request
 * (Timer.record) and one per read (Timer.mark_read), and the counts are plain C integers.
 *
 * Table: one node's counts and sums (RequestStats owns it; the collector reads them at
 * scrape time through row() and versions()). Timer: one connection's clock state, the time
 * of its last read and of the end of the last request handled since (where the next
 * request's handler started), writing into a Table.
 *
 * The arithmetic is RequestStats' reference, operation for operation (tests compare the
 * rows float for float): sums in seconds, a bucket only for a time past the first bound
 * (the first bucket is implied by the request count), nothing at all past the sums unless
 * the total passes the first bound or the slow threshold.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>
#include <time.h>

/* upper bounds in ms of the latency histograms; +Inf is the last bucket. RequestStats
 * checks at import that its BUCKETS_MS are these. */
static const double BUCKETS_MS[] = {0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 25.0, 50.0, 100.0,
                                    250.0, 500.0, 1000.0, 2500.0, 5000.0, 10000.0, 30000.0};
#define NBOUNDS ((int)(sizeof(BUCKETS_MS) / sizeof(BUCKETS_MS[0])))
#define NB (NBOUNDS + 1)   /* buckets per histogram, +Inf included */
#define QUEUE 0            /* the histograms' offsets in a row, as in requests.py */
#define LOCAL NB
#define TOTAL (2 * NB)
#define SUM_QUEUE 0        /* the sums' offsets */
#define SUM_WAIT 1
#define SUM_TOTAL 2
#define MAX_KEY 128        /* api keys counted */
#define VERSIONS 64        /* versions counted per key ... */
#define API_VERSIONS_KEY 18
#define ALL_VERSIONS 65536 /* ... but ApiVersions answers any int16 version: all of them */

/* the bounds in seconds, computed as Python computes them (ms / 1000), so that a time on a
 * bound falls in the same bucket on both sides */
static double bounds[NBOUNDS];

typedef struct {
    unsigned long long counts[3 * NB]; /* QUEUE, LOCAL, TOTAL; the first of each unused */
    double sums[3];                    /* SUM_QUEUE, SUM_WAIT, SUM_TOTAL, in seconds */
} Row;

typedef struct {
    PyObject_HEAD
    Row rows[MAX_KEY];
    unsigned long long versions[MAX_KEY][VERSIONS];
    unsigned long long *api_versions; /* ALL_VERSIONS of them, ApiVersions' own row */
    double slow_s;                    /* request.slow.log.ms in seconds (inf: off) */
    PyObject *slow;                   /* called (header, queue, local, total) past slow_s */
} TableObject;

typedef struct {
    PyObject_HEAD
    TableObject *table;
    double received;  /* the last read */
    double last_done; /* the end of the last request handled since (or the read) */
} TimerObject;

/* time.perf_counter's clock on Linux (CLOCK_MONOTONIC) and its conversion to float
 * seconds (integer nanoseconds, then one division), so that a time read here and one read
 * by perf_counter in Python (a later answer's end) subtract to what perf_counter gives */
static inline double clock_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)((long long)ts.tv_sec * 1000000000LL + ts.tv_nsec) / 1e9;
}

/* bisect_left(BUCKETS_S, x): the number of bounds below x. A linear scan: the times are
 * mostly in the first buckets, and a NaN lands in bucket 0 as with bisect. */
static inline int bucket(double x) {
    int i = 0;
    while (i < NBOUNDS && x > bounds[i]) i++;
    return i;
}

/* An int from Python; *out_of_range set when it does not fit a long (a key or version
 * that is out of every row). -1 with an error set when it is no int. */
static inline int as_long(PyObject *obj, long *value, int *out_of_range) {
    *value = PyLong_AsLongAndOverflow(obj, out_of_range);
    return (*value == -1 && PyErr_Occurred()) ? -1 : 0;
}

/* RequestStats.count: a version outside its key's row counts at the row's last version;
 * inside it, a negative one indexes from the end (as the Python lists did) */
static void count_version(TableObject *t, long key, long version, int version_overflow) {
    unsigned long long *row;
    long len;
    if (key == API_VERSIONS_KEY) {
        row = t->api_versions;
        len = ALL_VERSIONS;
    } else {
        row = t->versions[key];
        len = VERSIONS;
    }
    if (version_overflow || version < -len || version >= len)
        row[len - 1]++;
    else
        row[version < 0 ? version + len : version]++;
}

/* One answered request; the reference is RequestStats.record (tests/unit/broker). Returns
 * 0, or -1 with an exception set (a bad header, or the slow log's own failure). */
static int tally(TableObject *t, PyObject *header, double received, double started,
                 double handled, double done) {
    if (!PyTuple_Check(header) || PyTuple_GET_SIZE(header) < 2) {
        PyErr_SetString(PyExc_TypeError, "a request header (api_key, api_version, ...)");
        return -1;
    }
    long key, version;
    int key_overflow, version_overflow;
    if (as_long(PyTuple_GET_ITEM(header, 0), &key, &key_overflow) < 0
        || as_long(PyTuple_GET_ITEM(header, 1), &version, &version_overflow) < 0)
        return -1;
    if (key_overflow || key < 0 || key >= MAX_KEY) /* refused before any handler ran */
        return 0;
    count_version(t, key, version, version_overflow);
    Row *row = &t->rows[key];
    double total = done - received;
    row->sums[SUM_TOTAL] += total;
    row->sums[SUM_QUEUE] += started - received;
    if (done != handled) /* a later answer: the wait after its handler returned */
        row->sums[SUM_WAIT] += done - handled;
    /* the usual request ends here: under the first bound, not slow */
    if (!(total > bounds[0] || total > t->slow_s))
        return 0;
    double queue = started - received, local = handled - started;
    if (queue > bounds[0]) row->counts[QUEUE + bucket(queue)]++;
    if (local > bounds[0]) row->counts[LOCAL + bucket(local)]++;
    if (total > bounds[0]) row->counts[TOTAL + bucket(total)]++;
    if (total > t->slow_s) {
        PyObject *r = PyObject_CallFunction(t->slow, "Oddd", header, queue, local, total);
        if (r == NULL) return -1;
        Py_DECREF(r);
    }
    return 0;
}

/* ---- Table ------------------------------------------------------------------------- */

static PyObject *table_new(PyTypeObject *type, PyObject *args, PyObject *kwds) {
    static char *kwlist[] = {"slow_s", "slow", NULL};
    double slow_s;
    PyObject *slow;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "dO:Table", kwlist, &slow_s, &slow))
        return NULL;
    if (!PyCallable_Check(slow)) {
        PyErr_SetString(PyExc_TypeError, "Table: slow must be callable");
        return NULL;
    }
    TableObject *t = (TableObject *)type->tp_alloc(type, 0); /* zeroed */
    if (t == NULL) return NULL;
    t->api_versions = PyMem_Calloc(ALL_VERSIONS, sizeof(unsigned long long));
    if (t->api_versions == NULL) {
        Py_DECREF(t);
        return PyErr_NoMemory();
    }
    t->slow_s = slow_s;
    t->slow = Py_NewRef(slow);
    return (PyObject *)t;
}

/* a Table refers to its RequestStats' bound slow(), which refers back: collectable */
static int table_traverse(TableObject *t, visitproc visit, void *arg) {
    Py_VISIT(t->slow);
    return 0;
}

static int table_clear(TableObject *t) {
    Py_CLEAR(t->slow);
    return 0;
}

static void table_dealloc(TableObject *t) {
    PyObject_GC_UnTrack(t);
    table_clear(t);
    PyMem_Free(t->api_versions);
    Py_TYPE(t)->tp_free((PyObject *)t);
}

static PyObject *table_record(TableObject *t, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 5) {
        PyErr_SetString(PyExc_TypeError,
                        "record(header, received, started, handled, done): 5 arguments");
        return NULL;
    }
    double times[4];
    for (int i = 0; i < 4; i++) {
        times[i] = PyFloat_AsDouble(args[i + 1]);
        if (times[i] == -1.0 && PyErr_Occurred()) return NULL;
    }
    if (tally(t, args[0], times[0], times[1], times[2], times[3]) < 0) return NULL;
    Py_RETURN_NONE;
}

static PyObject *table_count(TableObject *t, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "count(key, version): 2 arguments");
        return NULL;
    }
    long key, version;
    int key_overflow, version_overflow;
    if (as_long(args[0], &key, &key_overflow) < 0
        || as_long(args[1], &version, &version_overflow) < 0)
        return NULL;
    if (!key_overflow && key >= 0 && key < MAX_KEY)
        count_version(t, key, version, version_overflow);
    Py_RETURN_NONE;
}

static int key_arg(PyObject *arg, long *key) {
    int overflow;
    if (as_long(arg, key, &overflow) < 0) return -1;
    if (overflow || *key < 0 || *key >= MAX_KEY) {
        PyErr_Format(PyExc_IndexError, "api key out of 0..%d", MAX_KEY - 1);
        return -1;
    }
    return 0;
}

/* the old list layout of a key's row: the three histograms' buckets (ints, the first of
 * each 0: implied), then the sums (floats) */
static PyObject *table_row(TableObject *t, PyObject *arg) {
    long key;
    if (key_arg(arg, &key) < 0) return NULL;
    Row *row = &t->rows[key];
    PyObject *out = PyList_New(3 * NB + 3);
    if (out == NULL) return NULL;
    for (int i = 0; i < 3 * NB + 3; i++) {
        PyObject *v = i < 3 * NB ? PyLong_FromUnsignedLongLong(row->counts[i])
                                 : PyFloat_FromDouble(row->sums[i - 3 * NB]);
        if (v == NULL) {
            Py_DECREF(out);
            return NULL;
        }
        PyList_SET_ITEM(out, i, v);
    }
    return out;
}

/* {version: count} of the versions counted for a key; ApiVersions' upper half is the
 * negative versions (i - 65536) */
static PyObject *table_versions(TableObject *t, PyObject *arg) {
    long key;
    if (key_arg(arg, &key) < 0) return NULL;
    unsigned long long *row = key == API_VERSIONS_KEY ? t->api_versions : t->versions[key];
    long len = key == API_VERSIONS_KEY ? ALL_VERSIONS : VERSIONS;
    PyObject *out = PyDict_New();
    if (out == NULL) return NULL;
    for (long i = 0; i < len; i++) {
        if (row[i] == 0) continue;
        long v = (key == API_VERSIONS_KEY && i >= ALL_VERSIONS / 2) ? i - ALL_VERSIONS : i;
        PyObject *k = PyLong_FromLong(v), *n = PyLong_FromUnsignedLongLong(row[i]);
        int err = (k == NULL || n == NULL) ? -1 : PyDict_SetItem(out, k, n);
        Py_XDECREF(k);
        Py_XDECREF(n);
        if (err < 0) {
            Py_DECREF(out);
            return NULL;
        }
    }
    return out;
}

static PyMethodDef table_methods[] = {
    {"record", (PyCFunction)(void (*)(void))table_record, METH_FASTCALL,
     "record(header, received, started, handled, done): one answered request at given "
     "perf_counter times"},
    {"count", (PyCFunction)(void (*)(void))table_count, METH_FASTCALL,
     "count(key, version): one request counted, not timed"},
    {"row", (PyCFunction)table_row, METH_O,
     "row(key): the key's histogram buckets and sums, as a list"},
    {"versions", (PyCFunction)table_versions, METH_O,
     "versions(key): {version: requests} of the key"},
    {NULL, NULL, 0, NULL},
};

static PyMemberDef table_members[] = {
    {"slow_s", T_DOUBLE, offsetof(TableObject, slow_s), READONLY,
     "request.slow.log.ms in seconds (inf: no slow log)"},
    {NULL, 0, 0, 0, NULL},
};

static PyTypeObject TableType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "odradek.broker.metrics._record.Table",
    .tp_doc = "Table(slow_s, slow): one node's request counts and time sums",
    .tp_basicsize = sizeof(TableObject),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_new = table_new,
    .tp_dealloc = (destructor)table_dealloc,
    .tp_traverse = (traverseproc)table_traverse,
    .tp_clear = (inquiry)table_clear,
    .tp_methods = table_methods,
    .tp_members = table_members,
};

/* ---- Timer ------------------------------------------------------------------------- */

static PyObject *timer_new(PyTypeObject *type, PyObject *args, PyObject *kwds) {
    static char *kwlist[] = {"table", NULL};
    PyObject *table;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "O!:Timer", kwlist, &TableType, &table))
        return NULL;
    TimerObject *timer = (TimerObject *)type->tp_alloc(type, 0);
    if (timer == NULL) return NULL;
    timer->table = (TableObject *)Py_NewRef(table);
    return (PyObject *)timer;
}

static void timer_dealloc(TimerObject *timer) {
    Py_CLEAR(timer->table);
    Py_TYPE(timer)->tp_free((PyObject *)timer);
}

/* the time a method was given (tests), or the clock's */
static inline int now_arg(PyObject *const *args, Py_ssize_t nargs, Py_ssize_t at,
                          double *now) {
    if (nargs <= at) {
        *now = clock_now();
        return 0;
    }
    if (nargs > at + 1) {
        PyErr_SetString(PyExc_TypeError, "too many arguments");
        return -1;
    }
    *now = PyFloat_AsDouble(args[at]);
    return (*now == -1.0 && PyErr_Occurred()) ? -1 : 0;
}

static PyObject *timer_mark_read(TimerObject *timer, PyObject *const *args,
                                 Py_ssize_t nargs) {
    double now;
    if (now_arg(args, nargs, 0, &now) < 0) return NULL;
    timer->received = timer->last_done = now;
    Py_RETURN_NONE;
}

/* an answer ready as its handler returns: its handler started where the previous request
 * of the read ended (its queue time), and the next one's starts now */
static PyObject *timer_record(TimerObject *timer, PyObject *const *args, Py_ssize_t nargs) {
    double done;
    if (nargs < 1) {
        PyErr_SetString(PyExc_TypeError, "record(header[, now])");
        return NULL;
    }
    if (now_arg(args, nargs, 1, &done) < 0) return NULL;
    double started = timer->last_done;
    timer->last_done = done;
    if (tally(timer->table, args[0], timer->received, started, done, done) < 0) return NULL;
    Py_RETURN_NONE;
}

/* a handler that returned an awaitable: (received, started, handled) for the answer's
 * record when it is ready (RequestStats.later) */
static PyObject *timer_handled(TimerObject *timer, PyObject *const *args, Py_ssize_t nargs) {
    double handled;
    if (now_arg(args, nargs, 0, &handled) < 0) return NULL;
    double started = timer->last_done;
    timer->last_done = handled;
    return Py_BuildValue("(ddd)", timer->received, started, handled);
}

static PyMethodDef timer_methods[] = {
    {"mark_read", (PyCFunction)(void (*)(void))timer_mark_read, METH_FASTCALL,
     "mark_read([now]): requests were read (now, or the clock's time)"},
    {"record", (PyCFunction)(void (*)(void))timer_record, METH_FASTCALL,
     "record(header[, now]): the request answered now, into the table"},
    {"handled", (PyCFunction)(void (*)(void))timer_handled, METH_FASTCALL,
     "handled([now]) -> (received, started, handled): a handler that answers later"},
    {NULL, NULL, 0, NULL},
};

static PyMemberDef timer_members[] = {
    {"received", T_DOUBLE, offsetof(TimerObject, received), READONLY,
     "perf_counter time of the last read"},
    {"last_done", T_DOUBLE, offsetof(TimerObject, last_done), READONLY,
     "perf_counter time where the next request's handler starts"},
    {NULL, 0, 0, 0, NULL},
};

static PyTypeObject TimerType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "odradek.broker.metrics._record.Timer",
    .tp_doc = "Timer(table): one connection's request timing, into a Table",
    .tp_basicsize = sizeof(TimerObject),
    /* a base type: tests subclass it to give the times */
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE,
    .tp_new = timer_new,
    .tp_dealloc = (destructor)timer_dealloc,
    .tp_methods = timer_methods,
    .tp_members = timer_members,
};

/* ---- module ------------------------------------------------------------------------ */

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "odradek.broker.metrics._record",
    .m_doc = "The request metrics' per-request recording (issue 18), in C.",
    .m_size = -1,
};

PyMODINIT_FUNC PyInit__record(void) {
    for (int i = 0; i < NBOUNDS; i++) bounds[i] = BUCKETS_MS[i] / 1000;
    if (PyType_Ready(&TableType) < 0 || PyType_Ready(&TimerType) < 0) return NULL;
    PyObject *m = PyModule_Create(&module);
    if (m == NULL) return NULL;
    PyObject *ms = PyTuple_New(NBOUNDS);
    if (ms == NULL) goto fail;
    for (int i = 0; i < NBOUNDS; i++) {
        PyObject *v = PyFloat_FromDouble(BUCKETS_MS[i]);
        if (v == NULL) {
            Py_DECREF(ms);
            goto fail;
        }
        PyTuple_SET_ITEM(ms, i, v);
    }
    if (PyModule_AddObject(m, "BUCKETS_MS", ms) < 0) {
        Py_DECREF(ms);
        goto fail;
    }
    if (PyModule_AddIntConstant(m, "MAX_KEY", MAX_KEY) < 0
        || PyModule_AddIntConstant(m, "VERSIONS", VERSIONS) < 0
        || PyModule_AddObjectRef(m, "Table", (PyObject *)&TableType) < 0
        || PyModule_AddObjectRef(m, "Timer", (PyObject *)&TimerType) < 0)
        goto fail;
    return m;
fail:
    Py_DECREF(m);
    return NULL;
}
