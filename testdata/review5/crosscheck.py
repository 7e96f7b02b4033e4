#!/usr/bin/env python3
"""Cross-checks the artifacts of one `gpupool plan --out DIR` directory against its plan.yaml.

    python3 testdata/review5/crosscheck.py DIR

Prints one line per inconsistency and exits 1 when there is any. Checks:
  * device plugin: per node and shared resource, the config's replicas equal the references each
    device needs (time-slicing: sum of max(1, timeSliceReplicas); MPS: the replicas);
  * Deployments: the pod's resource is <resource>.shared exactly when the node's config shares it,
    its count is the tensor-parallel size, and --tensor-parallel-size agrees; pods per node and
    resource fit what the plugin advertises;
  * MPS: clients' pinned limits sum to at most the device's memory; vLLM's
    --gpu-memory-utilization x device memory stays inside the replica's memory limit;
  * mig-parted: the node's selected config gives each GPU the plan's MIG mode and profile counts.
"""
import collections, glob, os, re, sys, yaml

d = sys.argv[1]
bad = []
plan = yaml.safe_load(open(os.path.join(d, "plan.yaml")))
labels = yaml.safe_load(open(os.path.join(d, "node-labels.yaml")))
mig = yaml.safe_load(open(os.path.join(d, "mig-parted/config.yaml")))
dra = (plan.get("policy") or {}).get("kubernetesDeviceAPI") == "dra" or os.path.exists(os.path.join(d, "dra"))

def mib(q):
    if q is None: return None
    m = re.fullmatch(r"(\d+)(Mi|Gi|M)?", str(q))
    n = int(m.group(1)); u = m.group(2)
    return n * 1024 if u == "Gi" else n

# plan devices
gpus = plan["gpus"]
devs = collections.defaultdict(list)  # (node, resource) -> list of (replicas, sharing)
for g in gpus:
    if g.get("role") == "canary": continue
    if g["mode"] == "mig":
        for inst in g.get("instances") or []:
            devs[(g["node"], "nvidia.com/mig-" + inst["profile"])].append((inst.get("replicas") or [], (inst.get("sharing") or {}).get("mode"), g, inst))
    else:
        devs[(g["node"], "nvidia.com/gpu")].append((g.get("replicas") or [], g["mode"] if g["mode"] in ("mps", "timeslice") else None, g, None))

# device plugin
dp = {}
for f in glob.glob(os.path.join(d, "device-plugin/*.yaml")):
    if f.endswith("configmap.yaml"): continue
    dp[os.path.basename(f)[:-5]] = yaml.safe_load(open(f))
shared = {}  # (node, resource) -> (strategy, replicas)
for node, c in dp.items():
    for strat in ("timeSlicing", "mps"):
        s = ((c.get("sharing") or {}).get(strat)) or {}
        for r in s.get("resources") or []:
            shared[(node, r["name"])] = (strat, r["replicas"])
        if strat == "mps" and s and c["flags"]["migStrategy"] != "none":
            bad.append(f"device-plugin {node}: mps with migStrategy {c['flags']['migStrategy']}")
for (node, res), lst in devs.items():
    if (node, res) not in shared: continue
    strat, n = shared[(node, res)]
    for reps, mode, g, inst in lst:
        if not reps: continue
        if strat == "timeSlicing":
            need = sum(max(1, (r.get("limits") or {}).get("timeSliceReplicas", 0)) for r in reps)
        else:
            need = len(reps)
        if need != n and not dra:
            bad.append(f"device-plugin {node} {res}: replicas {n}, device {g['index']}{'/'+inst['profile']+'@'+str(inst['start']) if inst else ''} needs {need}")

# deployments
pods = collections.Counter()
for f in sorted(glob.glob(os.path.join(d, "k8s/*.yaml"))):
    for dep in yaml.safe_load_all(open(f)):
        if not dep or dep.get("kind") != "Deployment": continue
        spec = dep["spec"]["template"]["spec"]
        nodes = spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"][0]["matchExpressions"][0]["values"]
        c = spec["containers"][0]
        lim = (c.get("resources") or {}).get("limits") or {}
        args = c.get("args") or []
        tp = 1
        if "--tensor-parallel-size" in args: tp = int(args[args.index("--tensor-parallel-size") + 1])
        slots = dep["metadata"]["annotations"].get("gpupool.dev/replicas", "")
        if dra:
            continue
        gres = [(k, int(v)) for k, v in lim.items() if k.startswith("nvidia.com/")]
        if len(gres) != 1:
            bad.append(f"{f} {dep['metadata']['name']}: GPU limits {gres}"); continue
        rname, cnt = gres[0]
        if cnt != tp:
            bad.append(f"{f} {dep['metadata']['name']}: requests {cnt} of {rname} but --tensor-parallel-size {tp}")
        base = rname[:-7] if rname.endswith(".shared") else rname
        for node in nodes:
            want_shared = (node, base) in shared
            if want_shared != rname.endswith(".shared"):
                bad.append(f"{f} {dep['metadata']['name']}: requests {rname} on {node} where the plugin {'shares' if want_shared else 'does not share'} {base}")
        # per node pods from the slots annotation "0@node/1 ..., 1@node/2"
        for s in slots.split(", "):
            m = re.match(r"\d+@([^/]+)/", s)
            if m: pods[(m.group(1), rname)] += cnt
# capacity per node/resource
for (node, rname), n in pods.items():
    base = rname[:-7] if rname.endswith(".shared") else rname
    ndev = len(devs.get((node, base), []))
    cap = ndev * (shared[(node, base)][1] if (node, base) in shared else 1)
    if n > cap:
        bad.append(f"node {node}: {n} pods' references of {rname}, the plugin advertises {cap}")

# MPS files
for f in glob.glob(os.path.join(d, "mps/*.yaml")):
    m = yaml.safe_load(open(f))
    for dm in m["daemons"]:
        node = m["node"]
        g = next(x for x in gpus if x["node"] == node and x["index"] == dm["gpu"])
        total = None
        sumlim = sum(mib(c.get("pinnedMemoryLimit")) or 0 for c in dm["clients"])
        sumthr = sum(c.get("activeThreadPercentage") or 0 for c in dm["clients"])
        if sumthr > 100:
            bad.append(f"mps {node}/{dm['gpu']}: thread percentages sum to {sumthr}")
        dm["_sum"] = sumlim
        print(f"info mps {node}/{dm['gpu']} {dm.get('instance','')}: pinned sum {sumlim}M default {dm.get('defaultPinnedMemoryLimit')} threads {sumthr}")

# vllm util vs limits
for f in glob.glob(os.path.join(d, "vllm/*.yaml")):
    v = yaml.safe_load(open(f))
    for r in v["replicas"]:
        a = r["args"]
        tp = int(a[a.index("--tensor-parallel-size") + 1]) if "--tensor-parallel-size" in a else 1
        if tp != r.get("gpuCount", 1):
            bad.append(f"vllm {v['tenant']}#{r['index']}: --tensor-parallel-size {tp}, gpuCount {r.get('gpuCount', 1)}")
        lim = (r.get("env") or {}).get("CUDA_MPS_PINNED_DEVICE_MEM_LIMIT")
        if lim and "--gpu-memory-utilization" in a:
            print(f"info vllm {v['tenant']}#{r['index']} util {a[a.index('--gpu-memory-utilization')+1]} pinned {lim}")

# mig-parted per node
cfgs = mig["mig-configs"]
for node, lab in labels.items():
    entries = cfgs[lab["nvidia.com/mig.config"]]
    ng = [g for g in gpus if g["node"] == node]
    for g in ng:
        hits = [e for e in entries if e["devices"] == "all" or g["index"] in e["devices"]]
        if g.get("role") == "canary":
            continue
        if len(hits) != 1:
            bad.append(f"mig-parted {node}/{g['index']}: {len(hits)} entries select it"); continue
        e = hits[0]
        want = collections.Counter(i["profile"] for i in g.get("instances") or [])
        if e["mig-enabled"] != (g["mode"] == "mig") or (g["mode"] == "mig" and dict(want) != (e.get("mig-devices") or {})):
            bad.append(f"mig-parted {node}/{g['index']}: entry {e} for plan mode {g['mode']} {dict(want)}")

for b in bad: print("BAD", b)
sys.exit(1 if bad else 0)
