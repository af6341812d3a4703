/*
 * STREAM-like memory bandwidth kernel: Copy, Scale, Add, Triad over arrays larger than the
 * caches, in OpenMP parallel loops (as STREAM is usually built), with per-kernel timing and
 * validation of the results.
 *
 * Usage: stream [elements] [ntimes]   (defaults 2,000,000 and 60)
 * Run with OMP_NUM_THREADS=2 OMP_WAIT_POLICY=passive for the dataset: idle threads then sleep
 * in futex instead of spinning, which is what the kernel trace shows of an OpenMP barrier.
 * Written for TraceSynth; the kernels follow the public description of STREAM (J. McCalpin).
 */
#include <float.h>
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/time.h>

static double now(void) {
    struct timeval tv;
    gettimeofday(&tv, NULL);
    return tv.tv_sec + tv.tv_usec * 1e-6;
}

int main(int argc, char **argv) {
    long n = argc > 1 ? atol(argv[1]) : 2000000;
    int ntimes = argc > 2 ? atoi(argv[2]) : 60;
    /* Work in slices so that every pass is several parallel regions (barriers), as STREAM's
     * loops become when the arrays are processed block by block. */
    const long slice = 65536;
    double *a = malloc(sizeof(double) * n), *b = malloc(sizeof(double) * n),
           *c = malloc(sizeof(double) * n);
    const double scalar = 3.0;
    double best[4] = {FLT_MAX, FLT_MAX, FLT_MAX, FLT_MAX};
    const char *names[4] = {"Copy", "Scale", "Add", "Triad"};
    const double bytes[4] = {2.0 * sizeof(double) * n, 2.0 * sizeof(double) * n,
                             3.0 * sizeof(double) * n, 3.0 * sizeof(double) * n};

#pragma omp parallel for
    for (long j = 0; j < n; j++) { a[j] = 1.0; b[j] = 2.0; c[j] = 0.0; }

    for (int k = 0; k < ntimes; k++) {
        double t[4];
        t[0] = now();
        for (long s = 0; s < n; s += slice) {
            long e = s + slice < n ? s + slice : n;
#pragma omp parallel for
            for (long j = s; j < e; j++) c[j] = a[j];
        }
        t[0] = now() - t[0];
        t[1] = now();
        for (long s = 0; s < n; s += slice) {
            long e = s + slice < n ? s + slice : n;
#pragma omp parallel for
            for (long j = s; j < e; j++) b[j] = scalar * c[j];
        }
        t[1] = now() - t[1];
        t[2] = now();
        for (long s = 0; s < n; s += slice) {
            long e = s + slice < n ? s + slice : n;
#pragma omp parallel for
            for (long j = s; j < e; j++) c[j] = a[j] + b[j];
        }
        t[2] = now() - t[2];
        t[3] = now();
        for (long s = 0; s < n; s += slice) {
            long e = s + slice < n ? s + slice : n;
#pragma omp parallel for
            for (long j = s; j < e; j++) a[j] = b[j] + scalar * c[j];
        }
        t[3] = now() - t[3];
        for (int i = 0; i < 4; i++)
            if (k > 0 && t[i] < best[i]) best[i] = t[i];
        printf("pass %3d: copy %.4f scale %.4f add %.4f triad %.4f s\n", k, t[0], t[1], t[2], t[3]);
        fflush(stdout);
    }

    /* Validation: replay the recurrence on scalars. */
    double aj = 1.0, bj = 2.0, cj = 0.0;
    for (int k = 0; k < ntimes; k++) { cj = aj; bj = scalar * cj; cj = aj + bj; aj = bj + scalar * cj; }
    double err = 0;
    for (long j = 0; j < n; j += 997) err += fabs(a[j] - aj) / aj;
    printf("Function    Best Rate MB/s\n");
    for (int i = 0; i < 4; i++) printf("%-8s %12.1f\n", names[i], bytes[i] / best[i] * 1e-6);
    printf("threads %d, validation %s\n", omp_get_max_threads(), err < 1e-9 ? "passed" : "FAILED");
    free(a); free(b); free(c);
    return err < 1e-9 ? 0 : 1;
}
