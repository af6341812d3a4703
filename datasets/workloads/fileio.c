/*
 * IOzone-like file I/O benchmark: write, rewrite, read, reread, random read, random write,
 * backward read and record rewrite on one file, with fsync at the end of every write test
 * (IOzone's -e) and an fsync every `sync_every` records during the writes (an application
 * that checkpoints), reporting KB/s per test.
 *
 * Usage: fileio FILE [file-KiB] [record-KiB] [sync-every-records] [seed]
 *        (defaults 16384, 4, 256, 1)
 * Written for TraceSynth; the test list follows IOzone's public documentation.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <unistd.h>

static double now(void) {
    struct timeval tv;
    gettimeofday(&tv, NULL);
    return tv.tv_sec + tv.tv_usec * 1e-6;
}

static unsigned long long rng = 1;
static unsigned long long next_random(void) {
    rng = rng * 6364136223846793005ULL + 1442695040888963407ULL;
    return rng >> 17;
}

static void die(const char *what) {
    perror(what);
    exit(1);
}

static void report(const char *test, long kib, double seconds) {
    printf("%-14s %10.0f KB/s\n", test, seconds > 0 ? kib / seconds : 0.0);
    fflush(stdout);
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: fileio FILE [file-KiB] [record-KiB] [sync-every] [seed]\n");
        return 2;
    }
    const char *path = argv[1];
    long file_kib = argc > 2 ? atol(argv[2]) : 16384;
    long rec_kib = argc > 3 ? atol(argv[3]) : 4;
    long sync_every = argc > 4 ? atol(argv[4]) : 256;
    rng = argc > 5 ? strtoull(argv[5], NULL, 10) : 1;
    size_t rec = rec_kib * 1024;
    long records = file_kib / rec_kib;
    char *buf = malloc(rec);
    for (size_t i = 0; i < rec; i++) buf[i] = (char)(next_random() & 0xff);

    const char *write_tests[2] = {"write", "rewrite"};
    for (int t = 0; t < 2; t++) {
        double t0 = now();
        int fd = open(path, O_CREAT | O_WRONLY | (t == 0 ? O_TRUNC : 0), 0644);
        if (fd < 0) die("open");
        for (long r = 0; r < records; r++) {
            buf[0] = (char)r;
            if (write(fd, buf, rec) != (ssize_t)rec) die("write");
            if (sync_every && (r + 1) % sync_every == 0 && fdatasync(fd) != 0) die("fdatasync");
        }
        if (fsync(fd) != 0) die("fsync");
        close(fd);
        report(write_tests[t], file_kib, now() - t0);
    }

    const char *read_tests[2] = {"read", "reread"};
    for (int t = 0; t < 2; t++) {
        double t0 = now();
        int fd = open(path, O_RDONLY);
        if (fd < 0) die("open");
        long sum = 0;
        ssize_t got;
        while ((got = read(fd, buf, rec)) > 0) sum += buf[0];
        close(fd);
        report(read_tests[t], file_kib, now() - t0);
        if (sum == 42) puts("");
    }

    {
        double t0 = now();
        int fd = open(path, O_RDONLY);
        if (fd < 0) die("open");
        for (long r = 0; r < records; r++) {
            off_t off = (off_t)(next_random() % records) * rec;
            if (pread(fd, buf, rec, off) < 0) die("pread");
        }
        close(fd);
        report("random read", file_kib, now() - t0);
    }
    {
        double t0 = now();
        int fd = open(path, O_WRONLY);
        if (fd < 0) die("open");
        for (long r = 0; r < records; r++) {
            off_t off = (off_t)(next_random() % records) * rec;
            if (pwrite(fd, buf, rec, off) < 0) die("pwrite");
            if (sync_every && (r + 1) % sync_every == 0 && fdatasync(fd) != 0) die("fdatasync");
        }
        if (fsync(fd) != 0) die("fsync");
        close(fd);
        report("random write", file_kib, now() - t0);
    }
    {
        double t0 = now();
        int fd = open(path, O_RDONLY);
        if (fd < 0) die("open");
        for (long r = records - 1; r >= 0; r--) {
            if (lseek(fd, (off_t)r * rec, SEEK_SET) < 0) die("lseek");
            if (read(fd, buf, rec) < 0) die("read");
        }
        close(fd);
        report("backward read", file_kib, now() - t0);
    }
    {
        double t0 = now();
        int fd = open(path, O_WRONLY);
        if (fd < 0) die("open");
        for (long r = 0; r < records / 4; r++) {
            if (pwrite(fd, buf, rec, 0) < 0) die("pwrite");
        }
        if (fsync(fd) != 0) die("fsync");
        close(fd);
        report("record rewrite", file_kib / 4, now() - t0);
    }
    unlink(path);
    free(buf);
    return 0;
}
