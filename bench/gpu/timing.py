import statistics
import time
import torch


def time_cuda(fn, warmup=3, reps=10):
    """Median milliseconds of fn() on the current stream."""
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    ts = []
    for _ in range(reps):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record(); fn(); e.record(); e.synchronize()
        ts.append(s.elapsed_time(e))
    return statistics.median(ts)


def graphed(fn):
    """Capture fn in a CUDA graph (as vLLM does for decode); returns (replay, graphed?)."""
    try:
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            for _ in range(2):
                fn()
        torch.cuda.current_stream().wait_stream(s)
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            fn()
        return g.replay, True
    except Exception as ex:  # fall back to eager
        print("graph capture failed:", ex, flush=True)
        torch.cuda.synchronize()
        return fn, False


def loop_until(fn, t_end, skip_until):
    """Run fn repeatedly until wall time t_end; return per-call ms measured after skip_until."""
    ts = []
    while time.time() < t_end:
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        t0 = time.time()
        s.record(); fn(); e.record(); e.synchronize()
        if t0 >= skip_until:
            ts.append(s.elapsed_time(e))
    return ts
