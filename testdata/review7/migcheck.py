#!/usr/bin/env python3
"""migcheck.py OLD.json NEW.json MIGRATION.yaml MAXUNAVAILABLE

OLD/NEW: `gp plan … -o json` of the plan in force and of the re-plan (`--current`); MIGRATION:
the `migration.yaml` that `gp plan … --current OLD --out DIR` wrote. Checks that
  * every replica slot a tenant leaves (in OLD, not in NEW) is the `from` of one of its move, stop or
    restart steps, and every slot it takes is the `to` of one of its move, start or restart steps;
  * no step names a slot change the plans do not show;
  * each wave has at most MAXUNAVAILABLE drains plus replica steps (a wave with a node-config step
    may restart more: the node's MPS control daemon restarts with its config, which is noted);
  * a replica step onto a GPU that a `gpu` step reconfigures comes in a later wave than that step.
Prints the moves counted and one line per problem.
"""
import json, re, sys
from collections import Counter

def slots(path):
    p = json.load(open(path)); s = {}
    for g in p["gpus"]:
        gid = f'{g["node"]}/{g["index"]}'
        for r in g.get("replicas") or []:
            tp = r.get("tensorParallel")
            if tp and tp["gpus"][0] != g["index"]:
                continue
            key = gid if not tp else f'{g["node"]}/' + ",".join(str(x) for x in tp["gpus"])
            s.setdefault(r["tenant"], Counter())[key] += 1
        for inst in g.get("instances") or []:
            for r in inst.get("replicas") or []:
                s.setdefault(r["tenant"], Counter())[f'{gid} {inst["profile"]}@{inst["start"]}'] += 1
    return s

old, new = slots(sys.argv[1]), slots(sys.argv[2])
steps, cur, section = [], None, None
for line in open(sys.argv[3]):
    if re.match(r"^\w+:", line):  # a top-level key: only the steps are read (devicePlugin is not)
        section, cur = line.split(":")[0], None
        continue
    if section != "steps":
        continue
    m = re.match(r"^- (\w+): (.*)$", line) or re.match(r"^  (\w+): (.*)$", line)
    if line.startswith("- "):
        cur = {}; steps.append(cur)
    if m and cur is not None:
        cur[m.group(1)] = m.group(2).strip().strip('"')
maxu = int(sys.argv[4])
problems = 0
def bad(msg):
    global problems; problems += 1; print("PROBLEM", msg)
def norm(x):  # "n1/2 3g.40gb@0" or "n1/2" or "n1/2,3" (tp), maybe with a slice word
    return " ".join(x.split()[:2]) if x and x != "none" else None
froms, tos = Counter(), Counter()
kinds = Counter()
for st in steps:
    k = st.get("kind"); kinds[k] += 1
    if k in ("move", "stop", "restart") and norm(st.get("from")):
        froms[(st["tenant"], norm(st["from"]))] += 1
    if k in ("move", "start", "restart") and norm(st.get("to")):
        tos[(st["tenant"], norm(st["to"]))] += 1
want_from, want_to = Counter(), Counter()
for t in set(old) | set(new):
    o, n = old.get(t, Counter()), new.get(t, Counter())
    for s, c in (o - n).items(): want_from[(t, s)] += c
    for s, c in (n - o).items(): want_to[(t, s)] += c
for key, c in want_from.items():
    if froms[key] < c: bad(f"{key[0]} leaves {key[1]} ({c}) but the migration lists {froms[key]} step(s) from it")
for key, c in want_to.items():
    if tos[key] < c: bad(f"{key[0]} takes {key[1]} ({c}) but the migration lists {tos[key]} step(s) to it")
for key, c in froms.items():
    if want_from[key] < c and tos[key] < c: bad(f"step from {key} not a slot change of the plans")
waves = Counter(); gpuwave = {}; nodewave = set()
for st in steps:
    w = int(st["wave"])
    if st["kind"] == "node-config":  # a node's device-plugin config: makes nothing unavailable
        nodewave.add(w)
    elif st["kind"] == "gpu":
        gpuwave[st["gpu"]] = w
        if st.get("drain") == "true": waves[w] += 1
    else:
        waves[w] += 1
for w, c in sorted(waves.items()):
    if c > maxu and w in nodewave:
        print(f"NOTE wave {w}: {c} replica steps, more than maxUnavailable {maxu}, with a node-config step (a node-wide MPS daemon restart)")
    elif c > maxu: bad(f"wave {w}: {c} drains + replica steps, more than maxUnavailable {maxu}")
for st in steps:
    if st["kind"] in ("move", "start", "restart"):
        g = st["gpu"]
        if g in gpuwave and gpuwave[g] >= int(st["wave"]):
            bad(f"{st['kind']} of {st['tenant']} onto {g} in wave {st['wave']}, its GPU reconfigured in wave {gpuwave[g]}")
print("steps:", dict(kinds), "waves:", max(waves) if waves else 0)
print("migration agrees" if problems == 0 else f"{problems} problem(s)")
