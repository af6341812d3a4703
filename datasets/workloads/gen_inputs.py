"""Deterministic inputs for the dataset workloads (same seed → byte-identical output).

    gen_inputs.py text  OUT --mb N --seed S        compressible pseudo-English text
    gen_inputs.py corpus DIR --files N --seed S    a folder of such text files (gzip -r)
    gen_inputs.py tree  DIR --files N --seed S     a tree of many small files (tar)
    gen_inputs.py build DIR --units N --seed S     a C project with a Makefile (make -j)
    gen_inputs.py sql   OUT --txns N --seed S      an SQL script of transactions (sqlite3)
"""

from __future__ import annotations

import argparse
import random
from pathlib import Path

WORDS = (
    "the of and to in is was that for on as with by he at from his an were are which this be "
    "kernel trace event thread process syscall buffer memory page file system network read "
    "write open close schedule wakeup switch clock time lock queue device driver interrupt "
    "value table index record block cache disk sync flush commit journal inode directory"
).split()


def text(out: Path, mb: int, seed: int) -> None:
    _text_file(out, mb * 1024 * 1024, random.Random(seed))


def corpus(root: Path, files: int, seed: int) -> None:
    """Text files of log-normal sizes (median ~6 KiB): documents, logs, sources."""
    rng = random.Random(seed)
    for i in range(files):
        folder = root / f"part{i % 10}"
        folder.mkdir(parents=True, exist_ok=True)
        _text_file(folder / f"doc{i:05d}.txt", int(rng.lognormvariate(8.7, 0.9)), rng)


def _text_file(out: Path, target: int, rng: random.Random) -> None:
    written = 0
    with open(out, "w") as fh:
        while written < target:
            n = rng.randrange(6, 18)
            words = [rng.choice(WORDS) for _ in range(n)]
            if rng.random() < 0.15:
                words.append(str(rng.randrange(10**6)))
            line = " ".join(words).capitalize() + ".\n"
            fh.write(line)
            written += len(line)


def tree(root: Path, files: int, seed: int) -> None:
    rng = random.Random(seed)
    for i in range(files):
        depth = rng.randrange(1, 4)
        folder = root.joinpath(*(f"d{rng.randrange(8)}" for _ in range(depth)))
        folder.mkdir(parents=True, exist_ok=True)
        size = int(rng.lognormvariate(7.0, 1.0)) + 16  # median ~1 KiB, a few much larger
        body = bytes(rng.getrandbits(8) for _ in range(min(size, 64))) * (size // 64 + 1)
        (folder / f"f{i:05d}.dat").write_bytes(body[:size])


def build(root: Path, units: int, seed: int) -> None:
    rng = random.Random(seed)
    root.mkdir(parents=True, exist_ok=True)
    (root / "common.h").write_text(
        "#include <stdio.h>\n#include <stdlib.h>\n#include <string.h>\n#include <math.h>\n"
        + "".join(f"double unit{i}(double x);\n" for i in range(units)))
    for i in range(units):
        ops = []
        for k in range(rng.randrange(8, 24)):
            a, b = rng.randrange(1, 97), rng.randrange(1, 89)
            ops.append(f"    for (int k = 0; k < {a}; k++) x = x * {b}.0 / (k + 1.5) + sin(x) * {k};")
        (root / f"unit{i}.c").write_text(
            '#include "common.h"\n'
            f"double unit{i}(double x) {{\n" + "\n".join(ops) + "\n    return x;\n}\n")
    calls = " + ".join(f"unit{i}(1.0)" for i in range(units))
    (root / "main.c").write_text(
        '#include "common.h"\nint main(void) {\n'
        f'    printf("%f\\n", {calls});\n    return 0;\n}}\n')
    objects = " ".join(f"unit{i}.o" for i in range(units))
    (root / "Makefile").write_text(
        "CC = gcc\nCFLAGS = -O1\n\n"
        f"app: main.o {objects}\n\t$(CC) -o $@ $^ -lm\n\n"
        "%.o: %.c common.h\n\t$(CC) $(CFLAGS) -c -o $@ $<\n\n"
        "clean:\n\trm -f *.o app\n")


def sql(out: Path, txns: int, seed: int) -> None:
    rng = random.Random(seed)
    lines = [
        "PRAGMA journal_mode=DELETE;",
        "PRAGMA synchronous=FULL;",
        "CREATE TABLE orders (id INTEGER PRIMARY KEY, customer INTEGER, item TEXT, qty INTEGER, price REAL);",
        "CREATE INDEX orders_customer ON orders(customer);",
    ]
    next_id = 1
    for t in range(txns):
        lines.append("BEGIN;")
        for _ in range(rng.randrange(5, 30)):
            lines.append(
                f"INSERT INTO orders VALUES ({next_id}, {rng.randrange(500)}, "
                f"'{rng.choice(WORDS)}-{rng.randrange(1000)}', {rng.randrange(1, 20)}, "
                f"{rng.uniform(1, 500):.2f});")
            next_id += 1
        if rng.random() < 0.3:
            lines.append(f"UPDATE orders SET qty = qty + 1 WHERE customer = {rng.randrange(500)};")
        if rng.random() < 0.1:
            lines.append(f"DELETE FROM orders WHERE id % 97 = {rng.randrange(97)};")
        lines.append("COMMIT;")
        if t % 25 == 24:
            lines.append("SELECT customer, SUM(qty * price) FROM orders GROUP BY customer "
                         "ORDER BY 2 DESC LIMIT 3;")
    lines.append("SELECT COUNT(*), SUM(qty) FROM orders;")
    out.write_text("\n".join(lines) + "\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("kind", choices=["text", "corpus", "tree", "build", "sql"])
    parser.add_argument("out", type=Path)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--mb", type=int, default=16)
    parser.add_argument("--files", type=int, default=2000)
    parser.add_argument("--units", type=int, default=16)
    parser.add_argument("--txns", type=int, default=400)
    args = parser.parse_args()
    if args.kind == "text":
        text(args.out, args.mb, args.seed)
    elif args.kind == "corpus":
        corpus(args.out, args.files, args.seed)
    elif args.kind == "tree":
        tree(args.out, args.files, args.seed)
    elif args.kind == "build":
        build(args.out, args.units, args.seed)
    else:
        sql(args.out, args.txns, args.seed)


if __name__ == "__main__":
    main()
