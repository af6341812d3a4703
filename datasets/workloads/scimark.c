/*
 * SciMark2-like numeric kernels: FFT, SOR, Monte Carlo, sparse mat-vec, LU.
 *
 * A deterministic compute workload for the TraceSynth dataset. Like SciMark2 it times every
 * kernel with clock() (CLOCK_PROCESS_CPUTIME_ID, a real syscall, not vDSO) and reports
 * Mflops; unlike SciMark2 it runs a fixed number of cycles instead of calibrating to a wall
 * time, so the work done (and the syscall sequence) does not depend on the machine's speed.
 * Each cycle is timed separately, as a harness collecting per-iteration statistics does.
 *
 * Usage: scimark [cycles-scale]   (default 1)
 * Written for TraceSynth; algorithms follow the public descriptions of SciMark2 (NIST).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* SciMark2's random generator is a subtractive lagged generator; a 64-bit LCG is enough for
 * a deterministic workload. */
static unsigned long long rng_state = 101010ULL;
static double rng_next(void) {
    rng_state = rng_state * 6364136223846793005ULL + 1442695040888963407ULL;
    return (double)(rng_state >> 11) * (1.0 / 9007199254740992.0);
}

static double seconds(void) { return (double)clock() / CLOCKS_PER_SEC; }

static double *random_vector(int n) {
    double *v = malloc(sizeof(double) * n);
    for (int i = 0; i < n; i++) v[i] = rng_next();
    return v;
}

static double **random_matrix(int m, int n) {
    double **a = malloc(sizeof(double *) * m);
    for (int i = 0; i < m; i++) a[i] = random_vector(n);
    return a;
}

static void free_matrix(double **a, int m) {
    for (int i = 0; i < m; i++) free(a[i]);
    free(a);
}

/* --- FFT: in-place radix-2 complex transform, forward then inverse ----------------------- */
static void fft_transform(int n, double *data, int direction) {
    int log2n = 0;
    while ((1 << log2n) < n) log2n++;
    for (int i = 0, j = 0; i < n - 1; i++) { /* bit reversal */
        int k = n >> 1;
        if (i < j) {
            double tr = data[2 * i], ti = data[2 * i + 1];
            data[2 * i] = data[2 * j]; data[2 * i + 1] = data[2 * j + 1];
            data[2 * j] = tr; data[2 * j + 1] = ti;
        }
        while (k <= j) { j -= k; k >>= 1; }
        j += k;
    }
    for (int bit = 0, dual = 1; bit < log2n; bit++, dual *= 2) {
        double theta = 2.0 * direction * M_PI / (2.0 * dual);
        double s = sin(theta), t = sin(theta / 2.0), s2 = 2.0 * t * t;
        double wr = 1.0, wi = 0.0;
        for (int a = 0; a < dual; a++) {
            for (int b = 0; b < n; b += 2 * dual) {
                int i = 2 * (b + a), j = 2 * (b + a + dual);
                double z1r = wr * data[j] - wi * data[j + 1];
                double z1i = wr * data[j + 1] + wi * data[j];
                data[j] = data[i] - z1r; data[j + 1] = data[i + 1] - z1i;
                data[i] += z1r; data[i + 1] += z1i;
            }
            double tmp = wr - s * wi - s2 * wr;
            wi = wi + s * wr - s2 * wi;
            wr = tmp;
        }
    }
}

static double kernel_fft(int n, int cycles) {
    double *x = random_vector(2 * n);
    for (int c = 0; c < cycles; c++) {
        fft_transform(n, x, -1);
        fft_transform(n, x, 1);
        for (int i = 0; i < 2 * n; i++) x[i] /= n;
    }
    double sum = 0;
    for (int i = 0; i < 2 * n; i++) sum += x[i];
    free(x);
    return sum;
}

/* --- SOR: successive over-relaxation on a grid ------------------------------------------ */
static double kernel_sor(int n, int cycles) {
    double **g = random_matrix(n, n);
    const double omega = 1.25, f = omega * 0.25, o1 = 1.0 - omega;
    for (int c = 0; c < cycles; c++)
        for (int i = 1; i < n - 1; i++)
            for (int j = 1; j < n - 1; j++)
                g[i][j] = f * (g[i - 1][j] + g[i + 1][j] + g[i][j - 1] + g[i][j + 1]) + o1 * g[i][j];
    double sum = g[n / 2][n / 2];
    free_matrix(g, n);
    return sum;
}

/* --- Monte Carlo: pi from random points in the unit square ------------------------------ */
static double kernel_montecarlo(int samples) {
    int under = 0;
    for (int i = 0; i < samples; i++) {
        double x = rng_next(), y = rng_next();
        if (x * x + y * y <= 1.0) under++;
    }
    return 4.0 * under / samples;
}

/* --- Sparse matrix (compressed rows) times vector ---------------------------------------- */
static double kernel_sparse(int n, int nz, int cycles) {
    int per_row = nz / n;
    double *x = random_vector(n), *y = calloc(n, sizeof(double)), *val = random_vector(n * per_row);
    int *row = malloc(sizeof(int) * (n + 1)), *col = malloc(sizeof(int) * n * per_row);
    for (int r = 0; r < n; r++) {
        row[r] = r * per_row;
        int step = r / per_row > 0 ? r / per_row : 1;
        for (int k = 0; k < per_row; k++) col[r * per_row + k] = (k * step) % n;
    }
    row[n] = n * per_row;
    for (int c = 0; c < cycles; c++)
        for (int r = 0; r < n; r++) {
            double s = 0;
            for (int k = row[r]; k < row[r + 1]; k++) s += x[col[k]] * val[k];
            y[r] = s;
        }
    double sum = 0;
    for (int r = 0; r < n; r++) sum += y[r];
    free(x); free(y); free(val); free(row); free(col);
    return sum;
}

/* --- LU factorisation with partial pivoting ---------------------------------------------- */
static double kernel_lu(int n, int cycles) {
    double **a0 = random_matrix(n, n), **a = random_matrix(n, n);
    int *pivot = malloc(sizeof(int) * n);
    for (int c = 0; c < cycles; c++) {
        for (int i = 0; i < n; i++) memcpy(a[i], a0[i], sizeof(double) * n);
        for (int j = 0; j < n; j++) {
            int p = j;
            for (int i = j + 1; i < n; i++)
                if (fabs(a[i][j]) > fabs(a[p][j])) p = i;
            pivot[j] = p;
            if (p != j) { double *t = a[p]; a[p] = a[j]; a[j] = t; }
            if (a[j][j] == 0) continue;
            double recp = 1.0 / a[j][j];
            for (int i = j + 1; i < n; i++) a[i][j] *= recp;
            for (int i = j + 1; i < n; i++) {
                double aij = a[i][j];
                for (int k = j + 1; k < n; k++) a[i][k] -= aij * a[j][k];
            }
        }
    }
    double sum = a[n - 1][n - 1] + pivot[n - 1];
    free_matrix(a0, n); free_matrix(a, n); free(pivot);
    return sum;
}

/* Time every repetition separately; print a progress line per block of repetitions. */
#define MEASURE(name, reps, flops_per_rep, call)                                          \
    do {                                                                                  \
        double total = 0, check = 0;                                                      \
        for (int r = 0; r < (reps); r++) {                                                \
            double t0 = seconds();                                                        \
            check += (call);                                                              \
            total += seconds() - t0;                                                      \
            if ((r + 1) % 250 == 0) {                                                     \
                printf("%-10s rep %5d  %8.2f Mflops  check %.6g\n", name, r + 1,          \
                       total > 0 ? (flops_per_rep) * (r + 1) / total * 1e-6 : 0.0, check); \
                fflush(stdout);                                                           \
            }                                                                             \
        }                                                                                 \
        composite += total > 0 ? (flops_per_rep) * (reps) / total * 1e-6 : 0.0;          \
    } while (0)

int main(int argc, char **argv) {
    int scale = argc > 1 ? atoi(argv[1]) : 1;
    if (scale < 1) scale = 1;
    double composite = 0;
    MEASURE("FFT", 1500 * scale, (5.0 * 1024 * 10 - 2 * 1024) * 2 * 4, kernel_fft(1024, 4));
    MEASURE("SOR", 1500 * scale, 100.0 * 100 * 6 * 3, kernel_sor(100, 3));
    MEASURE("MonteCarlo", 1500 * scale, 20000.0 * 4, kernel_montecarlo(20000));
    MEASURE("Sparse", 1500 * scale, 1000.0 * 5 * 2 * 4, kernel_sparse(1000, 5000, 4));
    MEASURE("LU", 750 * scale, 2.0 * 60 * 60 * 60 / 3.0, kernel_lu(60, 1));
    printf("Composite score: %.2f\n", composite / 5);
    return 0;
}
