"""One tenant process for sharing experiments: waits for a common start time, then runs decode
steps for --seconds, then prefills for --seconds, and prints the median step times as JSON."""
import argparse
import json
import os
import statistics
import time
import torch
from model import Model
from timing import graphed, loop_until

p = argparse.ArgumentParser()
p.add_argument("--model", default="llama-7b")
p.add_argument("--batch", type=int, default=32)
p.add_argument("--ctx", type=int, default=512)
p.add_argument("--prefill-batch", type=int, default=1)
p.add_argument("--prefill-seq", type=int, default=512)
p.add_argument("--start", type=float, required=True)
p.add_argument("--seconds", type=float, default=6)
p.add_argument("--label", default="")
p.add_argument("--out", required=True)
a = p.parse_args()

with torch.inference_mode():
    m = Model(a.model)
    cache = m.kv_cache(a.batch, a.ctx)
    x = torch.randn(a.batch, 1, m.H, device="cuda", dtype=torch.bfloat16) * 0.02
    dec, g = graphed(lambda: m.decode_step(x, cache))
    m.prefill(a.prefill_batch, a.prefill_seq); torch.cuda.synchronize()
    ready = time.time()
    while time.time() < a.start:
        time.sleep(0.01)
    t0 = a.start
    d = loop_until(dec, t0 + a.seconds, t0 + 1.0)
    t1 = time.time()
    pf = loop_until(lambda: m.prefill(a.prefill_batch, a.prefill_seq), t1 + a.seconds, t1 + 1.0)
res = dict(kind="worker", label=a.label, pid=os.getpid(), model=a.model, batch=a.batch, ctx=a.ctx,
           prefill_batch=a.prefill_batch, prefill_seq=a.prefill_seq, graph=g, late=max(0, ready - a.start),
           mps_pct=os.environ.get("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE", ""),
           decode_ms=statistics.median(d) if d else None, decode_n=len(d),
           prefill_ms=statistics.median(pf) if pf else None, prefill_n=len(pf))
with open(a.out, "a") as f:
    f.write(json.dumps(res) + "\n")
print(json.dumps(res), flush=True)
