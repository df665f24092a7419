/* The hot loops of the pruned lexical search (retrieval/pruning.py), compiled at install where a C
 * compiler is at hand; pruning.py runs the same steps with numpy where it is not.
 *
 * Each loop reads a query word's postings once and writes one float32 per posting into the search's
 * per-slot array, where numpy's ufuncs first write the slots (as intp) and the bounds (as float32)
 * to arrays of their own and read them back in np.add.at: at a million lessons a heavy query's
 * essential words hold a million postings, and those extra passes over memory were most of their
 * cost. The loops release the GIL, so another thread's search (or anything else) runs meanwhile.
 *
 * Arguments are any objects with the buffer protocol (numpy arrays), C-contiguous, of the item
 * sizes below; every slot is checked against the arrays it indexes, so a bad slot raises
 * IndexError instead of writing out of bounds. The stable ABI of Python 3.11 (one build for every
 * later Python). */

#ifndef Py_LIMITED_API
#define Py_LIMITED_API 0x030B0000
#endif
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>
#ifndef _WIN32
#include <pthread.h>
#endif

typedef struct {
    Py_buffer view;
    int held;
} Buffer;

static void release(Buffer *buffers, int count) {
    for (int i = 0; i < count; i++) {
        if (buffers[i].held) {
            PyBuffer_Release(&buffers[i].view);
            buffers[i].held = 0;
        }
    }
}

/* A C-contiguous view of `object` whose items are `itemsize` bytes of one of `formats` (numpy's
 * struct codes: "i" or "l" for int32 depending on the platform). */
static int take(PyObject *object, Buffer *buffer, const char *name, Py_ssize_t itemsize,
                const char *formats, int writable) {
    int flags = PyBUF_C_CONTIGUOUS | PyBUF_FORMAT | (writable ? PyBUF_WRITABLE : 0);
    if (PyObject_GetBuffer(object, &buffer->view, flags) != 0) {
        return -1;
    }
    buffer->held = 1;
    const char *format = buffer->view.format ? buffer->view.format : "B";
#if PY_LITTLE_ENDIAN
    const char native = '<';
#else
    const char native = '>';
#endif
    if (*format == '@' || *format == '=' || *format == native) {
        format++; /* the machine's own byte order; another one is refused below */
    }
    if (buffer->view.itemsize != itemsize || format[0] == '\0' || format[1] != '\0' ||
        strchr(formats, format[0]) == NULL) {
        PyErr_Format(PyExc_TypeError, "%s: expected %zd-byte items of type '%s', got '%s' (%zd bytes)",
                     name, itemsize, formats, buffer->view.format ? buffer->view.format : "B",
                     buffer->view.itemsize);
        return -1;
    }
    return 0;
}

static Py_ssize_t items(Buffer *buffer) { return buffer->view.len / buffer->view.itemsize; }

static PyObject *out_of_range(Py_ssize_t at, int32_t slot, Py_ssize_t size) {
    PyErr_Format(PyExc_IndexError, "posting %zd: slot %ld is outside 0..%zd", at, (long)slot, size - 1);
    return NULL;
}

/* Several words' coded postings added by one or two threads: each takes one half of the slots
 * (every list is cut where its postings pass the middle slot), so each half of the sums stays in
 * its core's cache, and a slot's sum takes the words in the same order as with one thread. */
typedef struct {
    float *partial;
    uint32_t low, high; /* the slots this share adds to */
    Py_ssize_t lists;
    const int32_t **docs;
    const uint8_t **codes;
    const float *units;
    const Py_ssize_t *from, *to; /* each list's postings of this share */
    Py_ssize_t bad_list, bad_at; /* the first posting out of the share's slots, or -1 */
} Share;

static void add_share(Share *share) {
    uint32_t low = share->low, width = share->high - share->low;
    for (Py_ssize_t list = 0; list < share->lists; list++) {
        const int32_t *docs = share->docs[list];
        const uint8_t *codes = share->codes[list];
        float unit = share->units[list];
        for (Py_ssize_t i = share->from[list]; i < share->to[list]; i++) {
            uint32_t slot = (uint32_t)docs[i];
            if (slot - low >= width) { /* past the sums, or in the other share's half: not ascending */
                share->bad_list = list;
                share->bad_at = i;
                return;
            }
            share->partial[slot] += (float)codes[i] * unit;
        }
    }
}

static void *add_share_thread(void *share) {
    add_share((Share *)share);
    return NULL;
}

/* work(first) on this thread and work(second) on a helper thread when split (both here, in turn, where
 * no thread can be made): the two halves of a read or a pass. */
static void run_halves(void *(*work)(void *), void *first, void *second, int split) {
    int helped = 0;
#ifndef _WIN32
    pthread_t helper;
    helped = split && pthread_create(&helper, NULL, work, second) == 0;
#endif
    work(first);
    if (helped) {
#ifndef _WIN32
        pthread_join(helper, NULL);
#endif
    } else {
        work(second);
    }
}

PyDoc_STRVAR(add_coded_lists_doc,
             "add_coded_lists(partial, docs, codes, units, threads)\n--\n\n"
             "partial[docs[w][i]] += codes[w][i] * units[w] in float32, for each word w in turn and each "
             "of its postings i (partial: float32, written; docs, codes: sequences of int32 and uint8 "
             "arrays, each docs ascending; units: float32, one per word), by two threads when threads "
             "is 2 (each adding to one half of the slots: the sums are the same).");

static PyObject *add_coded_lists(PyObject *Py_UNUSED(module), PyObject *args) {
    PyObject *partial_object, *docs_object, *codes_object, *units_object;
    int threads;
    if (!PyArg_ParseTuple(args, "OOOOi:add_coded_lists", &partial_object, &docs_object, &codes_object, &units_object,
                          &threads)) {
        return NULL;
    }
    Py_ssize_t lists = PySequence_Size(docs_object);
    if (lists < 0 || PySequence_Size(codes_object) != lists) {
        PyErr_Clear();
        return PyErr_Format(PyExc_ValueError, "docs and codes must be sequences of as many arrays");
    }
    PyObject *result = NULL;
    Buffer head[2];
    memset(head, 0, sizeof head);
    Buffer *views = PyMem_Calloc((size_t)(2 * lists + 1), sizeof(Buffer)); /* each list's docs and codes */
    const void **arrays = PyMem_Calloc((size_t)(2 * lists + 1), sizeof(void *));
    Py_ssize_t *marks = PyMem_Calloc((size_t)(3 * lists + 1), sizeof(Py_ssize_t)); /* 0s, cuts, ends */
    if (views == NULL || arrays == NULL || marks == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    const int32_t **docs = (const int32_t **)arrays;
    const uint8_t **codes = (const uint8_t **)(arrays + lists);
    Py_ssize_t *zeros = marks, *cuts = marks + lists, *ends = marks + 2 * lists;
    if (take(partial_object, &head[0], "partial", 4, "f", 1) || take(units_object, &head[1], "units", 4, "f", 0)) {
        goto done;
    }
    Py_ssize_t size = items(&head[0]);
    if (items(&head[1]) != lists) {
        PyErr_Format(PyExc_ValueError, "%zd units for %zd lists", items(&head[1]), lists);
        goto done;
    }
    if (size > INT32_MAX) {
        PyErr_Format(PyExc_ValueError, "%zd slots do not fit int32", size);
        goto done;
    }
    uint32_t middle = threads == 2 ? (uint32_t)(size / 2) : (uint32_t)size;
    for (Py_ssize_t list = 0; list < lists; list++) {
        PyObject *docs_item = PySequence_GetItem(docs_object, list);
        PyObject *codes_item = docs_item != NULL ? PySequence_GetItem(codes_object, list) : NULL;
        int failed = codes_item == NULL || take(docs_item, &views[2 * list], "docs", 4, "il", 0) ||
                     take(codes_item, &views[2 * list + 1], "codes", 1, "B", 0);
        Py_XDECREF(docs_item);
        Py_XDECREF(codes_item);
        if (failed) {
            goto done;
        }
        ends[list] = items(&views[2 * list]);
        if (items(&views[2 * list + 1]) != ends[list]) {
            PyErr_Format(PyExc_ValueError, "list %zd: docs and codes differ in length (%zd and %zd)", list, ends[list],
                         items(&views[2 * list + 1]));
            goto done;
        }
        docs[list] = views[2 * list].view.buf;
        codes[list] = views[2 * list + 1].view.buf;
        /* Where the list's postings reach the middle slot (every one is below it with one thread). */
        Py_ssize_t low = 0, high = ends[list];
        while (low < high) {
            Py_ssize_t mid = low + (high - low) / 2;
            if (docs[list][mid] >= 0 && (uint32_t)docs[list][mid] < middle) {
                low = mid + 1;
            } else {
                high = mid;
            }
        }
        cuts[list] = low;
    }
    const float *units = head[1].view.buf;
    Share shares[2] = {
        {head[0].view.buf, 0, middle, lists, docs, codes, units, zeros, cuts, -1, -1},
        {head[0].view.buf, middle, (uint32_t)size, lists, docs, codes, units, cuts, ends, -1, -1},
    };
    Py_BEGIN_ALLOW_THREADS
    run_halves(add_share_thread, &shares[0], &shares[1], middle < (uint32_t)size);
    Py_END_ALLOW_THREADS
    for (int half = 0; half < 2; half++) {
        if (shares[half].bad_list >= 0) {
            Py_ssize_t list = shares[half].bad_list, at = shares[half].bad_at;
            int32_t slot = docs[list][at];
            if (slot >= 0 && (Py_ssize_t)slot < size) {
                PyErr_Format(PyExc_ValueError, "list %zd, posting %zd: slot %ld is out of ascending order", list, at,
                             (long)slot);
            } else {
                PyErr_Format(PyExc_IndexError, "list %zd, posting %zd: slot %ld is outside 0..%zd", list, at,
                             (long)slot, size - 1);
            }
            goto done;
        }
    }
    result = Py_None;
    Py_INCREF(result);
done:
    if (views != NULL) {
        release(views, (int)(2 * lists));
    }
    release(head, 2);
    PyMem_Free(views);
    PyMem_Free(arrays);
    PyMem_Free(marks);
    return result;
}

PyDoc_STRVAR(add_scored_doc,
             "add_scored(partial, docs, tf, norm, weight)\n--\n\n"
             "partial[docs[i]] += float32(weight * tf[i] / (tf[i] + norm[docs[i]])) for every posting "
             "i, the ratio in float64 with the exhaustive scorer's operations (partial: float32, written; "
             "docs: int32; tf: float32; norm: float64, one per slot).");

static PyObject *add_scored(PyObject *Py_UNUSED(module), PyObject *args) {
    PyObject *partial_object, *docs_object, *tf_object, *norm_object;
    double weight;
    if (!PyArg_ParseTuple(args, "OOOOd:add_scored", &partial_object, &docs_object, &tf_object, &norm_object,
                          &weight)) {
        return NULL;
    }
    Buffer buffers[4];
    memset(buffers, 0, sizeof buffers);
    if (take(partial_object, &buffers[0], "partial", 4, "f", 1) || take(docs_object, &buffers[1], "docs", 4, "il", 0) ||
        take(tf_object, &buffers[2], "tf", 4, "f", 0) || take(norm_object, &buffers[3], "norm", 8, "d", 0)) {
        release(buffers, 4);
        return NULL;
    }
    Py_ssize_t size = items(&buffers[0]), count = items(&buffers[1]), slots = items(&buffers[3]);
    if (items(&buffers[2]) != count) {
        release(buffers, 4);
        return PyErr_Format(PyExc_ValueError, "docs and tf differ in length (%zd and %zd)", count,
                            items(&buffers[2]));
    }
    if (slots < size) {
        size = slots;
    }
    float *partial = buffers[0].view.buf;
    const int32_t *docs = buffers[1].view.buf;
    const float *tf = buffers[2].view.buf;
    const double *norm = buffers[3].view.buf;
    Py_ssize_t bad = -1;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t i = 0; i < count; i++) {
        uint32_t slot = (uint32_t)docs[i];
        if ((Py_ssize_t)slot >= size) {
            bad = i;
            break;
        }
        double held = (double)tf[i];
        partial[slot] += (float)(held / (norm[slot] + held) * weight);
    }
    Py_END_ALLOW_THREADS
    int32_t slot = bad >= 0 ? docs[bad] : 0;
    release(buffers, 4);
    if (bad >= 0) {
        return out_of_range(bad, slot, size);
    }
    Py_RETURN_NONE;
}

/* The slots to pass over: every one of `partial`, or those `keep` covers (a slot past it may not
 * score). */
static int pass_buffers(PyObject *partial_object, PyObject *keep_object, Buffer *buffers, Py_ssize_t *size) {
    if (take(partial_object, &buffers[0], "partial", 4, "f", 0) ||
        (keep_object != Py_None && take(keep_object, &buffers[1], "keep", 1, "?B", 0))) {
        return -1;
    }
    *size = items(&buffers[0]);
    if (keep_object != Py_None && items(&buffers[1]) < *size) {
        *size = items(&buffers[1]);
    }
    if (*size > INT32_MAX) {
        PyErr_Format(PyExc_ValueError, "%zd slots do not fit int32", *size);
        return -1;
    }
    return 0;
}

/* One pass over slots low..high of the bounds: those that reach the floor (and are kept), written to
 * out from out[low] on. */
typedef struct {
    const float *partial;
    const uint8_t *keep;
    float floor;
    Py_ssize_t low, high, found;
    int32_t *out;
} Pass;

static void list_range(Pass *pass) {
    const float *partial = pass->partial;
    const uint8_t *keep = pass->keep;
    float floor = pass->floor;
    int32_t *out = pass->out + pass->low;
    Py_ssize_t found = 0;
    /* A block of slots none of which reaches is passed over after one comparison of all of them
     * (the compiler runs it several slots at a time): after a threshold's raise few reach. In a
     * block where some do, every slot is written and the count moves only past those that reach,
     * with no branch to guess wrong. */
    enum { BLOCK = 32 };
    for (Py_ssize_t start = pass->low; start < pass->high; start += BLOCK) {
        Py_ssize_t end = start + BLOCK < pass->high ? start + BLOCK : pass->high;
        int any = 0;
        for (Py_ssize_t slot = start; slot < end; slot++) {
            any |= partial[slot] >= floor;
        }
        if (!any) {
            continue;
        }
        for (Py_ssize_t slot = start; slot < end; slot++) {
            out[found] = (int32_t)slot;
            found += (partial[slot] >= floor) & (keep == NULL || keep[slot] != 0);
        }
    }
    pass->found = found;
}

static void *pass_thread(void *pass) {
    list_range((Pass *)pass);
    return NULL;
}

/* The pass over slots 0..size, by two threads (a half each) when asked; the slots listed end to end. */
static Py_ssize_t run_pass(const float *partial, const uint8_t *keep, float floor, Py_ssize_t size, int32_t *out,
                           int threads) {
    Py_ssize_t middle = threads == 2 ? size / 2 : size;
    Pass halves[2] = {
        {partial, keep, floor, 0, middle, 0, out},
        {partial, keep, floor, middle, size, 0, out},
    };
    run_halves(pass_thread, &halves[0], &halves[1], middle < size);
    if (halves[1].found > 0) { /* the second half's list, moved up to the first's end */
        memmove(out + halves[0].found, out + middle, (size_t)halves[1].found * sizeof(int32_t));
    }
    return halves[0].found + halves[1].found;
}

PyDoc_STRVAR(reaching_doc,
             "reaching(partial, floor, keep, out, threads=1) -> int\n--\n\n"
             "Write the slots s with partial[s] >= floor and (keep is None or s < len(keep) and keep[s]) "
             "to out, ascending, and return how many there are (partial: float32; keep: bool, one per "
             "slot, or None; out: int32, room for every slot); threads=2 lists a half each.");

static PyObject *reaching(PyObject *Py_UNUSED(module), PyObject *args) {
    PyObject *partial_object, *keep_object, *out_object;
    float floor;
    int threads = 1;
    if (!PyArg_ParseTuple(args, "OfOO|i:reaching", &partial_object, &floor, &keep_object, &out_object, &threads)) {
        return NULL;
    }
    Buffer buffers[3];
    memset(buffers, 0, sizeof buffers);
    Py_ssize_t size = 0, found = 0;
    if (pass_buffers(partial_object, keep_object, buffers, &size) ||
        take(out_object, &buffers[2], "out", 4, "il", 1)) {
        release(buffers, 3);
        return NULL;
    }
    if (items(&buffers[2]) < size) {
        release(buffers, 3);
        return PyErr_Format(PyExc_ValueError, "out holds %zd slots of %zd", items(&buffers[2]), size);
    }
    const float *partial = buffers[0].view.buf;
    const uint8_t *keep = keep_object != Py_None ? buffers[1].view.buf : NULL;
    int32_t *out = buffers[2].view.buf;
    Py_BEGIN_ALLOW_THREADS
    found = run_pass(partial, keep, floor, size, out, threads);
    Py_END_ALLOW_THREADS
    release(buffers, 3);
    return PyLong_FromSsize_t(found);
}

PyDoc_STRVAR(lower_bounds_doc,
             "lower_bounds(pool, starts, sizes, slots, out)\n--\n\n"
             "For each list r, pool[starts[r] : starts[r] + sizes[r]] (ascending), and each slot j: "
             "out[r * len(slots) + j] = starts[r] + how many of the list's postings are below slots[j] "
             "(numpy's searchsorted, side left, moved to the pool). The searches of one list run side "
             "by side, a step of each in turn, so their cache misses overlap where numpy's wait for "
             "each other (pool, slots: int32; starts, sizes, out: int64).");

static PyObject *lower_bounds(PyObject *Py_UNUSED(module), PyObject *args) {
    PyObject *pool_object, *starts_object, *sizes_object, *slots_object, *out_object;
    if (!PyArg_ParseTuple(args, "OOOOO:lower_bounds", &pool_object, &starts_object, &sizes_object, &slots_object,
                          &out_object)) {
        return NULL;
    }
    Buffer buffers[5];
    memset(buffers, 0, sizeof buffers);
    if (take(pool_object, &buffers[0], "pool", 4, "il", 0) || take(starts_object, &buffers[1], "starts", 8, "lq", 0) ||
        take(sizes_object, &buffers[2], "sizes", 8, "lq", 0) || take(slots_object, &buffers[3], "slots", 4, "il", 0) ||
        take(out_object, &buffers[4], "out", 8, "lq", 1)) {
        release(buffers, 5);
        return NULL;
    }
    const int32_t *pool = buffers[0].view.buf;
    const int64_t *starts = buffers[1].view.buf, *sizes = buffers[2].view.buf;
    const int32_t *slots = buffers[3].view.buf;
    int64_t *out = buffers[4].view.buf;
    Py_ssize_t held = items(&buffers[0]), lists = items(&buffers[1]), count = items(&buffers[3]);
    if (items(&buffers[2]) != lists || items(&buffers[4]) != lists * count) {
        release(buffers, 5);
        return PyErr_Format(PyExc_ValueError, "%zd starts, %zd sizes and %zd slots need %zd outputs, got %zd", lists,
                            items(&buffers[2]), count, lists * count, items(&buffers[4]));
    }
    for (Py_ssize_t list = 0; list < lists; list++) {
        if (starts[list] < 0 || sizes[list] < 0 || starts[list] > held - sizes[list]) {
            release(buffers, 5);
            return PyErr_Format(PyExc_IndexError, "list %zd: postings %lld..%lld are outside the pool's %zd", list,
                                (long long)starts[list], (long long)(starts[list] + sizes[list]), held);
        }
    }
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t list = 0; list < lists; list++) {
        int64_t *at = out + list * count; /* where each slot's search stands, from the list's start */
        int64_t size = sizes[list];
        const int32_t *first = pool + starts[list];
        for (Py_ssize_t j = 0; j < count; j++) {
            at[j] = 0;
        }
        if (size > 0) {
            /* The branchless lower bound: halve the range, moving past the half whose last
             * posting is below the slot; every search of the list takes the same steps. */
            for (int64_t left = size; left > 1; left -= left / 2) {
                int64_t half = left / 2;
                for (Py_ssize_t j = 0; j < count; j++) {
                    at[j] += (first[at[j] + half] < slots[j]) ? half : 0;
                }
            }
            for (Py_ssize_t j = 0; j < count; j++) {
                at[j] += first[at[j]] < slots[j];
            }
        }
        for (Py_ssize_t j = 0; j < count; j++) {
            at[j] += starts[list];
        }
    }
    Py_END_ALLOW_THREADS
    release(buffers, 5);
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"add_coded_lists", add_coded_lists, METH_VARARGS, add_coded_lists_doc},
    {"add_scored", add_scored, METH_VARARGS, add_scored_doc},
    {"reaching", reaching, METH_VARARGS, reaching_doc},
    {"lower_bounds", lower_bounds, METH_VARARGS, lower_bounds_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef postings_module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "_postings",
    .m_doc = "Compiled loops of the pruned lexical search (see pruning.py).",
    .m_size = 0,
    .m_methods = methods,
};

PyMODINIT_FUNC PyInit__postings(void) { return PyModuleDef_Init(&postings_module); }
