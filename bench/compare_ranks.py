#!/usr/bin/env python3
"""Data parallel on one machine: 1 process × T threads against T processes × 1 thread, for qkgrad
(qkgrad-bench under mpirun) and PyTorch (DistributedDataParallel on gloo), in one session.

    python3 bench/compare_ranks.py [--ranks 2] [--rounds 3] [--qkgrad build/bench/qkgrad-bench]
                                   [--json FILE] [qkgrad-bench's step flags: --layers 3 --batch 32 ...]
    python3 bench/compare_ranks.py ddp-worker [step flags]     (one DDP rank; the driver starts them)

The step is bench/compare_torch.py's (and qkgrad-bench's): the same model, loss, clipping and
Adam; --batch is the global batch. With R ranks each process takes batch/R sentences and one
thread; the gradients are summed over the processes during backward:
  qkgrad        mpirun -np R qkgrad-bench --threads 1 (distributed/gradient_reducer.h: 4 MiB
                buckets, an order-fixed reduce-scatter + all-gather over Open MPI's shared memory);
                "comm" is the median time per step the sums added after backward;
  PyTorch       R processes of this script's ddp-worker, torch.nn.parallel.DistributedDataParallel
                with its defaults (25 MB buckets, allreduce overlapped with backward) over gloo on
                127.0.0.1; the loss is each rank's mean and DDP averages the gradients (the same
                update for equal shares).
The single-process contenders are qkgrad-bench --threads R and compare_torch.py's torch-step
--threads R in its tuned environment (the OpenMP OpenBLAS, glibc's mmap threshold raised). The
rounds alternate the four contenders, each a fresh set of processes, so that drift of the
machine hits them alike; each figure is the median over the rounds. Run with Debian's
/usr/bin/python3 (python3-torch) after `ninja -C build bench/qkgrad-bench`; nothing touches the
network beyond the loopback interface.
"""
import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import compare_torch as ct  # noqa: E402  (the step, its flags and the PyTorch model)

MPIRUN_ENV = {"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
              "OMPI_MCA_btl_vader_single_copy_mechanism": "none", "OMPI_MCA_rmaps_base_oversubscribe": "1"}


def ddp_worker(argv):
    """One rank of PyTorch's data-parallel step: RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT come
    from the driver. Rank 0 prints qkgrad-bench's JSON fields for the global batch."""
    o = ct.step_parser().parse_args(argv)
    torch = ct.import_torch()
    import torch.distributed as dist
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    dist.init_process_group("gloo", rank=rank, world_size=world)
    torch.set_num_threads(max(o.threads, 1))
    global_batch = o.batch
    o.batch = global_batch * (rank + 1) // world - global_batch * rank // world  # this rank's sentences
    bench = ct.TorchStep(torch, o)
    bench.model = torch.nn.parallel.DistributedDataParallel(bench.model)  # broadcasts rank 0's weights
    for _ in range(o.warmup_steps):
        bench.step()
    ms = []
    for _ in range(o.steps):
        t0 = time.perf_counter()
        bench.step()
        ms.append((time.perf_counter() - t0) * 1000.0)
    dist.barrier()
    dist.destroy_process_group()
    if rank == 0:
        median = sorted(ms)[len(ms) // 2]
        print(json.dumps({"framework": "torch-ddp", "ranks": world, "threads": torch.get_num_threads(),
                          "median_ms": round(median, 3), "min_ms": round(min(ms), 3), "max_ms": round(max(ms), 3),
                          "tgt_tokens_per_s": round(global_batch * o.tgt_len / (median / 1000.0), 1),
                          "peak_rss_mb": round(ct.peak_rss_mb(), 1), "torch_version": torch.__version__}))
    return 0


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_ddp(o, ranks, timeout):
    """The ddp-worker on `ranks` processes; rank 0's JSON."""
    env = ct.contender_env("torch-tuned")
    env.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(free_port()), WORLD_SIZE=str(ranks))
    flags = ct.step_flags(o)
    procs = []
    for rank in range(ranks):
        procs.append(subprocess.Popen([sys.executable, os.path.abspath(__file__), "ddp-worker"] + flags,
                                      env=dict(env, RANK=str(rank)), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    outputs = [p.communicate(timeout=timeout) for p in procs]
    if any(p.returncode != 0 for p in procs):
        raise RuntimeError("DDP worker failed: " + " | ".join(err.strip()[-800:] for _, err in outputs))
    lines = [line for line in outputs[0][0].splitlines() if line.startswith("{")]
    return json.loads(lines[-1])


def contenders(o, ranks, qkgrad):
    one = argparse.Namespace(**vars(o))
    one.threads = ranks
    each = argparse.Namespace(**vars(o))
    each.threads = 1
    mpirun = ["mpirun", "--mca", "btl", "self,vader", "-np", str(ranks)]
    return [
        (f"qkgrad 1 x {ranks} threads", lambda: ct.run_json([qkgrad, "--json"] + ct.step_flags(one), dict(os.environ), 900)[0]),
        (f"qkgrad {ranks} ranks x 1", lambda: ct.run_json(mpirun + [qkgrad, "--json"] + ct.step_flags(each),
                                                          dict(os.environ, **MPIRUN_ENV), 900)[0]),
        (f"PyTorch 1 x {ranks} threads", lambda: ct.run_json(ct.contender_command("torch", one, qkgrad),
                                                            ct.contender_env("torch-tuned"), 900)[0]),
        (f"PyTorch DDP {ranks} ranks x 1", lambda: run_ddp(each, ranks, 900)),
    ]


def main(argv):
    if argv and argv[0] == "ddp-worker":
        return ddp_worker(argv[1:])
    driver = argparse.ArgumentParser(prog="compare_ranks.py", add_help=True)
    driver.add_argument("--ranks", type=int, default=2)
    driver.add_argument("--rounds", type=int, default=3)
    driver.add_argument("--qkgrad", default="build/bench/qkgrad-bench")
    driver.add_argument("--json", default=None, help="also write every raw result here")
    args, rest = driver.parse_known_args(argv)
    o = ct.step_parser().parse_args(rest)
    qkgrad = ct.find_program(args.qkgrad, "qkgrad-bench")
    runs = {}
    for round_index in range(args.rounds):
        for name, run in contenders(o, args.ranks, qkgrad):
            result = run()
            runs.setdefault(name, []).append(result)
            print(f"round {round_index + 1}: {name}: {result['median_ms']:.1f} ms/step"
                  + (f", comm {result['comm_ms']:.1f} ms" if result.get("ranks", 1) > 1 and "comm_ms" in result else ""),
                  file=sys.stderr)
    print(f"{o.layers}+{o.layers} layers, d {o.d_model}, {o.heads} heads, ffn {o.ffn}, vocab {o.vocab}, global batch "
          f"{o.batch} x {o.src_len}/{o.tgt_len} tokens, {o.attn}, dropout {o.dropout:g}; {o.steps} steps after "
          f"{o.warmup_steps} warm-up, median of {args.rounds} rounds; {ct.machine_line()}\n")
    print("| contender | ms per step | target tokens/s | waiting for the sums, ms per step | peak RSS per process, MB |")
    print("|---|---:|---:|---:|---:|")
    for name, results in runs.items():
        ms = statistics.median(r["median_ms"] for r in results)
        comm = statistics.median(r["comm_ms"] for r in results) if "comm_ms" in results[0] and results[0].get("ranks", 1) > 1 else None
        print(f"| {name} | {ms:.1f} | {o.batch * o.tgt_len / (ms / 1000):.0f} | {'' if comm is None else f'{comm:.1f}'} | "
              f"{statistics.median(r['peak_rss_mb'] for r in results):.0f} |")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(runs, f, indent=1)
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1:]))
    except ct.BenchError as error:
        print(f"compare_ranks.py: error: {error}", file=sys.stderr)
        sys.exit(2)
