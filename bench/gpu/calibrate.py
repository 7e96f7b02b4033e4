"""Single-process calibration on one GPU: HBM bandwidth, BF16 GEMM throughput, and prefill/decode
step times of llama-3.1-8b- and llama-7b-shaped models. Prints JSON lines."""
import json
import sys
import torch
from model import Model
from timing import time_cuda, graphed

out = open(sys.argv[1], "a") if len(sys.argv) > 1 else sys.stdout


def emit(**kv):
    print(json.dumps(kv), file=out, flush=True)


props = torch.cuda.get_device_properties(0)
emit(kind="device", name=props.name, sms=props.multi_processor_count, mem=props.total_memory,
     l2=getattr(props, "L2_cache_size", 0), torch=torch.__version__)

# HBM bandwidth: device-to-device copy of 4 GiB reads 4 and writes 4 GiB.
n = 4 << 30
a = torch.empty(n, dtype=torch.uint8, device="cuda"); b = torch.empty_like(a)
ms = time_cuda(lambda: b.copy_(a))
emit(kind="bandwidth", bytes=2 * n, ms=ms, gbs=2 * n / ms / 1e6)
del a, b

for m, k, nn in [(8192, 8192, 8192), (4096, 4096, 14336), (1, 4096, 14336), (32, 4096, 14336), (128, 4096, 14336), (512, 4096, 14336)]:
    x = torch.randn(m, k, device="cuda", dtype=torch.bfloat16); w = torch.randn(k, nn, device="cuda", dtype=torch.bfloat16)
    ms = time_cuda(lambda: x @ w, reps=20)
    emit(kind="gemm", m=m, k=k, n=nn, ms=ms, tflops=2 * m * k * nn / ms / 1e9, gbs=2 * (k * nn + m * k + m * nn) / ms / 1e6)
    del x, w

for name in ["llama-3.1-8b", "llama-7b"]:
    model = Model(name)
    emit(kind="model", name=name, params=model.params())
    with torch.inference_mode():
        for batch, seq in [(1, 128), (1, 512), (1, 2048), (1, 8192), (8, 512)]:
            ms = time_cuda(lambda: model.prefill(batch, seq), warmup=2, reps=5)
            emit(kind="prefill", model=name, batch=batch, seq=seq, ms=ms)
        for batch, ctx in [(1, 512), (8, 512), (32, 512), (128, 512), (1, 2048), (32, 2048), (128, 2048)]:
            cache = model.kv_cache(batch, ctx)
            x = torch.randn(batch, 1, model.H, device="cuda", dtype=torch.bfloat16) * 0.02
            fn, g = graphed(lambda: model.decode_step(x, cache))
            ms = time_cuda(fn, warmup=3, reps=20)
            emit(kind="decode", model=name, batch=batch, ctx=ctx, ms=ms, graph=g)
            del cache, fn
            torch.cuda.empty_cache()
    del model
    torch.cuda.empty_cache()
