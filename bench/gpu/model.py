"""A decoder-only transformer with random bf16 weights, shaped like a real checkpoint.

Used only to time engine steps (prefill and decode) on a real GPU, so that gpupool's performance
model can be checked against measurements. No weights are loaded; nothing is downloaded.
"""
import torch
import torch.nn.functional as F

SHAPES = {
    # name: layers, hidden, heads, kv_heads, head_dim, intermediate, vocab
    "llama-7b": (32, 4096, 32, 32, 128, 11008, 32000),
    "llama-3.1-8b": (32, 4096, 32, 8, 128, 14336, 128256),
    "qwen2.5-7b": (28, 3584, 28, 4, 128, 18944, 152064),
}


class Model:
    def __init__(self, name, device="cuda", dtype=torch.bfloat16):
        L, H, nh, nkv, hd, I, V = SHAPES[name]
        self.name, self.L, self.H, self.nh, self.nkv, self.hd, self.I, self.V = name, L, H, nh, nkv, hd, I, V
        g = torch.Generator(device=device).manual_seed(1)
        def w(*s):
            return (torch.randn(*s, device=device, dtype=dtype, generator=g) * 0.02)
        self.layers = []
        for _ in range(L):
            self.layers.append(dict(
                qkv=w(H, (nh + 2 * nkv) * hd), o=w(nh * hd, H),
                gu=w(H, 2 * I), down=w(I, H)))
        self.lm_head = w(H, V)
        self.device, self.dtype = device, dtype

    def params(self):
        n = sum(t.numel() for l in self.layers for t in l.values()) + self.lm_head.numel()
        return n

    def kv_cache(self, batch, ctx):
        # one K and one V buffer per layer: [batch, kv_heads, ctx, head_dim]
        return [(torch.zeros(batch, self.nkv, ctx, self.hd, device=self.device, dtype=self.dtype),
                 torch.zeros(batch, self.nkv, ctx, self.hd, device=self.device, dtype=self.dtype))
                for _ in range(self.L)]

    def _layer(self, x, l, k_cache, v_cache, causal):
        B, T, H = x.shape
        qkv = x @ l["qkv"]
        q, k, v = qkv.split([self.nh * self.hd, self.nkv * self.hd, self.nkv * self.hd], dim=-1)
        q = q.view(B, T, self.nh, self.hd).transpose(1, 2)
        if causal:  # prefill: attend over the new tokens
            k = k.view(B, T, self.nkv, self.hd).transpose(1, 2)
            v = v.view(B, T, self.nkv, self.hd).transpose(1, 2)
        else:       # decode: attend over the cache (the new token's K/V write is a negligible copy)
            k, v = k_cache, v_cache
        a = F.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=(self.nkv != self.nh))
        x = x + a.transpose(1, 2).reshape(B, T, self.nh * self.hd) @ l["o"]
        gu = x @ l["gu"]
        gate, up = gu.chunk(2, dim=-1)
        return x + (F.silu(gate) * up) @ l["down"]

    def prefill(self, batch, seq):
        x = torch.randn(batch, seq, self.H, device=self.device, dtype=self.dtype) * 0.02
        for l in self.layers:
            x = self._layer(x, l, None, None, True)
        return x[:, -1, :] @ self.lm_head

    def decode_step(self, x, cache):
        for l, (kc, vc) in zip(self.layers, cache):
            x = self._layer(x, l, kc, vc, False)
        return x[:, -1, :] @ self.lm_head
