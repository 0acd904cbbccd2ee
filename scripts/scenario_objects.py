"""What the scenario generators in scripts/ share: a Deployment as a scenario object."""


def deployment(name, replicas, labels, cpu, mem, extra=""):
    """A Deployment of `replicas` pods labelled `labels` (selected by `app: name`), each asking `cpu` and `mem`;
    `extra` is more of the pod spec, as YAML lines indented under `spec:`."""
    lab = ", ".join("%s: %s" % (a, b) for a, b in labels.items())
    return """  - apiVersion: apps/v1
    kind: Deployment
    metadata: {name: %s}
    spec:
      replicas: %d
      selector: {matchLabels: {app: %s}}
      template:
        metadata: {labels: {%s}}
        spec:
          containers: [{name: c, image: x, resources: {requests: {cpu: "%s", memory: %s}}}]%s""" % (
        name, replicas, name, lab, cpu, mem, ("\n" + extra.rstrip("\n")) if extra else "")
