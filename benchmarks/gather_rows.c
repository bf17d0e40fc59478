/*
 * Random-row gather in plain C: the memory floor of a minibatch draw.
 *
 * Copies batches of `n` rows of `row_bytes` bytes, at uniformly random row
 * indices, out of a table of `num_rows` rows (N = 10^6 rows of 64 bytes is
 * 64 MB, larger than the last-level cache), on `threads` threads that split
 * each batch in halves, as XLA's two partitions of a gather do. With
 * `prefetch` > 0 every thread issues a software prefetch of the row
 * `prefetch` positions ahead before copying the current one: an instruction
 * XLA's CPU code generator does not emit, so the gap between the two runs is
 * what a gather could gain that a compiled TensorFlow program cannot.
 *
 * With `huge` = 1 the table is allocated on 2 MB boundaries and advised for
 * transparent huge pages (madvise(MADV_HUGEPAGE)) before it is first written,
 * so a random row costs no 4 KB page-table walk (the kernel's
 * /sys/kernel/mm/transparent_hugepage/enabled must not be "never").
 *
 * Every timed call copies `rows_per_call` rows with fresh random indices
 * (drawn before the timing), so no batch is served from the cache.
 *
 * Built and run by benchmarks/bench_gather.py (`c_loop` section):
 *   cc -O2 -pthread -o gather_rows gather_rows.c
 *   ./gather_rows NUM_ROWS ROW_BYTES N ROWS_PER_CALL REPEATS THREADS PREFETCH [HUGE]
 * Prints one JSON object: the median and minimum ns per gathered row.
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

typedef struct {
  const unsigned char *table;
  const uint32_t *idx;
  unsigned char *out;
  size_t row_bytes;
  long lo, hi, n, batches;
  int prefetch;
} work_t;

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static void *gather(void *arg) {
  const work_t *w = (const work_t *)arg;
  for (long b = 0; b < w->batches; b++) {
    const uint32_t *ix = w->idx + b * w->n;
    for (long i = w->lo; i < w->hi; i++) {
      if (w->prefetch && i + w->prefetch < w->hi)
        __builtin_prefetch(w->table + (size_t)ix[i + w->prefetch] * w->row_bytes);
      memcpy(w->out + (size_t)i * w->row_bytes,
             w->table + (size_t)ix[i] * w->row_bytes, w->row_bytes);
    }
  }
  return NULL;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

int main(int argc, char **argv) {
  if (argc != 8 && argc != 9) {
    fprintf(stderr,
            "usage: %s NUM_ROWS ROW_BYTES N ROWS_PER_CALL REPEATS THREADS PREFETCH [HUGE]\n",
            argv[0]);
    return 2;
  }
  long num_rows = atol(argv[1]), n = atol(argv[3]), rows_per_call = atol(argv[4]);
  size_t row_bytes = (size_t)atol(argv[2]);
  int repeats = atoi(argv[5]), threads = atoi(argv[6]), prefetch = atoi(argv[7]);
  int huge = argc == 9 ? atoi(argv[8]) : 0;
  if (num_rows < 1 || row_bytes < 1 || n < 1 || rows_per_call < n || repeats < 1 ||
      threads < 1 || threads > 64 || prefetch < 0) {
    fprintf(stderr, "invalid arguments\n");
    return 2;
  }
  long batches = rows_per_call / n;
  const size_t huge_page = (size_t)2 << 20;
  size_t table_bytes = ((size_t)num_rows * row_bytes + huge_page - 1) / huge_page * huge_page;
  unsigned char *table = aligned_alloc(huge_page, table_bytes);
  if (table && huge && madvise(table, table_bytes, MADV_HUGEPAGE) != 0) {
    perror("madvise(MADV_HUGEPAGE)");
    return 1;
  }
  unsigned char *out = malloc((size_t)n * row_bytes);
  uint32_t *idx = malloc(sizeof(uint32_t) * (size_t)(batches * n) * (size_t)repeats);
  double *times = malloc(sizeof(double) * (size_t)repeats);
  if (!table || !out || !idx || !times) {
    fprintf(stderr, "out of memory\n");
    return 1;
  }
  for (size_t i = 0; i < (size_t)num_rows * row_bytes; i++) table[i] = (unsigned char)i;
  /* 64-bit LCG (Knuth's MMIX constants), top bits scaled to [0, num_rows). */
  uint64_t s = 0x9E3779B97F4A7C15ull;
  for (size_t i = 0; i < (size_t)(batches * n) * (size_t)repeats; i++) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    idx[i] = (uint32_t)(((s >> 32) * (uint64_t)num_rows) >> 32);
  }
  pthread_t tid[64];
  work_t w[64];
  for (int r = 0; r < repeats; r++) {
    double t0 = now_s();
    for (int j = 0; j < threads; j++) {
      w[j] = (work_t){table, idx + (size_t)r * (size_t)(batches * n), out, row_bytes,
                      j * n / threads, (j + 1) * n / threads, n, batches, prefetch};
      pthread_create(&tid[j], NULL, gather, &w[j]);
    }
    for (int j = 0; j < threads; j++) pthread_join(tid[j], NULL);
    times[r] = (now_s() - t0) / (double)(batches * n) * 1e9;
  }
  qsort(times, (size_t)repeats, sizeof(double), cmp_double);
  unsigned checksum = 0;
  for (size_t i = 0; i < (size_t)n * row_bytes; i++) checksum += out[i];
  printf("{\"ns_per_row_median\": %.4f, \"ns_per_row_min\": %.4f, \"checksum\": %u}\n",
         times[repeats / 2], times[0], checksum);
  free(table);
  free(out);
  free(idx);
  free(times);
  return 0;
}
