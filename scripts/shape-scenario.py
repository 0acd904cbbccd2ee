#!/usr/bin/env python3
"""Writes a scenario of upstream's scheduling-benchmark shape (docs/performance.md): N pods as Deployments, in fifths -- plain,
zonal spread, hostname spread, zonal self-affinity, hostname anti-affinity -- with CPU in {100m..1.5} and memory in
{100Mi..4Gi}, one amd64 NodePool on the embedded AWS catalog, simulated for two minutes.

Usage: scripts/shape-scenario.py 20000 /tmp/shape-20000.yaml"""
import os, sys, random
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from scenario_objects import deployment
n=int(sys.argv[1]); out=sys.argv[2]
random.seed(42)
cpus=["100m","250m","500m","1","1500m"]; mems=["100Mi","256Mi","512Mi","1Gi","2Gi","4Gi"]
vals="abcdefghij"
lines=["name: shape-%d"%n,"seed: 1","until: 2m","catalog:","  source: aws","objects:",
"  - apiVersion: karpenter.sh/v1","    kind: NodePool","    metadata: {name: default}","    spec:",
"      template:","        spec:",
"          requirements:","            - {key: kubernetes.io/arch, operator: In, values: [amd64]}",
"          nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}"]
# groups: (kind, label value, cpu, mem) -> count
from collections import Counter
c=Counter()
fifth=n//5
for i in range(n):
    kind=min(i//fifth,4)
    v=random.choice(vals) if kind in (1,2,3) else ""
    c[(kind,v,random.choice(cpus),random.choice(mems))]+=1
for j,((kind,v,cpu,mem),k) in enumerate(sorted(c.items())):
    name="d%d-k%d%s-%s-%s"%(j,kind,v,cpu.lower(),mem.lower())
    labels={"app":name}
    extra=""
    if kind in (1,2):
        labels["my-label"]=v
        key="topology.kubernetes.io/zone" if kind==1 else "kubernetes.io/hostname"
        extra="          topologySpreadConstraints: [{maxSkew: 1, topologyKey: %s, whenUnsatisfiable: DoNotSchedule, labelSelector: {matchLabels: {my-label: %s}}}]\n"%(key,v)
    elif kind==3:
        labels["my-affinity"]=v
        extra="          affinity: {podAffinity: {requiredDuringSchedulingIgnoredDuringExecution: [{topologyKey: topology.kubernetes.io/zone, labelSelector: {matchLabels: {my-affinity: %s}}}]}}\n"%v
    elif kind==4:
        labels["role"]="nginx"
        extra="          affinity: {podAntiAffinity: {requiredDuringSchedulingIgnoredDuringExecution: [{topologyKey: kubernetes.io/hostname, labelSelector: {matchLabels: {role: nginx}}}]}}\n"
    lines.append(deployment(name, k, labels, cpu, mem, extra))
open(out,"w").write("\n".join(l for l in lines if l)+"\n")
