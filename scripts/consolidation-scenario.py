#!/usr/bin/env python3
"""Writes the consolidation-at-scale scenario (docs/performance.md): D Deployments of R replicas each on the embedded
AWS catalog (one NodePool, amd64 on-demand c/m/r of generation > 4), requests from 250m/512Mi to 2 cores/4Gi, every
fifth Deployment spread over zones; half of the Deployments scaled to a tenth at 15 minutes; simulated for 30 minutes.

Usage: scripts/consolidation-scenario.py 50 2000 /tmp/consolidation-100k.yaml   (100,000 pods)
       scripts/consolidation-scenario.py 10 2000 /tmp/consolidation-20k.yaml    (20,000 pods)"""
import os, sys
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from scenario_objects import deployment

deployments, replicas, out = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
sizes = [("250m", "512Mi"), ("500m", "1Gi"), ("1", "2Gi"), ("1500m", "3Gi"), ("2", "4Gi")]
lines = [
    "name: consolidation-%d" % (deployments * replicas),
    "seed: 1",
    "until: 30m",
    "catalog:",
    "  source: aws",
    "objects:",
    "  - apiVersion: karpenter.sh/v1",
    "    kind: NodePool",
    "    metadata: {name: default}",
    "    spec:",
    "      template:",
    "        spec:",
    "          requirements:",
    "            - {key: kubernetes.io/arch, operator: In, values: [amd64]}",
    "            - {key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}",
    "            - {key: karpenter.k8s.aws/instance-category, operator: In, values: [c, m, r]}",
    "            - {key: karpenter.k8s.aws/instance-generation, operator: Gt, values: ['4']}",
    "          nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}",
    "      disruption: {consolidationPolicy: WhenEmptyOrUnderutilized, consolidateAfter: 30s}",
]
for d in range(deployments):
    cpu, mem = sizes[d % len(sizes)]
    name = "app-%02d" % d
    spread = ""
    if d % 5 == 4:
        spread = ("          topologySpreadConstraints: [{maxSkew: 1, topologyKey: topology.kubernetes.io/zone, "
                  "whenUnsatisfiable: DoNotSchedule, labelSelector: {matchLabels: {app: %s}}}]" % name)
    lines.append(deployment(name, replicas, {"app": name}, cpu, mem, spread))
lines.append("events:")
for d in range(0, deployments, 2):
    lines.append("  - at: 15m")
    lines.append("    scale: {kind: Deployment, name: app-%02d, replicas: %d}" % (d, max(1, replicas // 10)))
open(out, "w").write("\n".join(lines) + "\n")
