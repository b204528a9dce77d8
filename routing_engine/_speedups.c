/* The gray decision's two hot primitives in C (plain CPython C API), over the very tables
 * routing_engine/matcher.py compiles; matcher.py holds the same two in Python, used when this
 * module is not built or GRAYLANE_PURE_PYTHON_ENGINE is set, and tests run both.
 *
 * HeaderPicker(wanted, limit)(headers): header_picker's pick().
 * Probe(...)(headers, ip=None, city=None, user=None): the lane masks _lanes_decider's decide()
 * computes; `miss` when none is set, else resolve(header, ip, city, user, percent, own).
 *
 * Why C: in CPython 3.11 the interpreter's dispatch and a dict lookup of each fresh string
 * were most of a decision's instructions (bench/README.md, engine.py).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>
#include <arpa/inet.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define BUCKETS 10000

/* CRC-32 as zlib.crc32 computes it (reflected, polynomial 0xEDB88320). */
static uint32_t crc_table[256];

static void crc_init(void) {
    for (uint32_t n = 0; n < 256; n++) {
        uint32_t c = n;
        for (int k = 0; k < 8; k++)
            c = c & 1 ? 0xEDB88320u ^ (c >> 1) : c >> 1;
        crc_table[n] = c;
    }
}

static uint32_t crc32_of(uint32_t crc, const char *data, Py_ssize_t size) {
    crc = ~crc;
    for (Py_ssize_t i = 0; i < size; i++)
        crc = crc_table[(crc ^ (unsigned char)data[i]) & 0xFF] ^ (crc >> 8);
    return ~crc;
}

/* The UTF-8 of a str, a lone surrogate too (as routing_engine.matcher.utf8): in place when it
 * can be, else in *encoded (a new bytes object). NULL with an error set on failure. */
static const char *utf8(PyObject *text, Py_ssize_t *size, PyObject **encoded) {
    const char *data = PyUnicode_AsUTF8AndSize(text, size);
    if (data != NULL)
        return data;
    PyErr_Clear();
    *encoded = PyUnicode_AsEncodedString(text, "utf-8", "surrogatepass");
    if (*encoded == NULL)
        return NULL;
    *size = PyBytes_GET_SIZE(*encoded);
    return PyBytes_AS_STRING(*encoded);
}

/* headers.get(key) as a new reference, NULL with no error when absent. */
static PyObject *get_header(PyObject *headers, PyObject *key) {
    if (PyDict_CheckExact(headers)) {
        PyObject *value = PyDict_GetItemWithError(headers, key);
        Py_XINCREF(value);
        return value;
    }
    PyObject *value = PyObject_CallMethod(headers, "get", "O", key);
    if (value == Py_None) {
        Py_DECREF(value);
        return NULL;
    }
    return value;
}

/* -- HeaderPicker ------------------------------------------------------------------------- */

typedef struct {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    PyObject *wanted;    /* frozenset of lower-case names */
    PyObject *spellings; /* dict: spelling -> its lower-case name if wanted, else None */
    Py_ssize_t limit;
} Picker;

static int pick_one(Picker *self, PyObject *picked, PyObject *name, PyObject *value) {
    PyObject *lower = PyDict_GetItemWithError(self->spellings, name);
    if (lower == NULL) {
        if (PyErr_Occurred())
            return -1;
        PyObject *lowered = PyObject_CallMethod(name, "lower", NULL);
        if (lowered == NULL)
            return -1;
        int wanted = PySet_Contains(self->wanted, lowered);
        if (wanted < 0) {
            Py_DECREF(lowered);
            return -1;
        }
        if (PyDict_GET_SIZE(self->spellings) >= self->limit)
            PyDict_Clear(self->spellings);
        lower = wanted ? lowered : Py_None;
        int failed = PyDict_SetItem(self->spellings, name, lower) < 0 ||
                     (wanted && PyDict_SetItem(picked, lower, value) < 0);
        Py_DECREF(lowered);
        return failed ? -1 : 0;
    }
    return lower == Py_None ? 0 : PyDict_SetItem(picked, lower, value);
}

static PyObject *Picker_vectorcall(PyObject *op, PyObject *const *args, size_t nargsf,
                                   PyObject *kwnames) {
    Picker *self = (Picker *)op;
    if (PyVectorcall_NARGS(nargsf) != 1 || kwnames != NULL) {
        PyErr_SetString(PyExc_TypeError, "pick_headers() takes one argument: the headers");
        return NULL;
    }
    PyObject *headers = args[0];
    PyObject *picked = PyDict_New();
    if (picked == NULL)
        return NULL;
    if (PyDict_CheckExact(headers)) {
        Py_ssize_t pos = 0;
        PyObject *name, *value;
        while (PyDict_Next(headers, &pos, &name, &value)) {
            if (pick_one(self, picked, name, value) < 0)
                goto error;
        }
        return picked;
    }
    PyObject *items = PyMapping_Items(headers);
    if (items == NULL)
        goto error;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(items); i++) {
        PyObject *item = PyList_GET_ITEM(items, i);
        if (!PyTuple_Check(item) || PyTuple_GET_SIZE(item) != 2 ||
            pick_one(self, picked, PyTuple_GET_ITEM(item, 0), PyTuple_GET_ITEM(item, 1)) < 0) {
            Py_DECREF(items);
            goto error;
        }
    }
    Py_DECREF(items);
    return picked;
error:
    Py_DECREF(picked);
    return NULL;
}

static PyObject *Picker_new(PyTypeObject *type, PyObject *args, PyObject *kwargs) {
    PyObject *wanted;
    Py_ssize_t limit;
    if (!PyArg_ParseTuple(args, "O!n", &PyFrozenSet_Type, &wanted, &limit))
        return NULL;
    Picker *self = (Picker *)type->tp_alloc(type, 0);
    if (self == NULL)
        return NULL;
    self->vectorcall = Picker_vectorcall;
    self->wanted = Py_NewRef(wanted);
    self->limit = limit;
    self->spellings = PyDict_New();
    if (self->spellings == NULL) {
        Py_DECREF(self);
        return NULL;
    }
    return (PyObject *)self;
}

static int Picker_traverse(Picker *self, visitproc visit, void *arg) {
    Py_VISIT(self->wanted);
    Py_VISIT(self->spellings);
    return 0;
}

static int Picker_clear(Picker *self) {
    Py_CLEAR(self->wanted);
    Py_CLEAR(self->spellings);
    return 0;
}

static void Picker_dealloc(Picker *self) {
    PyObject_GC_UnTrack(self);
    Picker_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

/* What it remembers, for a test that it stays bounded. */
static PyMemberDef Picker_members[] = {
    {"spellings", T_OBJECT, offsetof(Picker, spellings), READONLY, NULL},
    {NULL},
};

static PyTypeObject PickerType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "routing_engine._speedups.HeaderPicker",
    .tp_basicsize = sizeof(Picker),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_vectorcall_offset = offsetof(Picker, vectorcall),
    .tp_call = PyVectorcall_Call,
    .tp_new = Picker_new,
    .tp_members = Picker_members,
    .tp_traverse = (traverseproc)Picker_traverse,
    .tp_clear = (inquiry)Picker_clear,
    .tp_dealloc = (destructor)Picker_dealloc,
};

/* -- Probe ---------------------------------------------------------------------------------- */

typedef struct {
    uint64_t bit;
    long threshold;
    uint16_t *rank;
} OwnPercent;

typedef struct {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    PyObject *rules;     /* tuple of (lower-case header name, {value: mask}) */
    int has_ips;
    PyObject *v4_blocks; /* list per /16: None or (offsets, masks) */
    PyObject *v6_bounds, *v6_masks;
    PyObject *cities, *users, *user_set, *city_key, *user_key;
    /* A bit per CRC-32 & filter_mask of each listed user's UTF-8, or NULL (look up every user):
     * most requests' user is listed nowhere, and this tells them from the CRC the percent
     * needs anyway, without hashing the string or reading the large set (a cache miss). */
    uint64_t *filter;
    uint32_t filter_mask;
    uint32_t seed;
    uint64_t everyone, own_everyone;
    uint64_t *table; /* mask per bucket of the lane-wide percents, or NULL */
    OwnPercent *own;
    Py_ssize_t own_count;
    PyObject *miss, *resolve;
} Probe;

/* Adds the mask of `values` for `value` (a new reference, or NULL) to *mask. */
static int add_mask(PyObject *values, PyObject *value, uint64_t *mask) {
    if (value == NULL)
        return PyErr_Occurred() ? -1 : 0;
    PyObject *found = PyDict_GetItemWithError(values, value);
    Py_DECREF(value);
    if (found == NULL)
        return PyErr_Occurred() ? -1 : 0;
    *mask |= PyLong_AsUnsignedLongLong(found);
    return 0;
}

/* masks[bisect_right(bounds, address)] over two lists of ints. */
static uint64_t bisect_mask(PyObject *bounds, PyObject *masks, PyObject *address) {
    Py_ssize_t low = 0, high = PyList_GET_SIZE(bounds);
    while (low < high) {
        Py_ssize_t middle = (low + high) / 2;
        int below = PyObject_RichCompareBool(address, PyList_GET_ITEM(bounds, middle), Py_LT);
        if (below < 0)
            return (uint64_t)-1;
        if (below)
            high = middle;
        else
            low = middle + 1;
    }
    return PyLong_AsUnsignedLongLong(PyList_GET_ITEM(masks, low));
}

/* The mask of the lanes whose IP rules cover `ip`; 0 for what is not an address, as in
 * Python (inet_pton's errors are no match). */
static int ip_mask_of(Probe *self, PyObject *ip, uint64_t *mask) {
    if (!PyUnicode_Check(ip))
        return 0;
    Py_ssize_t size;
    const char *text = PyUnicode_AsUTF8AndSize(ip, &size);
    if (text == NULL) {
        PyErr_Clear();
        return 0;
    }
    if ((Py_ssize_t)strlen(text) != size)
        return 0;
    unsigned char packed[16];
    const unsigned char *v4;
    if (memchr(text, ':', size) == NULL) {
        if (inet_pton(AF_INET, text, packed) != 1)
            return 0;
        v4 = packed;
    } else {
        static const unsigned char mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xFF, 0xFF};
        if (inet_pton(AF_INET6, text, packed) != 1)
            return 0;
        if (memcmp(packed, mapped, 12) != 0) {
            PyObject *address = _PyLong_FromByteArray(packed, 16, 0, 0);
            if (address == NULL)
                return -1;
            *mask = bisect_mask(self->v6_bounds, self->v6_masks, address);
            Py_DECREF(address);
            return PyErr_Occurred() ? -1 : 0;
        }
        v4 = packed + 12;
    }
    PyObject *block = PyList_GET_ITEM(self->v4_blocks, v4[0] << 8 | v4[1]);
    if (block == Py_None)
        return 0;
    /* bisect_mask over the block's offsets (0..65536: C longs, nothing allocated). */
    PyObject *offsets = PyTuple_GET_ITEM(block, 0);
    long offset = v4[2] << 8 | v4[3];
    Py_ssize_t low = 0, high = PyList_GET_SIZE(offsets);
    while (low < high) {
        Py_ssize_t middle = (low + high) / 2;
        if (offset < PyLong_AsLong(PyList_GET_ITEM(offsets, middle)))
            high = middle;
        else
            low = middle + 1;
    }
    *mask = PyLong_AsUnsignedLongLong(PyList_GET_ITEM(PyTuple_GET_ITEM(block, 1), low));
    return PyErr_Occurred() ? -1 : 0;
}

/* city.strip().casefold(): ASCII in C (casefold is lower there; a city already in that form
 * is looked up as it is), the rest by the methods. */
static PyObject *folded(PyObject *city) {
    if (PyUnicode_CheckExact(city) && PyUnicode_IS_ASCII(city)) {
        const Py_UCS1 *text = PyUnicode_1BYTE_DATA(city);
        Py_ssize_t start = 0, stop = PyUnicode_GET_LENGTH(city);
        while (start < stop && Py_UNICODE_ISSPACE(text[start]))
            start++;
        while (stop > start && Py_UNICODE_ISSPACE(text[stop - 1]))
            stop--;
        Py_ssize_t upper = start;
        while (upper < stop && !Py_ISUPPER(text[upper]))
            upper++;
        if (upper == stop && start == 0 && stop == PyUnicode_GET_LENGTH(city))
            return Py_NewRef(city);
        PyObject *result = PyUnicode_New(stop - start, 127);
        if (result == NULL)
            return NULL;
        Py_UCS1 *out = PyUnicode_1BYTE_DATA(result);
        for (Py_ssize_t i = start; i < stop; i++)
            out[i - start] = Py_TOLOWER(text[i]);
        return result;
    }
    PyObject *stripped = PyObject_CallMethod(city, "strip", NULL);
    if (stripped == NULL)
        return NULL;
    PyObject *result = PyObject_CallMethod(stripped, "casefold", NULL);
    Py_DECREF(stripped);
    return result;
}

static PyObject *Probe_vectorcall(PyObject *op, PyObject *const *args, size_t nargsf,
                                  PyObject *kwnames) {
    static const char *names[] = {"headers", "ip", "city", "user"};
    Probe *self = (Probe *)op;
    PyObject *given[4] = {NULL, Py_None, Py_None, Py_None};
    Py_ssize_t count = PyVectorcall_NARGS(nargsf);
    if (count < 1 || count > 4)
        goto bad_arguments;
    for (Py_ssize_t i = 0; i < count; i++)
        given[i] = args[i];
    for (Py_ssize_t k = 0; kwnames != NULL && k < PyTuple_GET_SIZE(kwnames); k++) {
        const char *name = PyUnicode_AsUTF8(PyTuple_GET_ITEM(kwnames, k));
        int slot = -1;
        for (int n = 1; name != NULL && n < 4; n++)
            if (strcmp(name, names[n]) == 0)
                slot = n;
        if (slot < count)
            goto bad_arguments;
        given[slot] = args[count + k];
    }
    PyObject *headers = given[0], *ip = given[1], *city = given[2], *user = given[3];
    uint64_t header_mask = 0, ip_mask = 0, city_mask = 0, user_mask = 0;
    uint64_t percent_hit = self->everyone, own_hit = self->own_everyone;

    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(self->rules); i++) {
        PyObject *rule = PyTuple_GET_ITEM(self->rules, i);
        PyObject *value;
        if (PyDict_CheckExact(headers)) {
            value = Py_XNewRef(PyDict_GetItemWithError(headers, PyTuple_GET_ITEM(rule, 0)));
        } else {
            int has = PySequence_Contains(headers, PyTuple_GET_ITEM(rule, 0));
            if (has < 0)
                return NULL;
            value = has ? PyObject_GetItem(headers, PyTuple_GET_ITEM(rule, 0)) : NULL;
        }
        if (add_mask(PyTuple_GET_ITEM(rule, 1), value, &header_mask) < 0)
            return NULL;
    }
    if (self->has_ips && ip != Py_None && ip_mask_of(self, ip, &ip_mask) < 0)
        return NULL;
    if (PyDict_GET_SIZE(self->cities)) {
        PyObject *value = city == Py_None ? get_header(headers, self->city_key) : Py_NewRef(city);
        if (value == NULL && PyErr_Occurred())
            return NULL;
        if (value != NULL) {
            PyObject *key = folded(value);
            Py_DECREF(value);
            if (key == NULL || add_mask(self->cities, key, &city_mask) < 0)
                return NULL;
        }
    }
    PyObject *value = user == Py_None ? get_header(headers, self->user_key) : Py_NewRef(user);
    if (value == NULL && PyErr_Occurred())
        return NULL;
    int truthy = value == NULL ? 0 : PyObject_IsTrue(value);
    if (truthy > 0) {
        PyObject *encoded = NULL;
        Py_ssize_t size = 0;
        const char *data = PyUnicode_Check(value) ? utf8(value, &size, &encoded) : NULL;
        if (data == NULL && PyErr_Occurred())
            goto user_error;
        uint32_t crc = data != NULL ? crc32_of(0, data, size) : 0;
        if (data == NULL || self->filter == NULL ||
            self->filter[(crc & self->filter_mask) >> 6] >> (crc & 63) & 1) {
            int listed = PySet_Contains(self->user_set, value);
            if (listed < 0 ||
                (listed && add_mask(self->users, Py_NewRef(value), &user_mask) < 0)) {
                Py_XDECREF(encoded);
                goto user_error;
            }
        }
        if (self->table != NULL || self->own_count) {
            if (data == NULL) {
                /* Not text: user.encode() raises, as in Python (or says what to hash). */
                encoded = PyObject_CallMethod(value, "encode", NULL);
                if (encoded == NULL || !PyBytes_Check(encoded)) {
                    Py_XDECREF(encoded);
                    goto user_error;
                }
                data = PyBytes_AS_STRING(encoded);
                size = PyBytes_GET_SIZE(encoded);
                crc = crc32_of(0, data, size);
            }
            if (self->table != NULL)
                percent_hit |= self->table[crc % BUCKETS];
            if (self->own_count) {
                uint32_t bucket = crc32_of(self->seed, data, size) % BUCKETS;
                for (Py_ssize_t n = 0; n < self->own_count; n++)
                    if (self->own[n].rank[bucket] < self->own[n].threshold)
                        own_hit |= self->own[n].bit;
            }
        }
        Py_XDECREF(encoded);
    }
    Py_XDECREF(value);
    if (truthy < 0)
        return NULL;
    if (!(header_mask | ip_mask | city_mask | user_mask | percent_hit | own_hit))
        return Py_NewRef(self->miss);
    return PyObject_CallFunction(self->resolve, "KKKKKK", header_mask, ip_mask, city_mask,
                                 user_mask, percent_hit, own_hit);
user_error:
    Py_DECREF(value);
    return NULL;
bad_arguments:
    PyErr_SetString(PyExc_TypeError, "decide(headers, ip=None, city=None, user=None)");
    return NULL;
}

/* uint16 ranks (or the uint64 percent table) from a sequence of ints. */
static void *c_array(PyObject *sequence, int wide) {
    PyObject *items = PySequence_Fast(sequence, "a sequence of ints");
    if (items == NULL)
        return NULL;
    Py_ssize_t size = PySequence_Fast_GET_SIZE(items);
    if (size != BUCKETS) {
        Py_DECREF(items);
        PyErr_SetString(PyExc_ValueError, "one entry per bucket");
        return NULL;
    }
    void *array = PyMem_Malloc(size * (wide ? sizeof(uint64_t) : sizeof(uint16_t)));
    for (Py_ssize_t i = 0; array != NULL && i < size; i++) {
        unsigned long long item = PyLong_AsUnsignedLongLong(PySequence_Fast_GET_ITEM(items, i));
        if (wide)
            ((uint64_t *)array)[i] = item;
        else
            ((uint16_t *)array)[i] = (uint16_t)item;
    }
    Py_DECREF(items);
    if (array == NULL)
        return PyErr_NoMemory();
    if (PyErr_Occurred()) {
        PyMem_Free(array);
        return NULL;
    }
    return array;
}

/* Probe.filter: 16 bits or more per listed user (about 1 in 16 unlisted ones looked up). */
static int build_filter(Probe *self) {
    uint32_t bits = 64;
    while (bits < 16 * (uint64_t)PySet_GET_SIZE(self->user_set) && bits < (1u << 31))
        bits <<= 1;
    self->filter = PyMem_Calloc(bits / 64, sizeof(uint64_t));
    if (self->filter == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    self->filter_mask = bits - 1;
    PyObject *users = PyObject_GetIter(self->user_set), *user;
    if (users == NULL)
        return -1;
    while ((user = PyIter_Next(users)) != NULL) {
        PyObject *encoded = NULL;
        Py_ssize_t size;
        const char *data = PyUnicode_Check(user) ? utf8(user, &size, &encoded) : NULL;
        Py_DECREF(user);
        if (data == NULL) {
            /* Not text (or not encodable): no filter, every user looked up. */
            PyErr_Clear();
            PyMem_Free(self->filter);
            self->filter = NULL;
            break;
        }
        uint32_t crc = crc32_of(0, data, size) & self->filter_mask;
        self->filter[crc >> 6] |= (uint64_t)1 << (crc & 63);
        Py_XDECREF(encoded);
    }
    Py_DECREF(users);
    return PyErr_Occurred() ? -1 : 0;
}

static PyObject *Probe_new(PyTypeObject *type, PyObject *args, PyObject *kwargs) {
    PyObject *rules, *v4_blocks, *v6_bounds, *v6_masks, *cities, *users, *user_set;
    PyObject *city_key, *user_key, *table, *own, *miss, *resolve;
    int has_ips;
    unsigned int seed;
    unsigned long long everyone, own_everyone;
    if (!PyArg_ParseTuple(args, "O!pO!O!O!O!O!O!UUIKKOO!OO", &PyTuple_Type, &rules, &has_ips,
                          &PyList_Type, &v4_blocks, &PyList_Type, &v6_bounds, &PyList_Type,
                          &v6_masks, &PyDict_Type, &cities, &PyDict_Type, &users,
                          &PyFrozenSet_Type, &user_set, &city_key, &user_key, &seed, &everyone,
                          &own_everyone, &table, &PyTuple_Type, &own, &miss, &resolve))
        return NULL;
    Probe *self = (Probe *)type->tp_alloc(type, 0);
    if (self == NULL)
        return NULL;
    self->vectorcall = Probe_vectorcall;
    self->rules = Py_NewRef(rules);
    self->has_ips = has_ips;
    self->v4_blocks = Py_NewRef(v4_blocks);
    self->v6_bounds = Py_NewRef(v6_bounds);
    self->v6_masks = Py_NewRef(v6_masks);
    self->cities = Py_NewRef(cities);
    self->users = Py_NewRef(users);
    self->user_set = Py_NewRef(user_set);
    self->city_key = Py_NewRef(city_key);
    self->user_key = Py_NewRef(user_key);
    self->seed = seed;
    self->everyone = everyone;
    self->own_everyone = own_everyone;
    self->miss = Py_NewRef(miss);
    self->resolve = Py_NewRef(resolve);
    if (PyList_GET_SIZE(v4_blocks) != 0x10000 ||
        PyList_GET_SIZE(v6_masks) != PyList_GET_SIZE(v6_bounds) + 1) {
        PyErr_SetString(PyExc_ValueError, "65,536 IPv4 blocks; one IPv6 mask more than bounds");
        goto error;
    }
    if (table != Py_None && (self->table = c_array(table, 1)) == NULL)
        goto error;
    if (build_filter(self) < 0)
        goto error;
    self->own = PyMem_Calloc(PyTuple_GET_SIZE(own) + 1, sizeof(OwnPercent));
    if (self->own == NULL) {
        PyErr_NoMemory();
        goto error;
    }
    for (Py_ssize_t n = 0; n < PyTuple_GET_SIZE(own); n++) {
        OwnPercent *entry = &self->own[n];
        PyObject *rank;
        if (!PyArg_ParseTuple(PyTuple_GET_ITEM(own, n), "KlO", (unsigned long long *)&entry->bit, &entry->threshold,
                              &rank) ||
            (entry->rank = c_array(rank, 0)) == NULL)
            goto error;
        self->own_count++;
    }
    return (PyObject *)self;
error:
    Py_DECREF(self);
    return NULL;
}

static int Probe_traverse(Probe *self, visitproc visit, void *arg) {
    Py_VISIT(self->rules);
    Py_VISIT(self->v4_blocks);
    Py_VISIT(self->v6_bounds);
    Py_VISIT(self->v6_masks);
    Py_VISIT(self->cities);
    Py_VISIT(self->users);
    Py_VISIT(self->user_set);
    Py_VISIT(self->miss);
    Py_VISIT(self->resolve);
    return 0;
}

static int Probe_clear(Probe *self) {
    Py_CLEAR(self->rules);
    Py_CLEAR(self->v4_blocks);
    Py_CLEAR(self->v6_bounds);
    Py_CLEAR(self->v6_masks);
    Py_CLEAR(self->cities);
    Py_CLEAR(self->users);
    Py_CLEAR(self->user_set);
    Py_CLEAR(self->city_key);
    Py_CLEAR(self->user_key);
    Py_CLEAR(self->miss);
    Py_CLEAR(self->resolve);
    return 0;
}

static void Probe_dealloc(Probe *self) {
    PyObject_GC_UnTrack(self);
    Probe_clear(self);
    PyMem_Free(self->table);
    PyMem_Free(self->filter);
    for (Py_ssize_t n = 0; self->own != NULL && n < self->own_count; n++)
        PyMem_Free(self->own[n].rank);
    PyMem_Free(self->own);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyTypeObject ProbeType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "routing_engine._speedups.Probe",
    .tp_basicsize = sizeof(Probe),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_vectorcall_offset = offsetof(Probe, vectorcall),
    .tp_call = PyVectorcall_Call,
    .tp_new = Probe_new,
    .tp_traverse = (traverseproc)Probe_traverse,
    .tp_clear = (inquiry)Probe_clear,
    .tp_dealloc = (destructor)Probe_dealloc,
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, .m_name = "routing_engine._speedups", .m_size = -1,
};

PyMODINIT_FUNC PyInit__speedups(void) {
    crc_init();
    if (PyType_Ready(&PickerType) < 0 || PyType_Ready(&ProbeType) < 0)
        return NULL;
    PyObject *m = PyModule_Create(&module);
    if (m == NULL)
        return NULL;
    if (PyModule_AddObjectRef(m, "HeaderPicker", (PyObject *)&PickerType) < 0 ||
        PyModule_AddObjectRef(m, "Probe", (PyObject *)&ProbeType) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
