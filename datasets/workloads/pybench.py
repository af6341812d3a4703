"""Interpreter benchmark: pure-Python loops and containers, one worker process per benchmark.

Like pyperformance/pyperf, the driver runs every benchmark in a fresh interpreter and collects
timings over a pipe; the workers do pure-Python work (loops, arithmetic, lists, dicts, sets,
strings, sorting, recursion, generators, small classes). Inputs are seeded, so the work is
the same on every run.

Usage: python3 pybench.py [--scale N] [--seed S]          driver
       python3 pybench.py --bench NAME --scale N --seed S  one worker (the driver's child)
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
import time


def bench_loops(rng: random.Random, scale: int) -> int:
    total = 0
    for i in range(150_000 * scale):
        total += (i * 7) % 13
    return total


def bench_lists(rng: random.Random, scale: int) -> int:
    data = [rng.randrange(1_000_000) for _ in range(60_000 * scale)]
    squares = [x * x for x in data if x % 3]
    data.sort()
    chunks = [data[i:i + 100] for i in range(0, len(data), 100)]
    return len(squares) + sum(len(c) for c in chunks)


def bench_dicts(rng: random.Random, scale: int) -> int:
    table: dict[str, int] = {}
    for i in range(50_000 * scale):
        key = f"k{rng.randrange(20_000)}"
        table[key] = table.get(key, 0) + i
    inverted = {v: k for k, v in table.items()}
    return len(table) + len(inverted)


def bench_sets(rng: random.Random, scale: int) -> int:
    a = {rng.randrange(100_000) for _ in range(40_000 * scale)}
    b = {rng.randrange(100_000) for _ in range(40_000 * scale)}
    return len(a & b) + len(a | b) + len(a - b)


def bench_strings(rng: random.Random, scale: int) -> int:
    words = ["".join(rng.choice("abcdefghij") for _ in range(rng.randrange(3, 9)))
             for _ in range(8_000 * scale)]
    text = " ".join(words)
    counts: dict[str, int] = {}
    for word in text.split():
        counts[word.upper()] = counts.get(word.upper(), 0) + 1
    return len(text.replace("a", "xy")) + len(counts)


def bench_recursion(rng: random.Random, scale: int) -> int:
    def fib(n: int) -> int:
        return n if n < 2 else fib(n - 1) + fib(n - 2)

    return sum(fib(20) for _ in range(3 * scale))


def bench_generators(rng: random.Random, scale: int) -> int:
    def numbers(n):
        for i in range(n):
            if i % 5:
                yield i * 3

    return sum(x for x in numbers(150_000 * scale) if x & 1)


def bench_objects(rng: random.Random, scale: int) -> float:
    class Body:
        __slots__ = ("x", "y", "vx", "vy")

        def __init__(self, x, y):
            self.x, self.y, self.vx, self.vy = x, y, 0.0, 0.0

    bodies = [Body(rng.random(), rng.random()) for _ in range(40)]
    for _ in range(60 * scale):
        for a in bodies:
            for b in bodies:
                if a is not b:
                    dx, dy = b.x - a.x, b.y - a.y
                    d = (dx * dx + dy * dy + 0.01) ** 1.5
                    a.vx += dx / d * 1e-5
                    a.vy += dy / d * 1e-5
        for a in bodies:
            a.x += a.vx
            a.y += a.vy
    return sum(b.x for b in bodies)


BENCHMARKS = {name[len("bench_"):]: fn for name, fn in globals().items() if name.startswith("bench_")}


def worker(name: str, scale: int, seed: int, repeats: int = 3) -> None:
    timings = []
    result = None
    for r in range(repeats):
        rng = random.Random(seed * 1000 + r)
        start = time.perf_counter()
        result = BENCHMARKS[name](rng, scale)
        timings.append(time.perf_counter() - start)
    json.dump({"bench": name, "timings": timings, "result": str(result)[:32]}, sys.stdout)


def driver(scale: int, seed: int, rounds: int) -> None:
    for round_no in range(rounds):
        for name in BENCHMARKS:
            done = subprocess.run(
                [sys.executable, "-S", __file__, "--bench", name, "--scale", str(scale),
                 "--seed", str(seed + round_no)], capture_output=True, text=True, check=True)
            report = json.loads(done.stdout)
            best = min(report["timings"])
            print(f"round {round_no} {name:<11} best {best * 1e3:8.2f} ms", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--bench")
    parser.add_argument("--scale", type=int, default=1)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    if args.bench:
        worker(args.bench, args.scale, args.seed)
    else:
        driver(args.scale, args.seed, args.rounds)


if __name__ == "__main__":
    main()
