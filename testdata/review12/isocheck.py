#!/usr/bin/env python3
"""Check a plan's isolation tiers against its pool.

usage: isocheck.py POOL PLAN.json. A hard tenant shares no GPU slice (whole GPU or MIG instance)
with another tenant; a soft tenant shares one only through MPS and only with tenants of its own
path; time-slicing only between shared tenants. Prints one line per violation and a count.
"""
import json, sys

import yaml

pool = yaml.safe_load(open(sys.argv[1]))
plan = json.load(open(sys.argv[2]))
iso = {t["name"]: (t.get("isolation", "soft"), t.get("path", "")) for t in pool["tenants"]}
bad = 0
slices = 0
for g in plan["gpus"]:
    gid = f'{g["node"]}/{g["index"]}'
    groups = []
    if g.get("replicas"):
        groups.append((gid, g["mode"], g["replicas"]))
    for inst in g.get("instances") or []:
        groups.append((f'{gid} {inst["profile"]}@{inst["start"]}', (inst.get("sharing") or {}).get("mode", "none"), inst.get("replicas") or []))
    for where, mode, reps in groups:
        slices += 1
        names = sorted({r["tenant"] for r in reps})
        if len(names) < 2:
            continue
        for n in names:
            tier, path = iso[n]
            others = [o for o in names if o != n]
            if tier == "hard":
                print(f"{where}: hard tenant {n} shares with {others}"); bad += 1
            elif tier == "soft" and (mode != "mps" or any(iso[o][1] != path for o in others)):
                print(f"{where}: soft tenant {n} ({path}) shares by {mode} with {others}"); bad += 1
            elif mode == "timeslice" and tier != "shared":
                print(f"{where}: {tier} tenant {n} time-sliced"); bad += 1
print(f"{slices} slices, {bad} violation(s)")
sys.exit(1 if bad else 0)
