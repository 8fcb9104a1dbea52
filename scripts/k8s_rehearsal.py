#!/usr/bin/env python3
"""A rehearsal of the Kubernetes manifests without Kubernetes.

Renders deploy/k8s (or an overlay) with kustomize, and starts every container the
rendered objects describe as a local process, with the exact args and environment Kubernetes
would give it:

- `$(VAR)` references expanded as the kubelet does, from `env` (values and the downward API:
  the StatefulSet pod index, the namespace) and `envFrom` (the rendered ConfigMap; the Secrets
  `typeahead-store-write` for the builder and `typeahead-store-read` for the servers and
  aggregators, which the operator provides, here both pointing at the local object store);
- the image's ENTRYPOINT (read from the Dockerfile) mapped to the locally built binary;
- each pod in a network namespace of its own (`ip netns`), with its own IPv4 and IPv6 addresses
  on a bridge, so every server listens on [::]:8080 as in its pod (and answers on both), and
  the headless Service's name resolves, through the pod's /etc/hosts
  (`/etc/netns/<ns>/hosts`), to the server pods' IPv4 addresses (for the second aggregator,
  to their IPv6 ones, as in an IPv6 cluster);
- its volumes bind-mounted at their mountPaths, the root file system read-only and /tmp
  unwritable (readOnlyRootFilesystem), running as the pod's runAsUser.

Then it checks that the fleet works: the builder CronJob's container publishes a generation to
the object store (SeaweedFS on the bridge), every server is ready, its probes answer, each
aggregator answers whole (not partial) with suggestions and reports every partition's replicas,
and a second hourly build reaches the aggregators.

Needs root (network namespaces, mounts), kustomize (`$KUSTOMIZE`) or kubectl, `weed`, PyYAML.
Usage:
    scripts/k8s_rehearsal.py BINARY [--overlay deploy/examples/four-partitions]
"""

import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request

import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BRIDGE, SUBNET, SUBNET6 = "tarh0", "10.231.0", "fd31:7e1a:231::"
HOST_IP, HOST_IP6 = f"{SUBNET}.1", f"{SUBNET6}1"
NAMESPACE_PREFIX = "tarh-"
SERVER_NAME = "typeahead-server"


def run(*cmd, check=True, **kw):
    return subprocess.run(cmd, check=check, **kw)


def render(directory):
    """The objects kustomize renders (`$KUSTOMIZE build`, else `kubectl kustomize`)."""
    tool = os.environ.get("KUSTOMIZE")
    cmd = [tool, "build", directory] if tool else ["kubectl", "kustomize", directory]
    out = run(*cmd, capture_output=True, text=True).stdout
    return [d for d in yaml.safe_load_all(out) if d]


def entrypoint():
    """The image's ENTRYPOINT, from the Dockerfile's last stage."""
    with open(os.path.join(ROOT, "Dockerfile")) as f:
        lines = [l for l in f if l.startswith("ENTRYPOINT")]
    return json.loads(lines[-1].split(None, 1)[1])


def expand(text, env):
    """The kubelet's $(VAR) expansion: defined names are replaced, $$ escapes, others stay."""
    def sub(m):
        if m.group(0) == "$$":
            return "$"
        return env.get(m.group(1), m.group(0))
    return re.sub(r"\$\$|\$\(([A-Za-z_][A-Za-z0-9_]*)\)", sub, text)


class Fleet:
    def __init__(self, binary, objects, scratch):
        self.binary = os.path.abspath(binary)
        # /tmp is hidden from the pods (their root file system is read-only).
        check(not self.binary.startswith("/tmp/"), "the binary must not live under /tmp")
        self.objects = objects
        self.scratch = scratch
        self.procs = []
        self.namespaces = []
        self.next_ip = 10
        self.ipv6 = {}  # a pod's IPv4 address -> its IPv6 one
        self.configmaps = {o["metadata"]["name"]: o.get("data", {})
                           for o in objects if o["kind"] == "ConfigMap"}
        self.namespace = next(o["metadata"]["name"] for o in objects if o["kind"] == "Namespace")
        self.server_service = None  # the headless Service the servers are found by

    def headless_service(self, sts):
        """The name of the one headless Service selecting `sts`'s pods, which the StatefulSet
        names too: what the aggregators' DNS names must be (a rename of one but not the others
        would leave every aggregator resolving nothing in a cluster)."""
        labels = sts["spec"]["template"]["metadata"]["labels"]
        services = [o["metadata"]["name"] for o in self.find("Service")
                    if o["spec"].get("clusterIP") == "None"
                    and o["spec"].get("selector")
                    and all(labels.get(k) == v for k, v in o["spec"]["selector"].items())]
        check(len(services) == 1, f"one headless Service selects the servers: {services}")
        check(sts["spec"].get("serviceName") == services[0],
              f"the StatefulSet's serviceName is {services[0]}")
        return services[0]

    def find(self, kind, name=None):
        return [o for o in self.objects
                if o["kind"] == kind and (name is None or o["metadata"]["name"] == name)]

    def check_identity(self, spec, secret, account=None):
        """The pod spec's containers read exactly the Secret `secret`, and its service account
        is one of the rendered ones, with no token; returns its name."""
        for container in spec["containers"]:
            names = [s["secretRef"]["name"] for s in container.get("envFrom", []) if "secretRef" in s]
            check(names == [secret], (container["name"], names, secret))
        name = spec["serviceAccountName"]
        check(account is None or name == account, (name, account))
        check(self.find("ServiceAccount", name), f"no ServiceAccount {name}")
        check(spec.get("automountServiceAccountToken") is False, name)
        return name

    # --- network -------------------------------------------------------------------------

    def network_up(self):
        clean_leftovers()
        # `all` and `default` (the bridge and the veths take theirs from it).
        for conf in ("all", "default"):
            ipv6 = f"/proc/sys/net/ipv6/conf/{conf}/disable_ipv6"
            check(os.path.exists(ipv6) and open(ipv6).read().strip() == "0",
                  f"IPv6 is enabled on this host ({ipv6}; every pod gets both families)")
        run("ip", "link", "add", BRIDGE, "type", "bridge")
        run("ip", "addr", "add", f"{HOST_IP}/24", "dev", BRIDGE)
        # nodad: usable at once, not after duplicate address detection's second or two.
        run("ip", "-6", "addr", "add", f"{HOST_IP6}/64", "dev", BRIDGE, "nodad")
        run("ip", "link", "set", BRIDGE, "up")

    def pod_namespace(self, pod):
        ns = NAMESPACE_PREFIX + pod
        ip, ip6 = f"{SUBNET}.{self.next_ip}", f"{SUBNET6}{self.next_ip}"
        self.ipv6[ip] = ip6
        self.next_ip += 1
        # Unique per run: a deleted namespace's veth pairs go away asynchronously.
        veth = f"tv{os.getpid() % 100000}-{self.next_ip}"
        run("ip", "netns", "add", ns)
        self.namespaces.append(ns)
        run("ip", "link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", ns)
        run("ip", "link", "set", veth, "master", BRIDGE, "up")
        for cmd in (["ip", "addr", "add", f"{ip}/24", "dev", "eth0"],
                    ["ip", "-6", "addr", "add", f"{ip6}/64", "dev", "eth0", "nodad"],
                    ["ip", "link", "set", "eth0", "up"], ["ip", "link", "set", "lo", "up"]):
            run("ip", "netns", "exec", ns, *cmd)
        os.makedirs(f"/etc/netns/{ns}", exist_ok=True)
        return ns, ip

    def write_hosts(self, ns, servers):
        # The name as the aggregator asks it, and as the search list completes it in a cluster.
        name = f"{self.server_service}.{self.namespace}.svc"
        lines = ["127.0.0.1 localhost"] + [f"{ip} {name}.cluster.local {name}" for ip in servers]
        with open(f"/etc/netns/{ns}/hosts", "w") as f:
            f.write("\n".join(lines) + "\n")

    # --- containers ----------------------------------------------------------------------

    def environment(self, container, pod_index, secrets):
        env = {"PATH": "/usr/local/bin:/usr/bin:/bin"}
        for source in container.get("envFrom", []):
            if "configMapRef" in source:
                env.update(self.configmaps[source["configMapRef"]["name"]])
            elif "secretRef" in source:
                ref = source["secretRef"]
                # Required: a missing Secret must stop the pod, not leave it on the node's
                # identity.
                check(ref["name"] in secrets and not ref.get("optional", False), source)
                env.update(secrets[ref["name"]])
        for var in container.get("env", []):
            if "value" in var:
                env[var["name"]] = expand(var["value"], env)
                continue
            field = var["valueFrom"]["fieldRef"]["fieldPath"]
            env[var["name"]] = {
                "metadata.labels['apps.kubernetes.io/pod-index']": str(pod_index),
                "metadata.namespace": self.namespace,
            }[field]
        return env

    def start(self, pod, spec, container, pod_index, secrets, wait=False, servers=None):
        """Starts one container of `spec` (a pod spec) in the network namespace `pod`; with
        `servers`, the pod resolves the headless Service's name to them."""
        ns, ip = self.pod_namespace(pod)
        if servers is not None:
            self.write_hosts(ns, servers)
        env = self.environment(container, pod_index, secrets)
        command = container.get("command") or entrypoint()
        command = [self.binary if c == entrypoint()[0] else c for c in command]
        args = [expand(a, env) for a in container.get("args", [])]
        volumes = {v["name"]: v for v in spec.get("volumes", [])}
        mounts = []
        for m in container.get("volumeMounts", []):
            source = os.path.join(self.scratch, pod, m["name"])
            os.makedirs(source, exist_ok=True)
            config = volumes[m["name"]].get("configMap")
            if config:
                for name, text in self.configmaps[config["name"]].items():
                    with open(os.path.join(source, name), "w") as f:
                        f.write(text)
            else:
                os.chmod(source, 0o777)
            os.makedirs(m["mountPath"], exist_ok=True)
            ro = ",ro" if m.get("readOnly") else ""
            mounts.append(f"mount --bind {source} {m['mountPath']} && "
                          f"mount -o remount,bind{ro} {m['mountPath']}")
        security = {**spec.get("securityContext", {}), **container.get("securityContext", {})}
        check(security.get("readOnlyRootFilesystem") and security.get("runAsNonRoot"), pod)
        # Make the mounts, then the root read-only and /tmp unwritable, then drop to the user.
        # (The bind sources were made while the root was still writable.)
        script = " && ".join(
            ["mount --make-rprivate /"] + mounts
            + ["mount -t tmpfs -o ro tmpfs /tmp", "mount -o remount,bind,ro /",
               'exec "$@"'])
        user = str(security["runAsUser"])
        cmd = ["ip", "netns", "exec", ns, "sh", "-c", script, "pod",
               "setpriv", f"--reuid={user}", f"--regid={security.get('runAsGroup', user)}",
               "--clear-groups", "--"] + command + args
        log = open(os.path.join(self.scratch, f"{pod}.log"), "w")
        clean_env = {k: v for k, v in env.items()}
        print(f"  {pod} ({ip}): {' '.join(args)}")
        proc = subprocess.Popen(cmd, env=clean_env, stdout=log, stderr=subprocess.STDOUT)
        if wait:
            return proc.wait(), ip
        self.procs.append((pod, proc))
        return proc, ip

    def stop(self):
        for _, proc in self.procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        deadline = time.time() + 15
        for name, proc in self.procs:
            try:
                proc.wait(timeout=max(0.1, deadline - time.time()))
            except subprocess.TimeoutExpired:
                print(f"  {name} did not stop on SIGTERM within 15 s; killed")
                proc.kill()
                proc.wait()
        for ns in self.namespaces:
            run("ip", "netns", "delete", ns, check=False)
            shutil.rmtree(f"/etc/netns/{ns}", ignore_errors=True)
        run("ip", "link", "delete", BRIDGE, check=False, stderr=subprocess.DEVNULL)


def clean_leftovers():
    """Removes the namespaces and the bridge a killed earlier run left behind, whose names this
    run would fail to add again. (One rehearsal runs on a machine at a time.)"""
    listed = run("ip", "netns", "list", capture_output=True, text=True, check=False).stdout
    for line in listed.splitlines():
        name = line.split()[0] if line.split() else ""
        if name.startswith(NAMESPACE_PREFIX):
            print(f"  removing {name}, left by an earlier run")
            run("ip", "netns", "delete", name, check=False)
            shutil.rmtree(f"/etc/netns/{name}", ignore_errors=True)
    run("ip", "link", "delete", BRIDGE, check=False, stderr=subprocess.DEVNULL)


def http(url, body=None, method=None, timeout=5):
    req = urllib.request.Request(url, data=body, method=method)
    with urllib.request.urlopen(req, timeout=timeout) as r:
        return r.status, r.read()


def check(ok, what):
    """An explicit check (an `assert` is gone under `python3 -O`)."""
    if not ok:
        sys.exit(f"rehearsal: check failed: {what}")


def wait_until(what, predicate, seconds):
    deadline = time.time() + seconds
    while True:
        try:
            value = predicate()
            if value:
                return value
        except Exception:  # noqa: BLE001 - not up yet
            pass
        if time.time() > deadline:
            sys.exit(f"rehearsal: {what} did not happen within {seconds} s")
        time.sleep(0.25)


def free_port(pair=False):
    """A free port on the bridge (and its gRPC twin, port + 10000, when `pair`), below the
    kernel's ephemeral range. A port from that range can be handed to any outgoing connection
    between this check and SeaweedFS's bind (its components dial each other while they
    start): once the master's gRPC twin was taken that way, and the rehearsal failed with
    "bind: address already in use"."""
    import random
    import socket
    with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
        ephemeral = int(f.read().split()[0])
    top = ephemeral - (10000 if pair else 0)
    while True:
        port = random.randrange(10000, top)
        ports = (port, port + 10000) if pair else (port,)
        # Each check's socket is closed at once: without a record, two picks (SeaweedFS's
        # four ports and their twins) could be the same port.
        if any(p in _PICKED for p in ports):
            continue
        try:
            for p in ports:
                with socket.socket() as s:
                    s.bind((HOST_IP, p))
            _PICKED.update(ports)
            return port
        except OSError:
            pass


_PICKED = set()


def start_weed(scratch):
    master, volume, filer, s3 = (free_port(pair=True) for _ in range(4))
    data = os.path.join(scratch, "weed")
    os.makedirs(data)
    log = open(os.path.join(scratch, "weed.log"), "w")
    proc = subprocess.Popen(
        ["weed", "server", f"-dir={data}", f"-ip={HOST_IP}", f"-ip.bind={HOST_IP}", "-filer",
         "-s3", f"-s3.port={s3}", f"-master.port={master}", f"-volume.port={volume}",
         f"-filer.port={filer}", f"-metricsPort={free_port()}",
         "-s3.port.iceberg=0", "-s3.port.lance=0"],
        stdout=log, stderr=subprocess.STDOUT)
    url = f"http://{HOST_IP}:{s3}"
    try:
        wait_until("SeaweedFS start", lambda: http(f"{url}/typeahead", b"", "PUT")[0] == 200, 60)
    except BaseException:
        # The caller has no handle on it yet to stop it.
        stop(proc)
        raise
    return proc, url


def stop(proc):
    proc.terminate()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def log_text(first_hour, hours, seed):
    """Hourly query log lines (timestamp TAB query): a few hundred queries, repeated; the same
    seed gives the same mix every hour (so the regression gate lets the next hour through)."""
    words = ["new", "york", "weather", "pizza", "hotel", "news", "music", "games", "map",
             "cars", "recipes", "movies", "travel", "jobs", "bank", "school"]
    lines = []
    for h in range(hours):
        for i in range(400):
            a = words[(i * 7 + seed) % len(words)]
            b = words[(i * 3 + h + seed) % len(words)]
            t = (first_hour + h) * 3600 + (i * 9) % 3600
            stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(t))
            lines.append(f"{stamp}\t{a} {b}" if i % 3 else f"{stamp}\t{a}")
    return "\n".join(lines) + "\n"


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("binary")
    parser.add_argument("--overlay", default=os.path.join(ROOT, "deploy/k8s"))
    opts = parser.parse_args()
    # `timeout` in CI stops a run with SIGTERM: exit through the clean-up, not around it.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit("stopped by SIGTERM"))

    objects = render(opts.overlay)
    scratch = tempfile.mkdtemp(prefix="k8s-rehearsal-")
    os.chmod(scratch, 0o755)
    fleet = Fleet(opts.binary, objects, scratch)
    weed = None
    passed = False
    try:
        fleet.network_up()
        weed, store = start_weed(scratch)
        # One key pair for both here (SeaweedFS without identities); in a cluster the read
        # Secret holds read-only keys.
        store_env = {"AWS_ENDPOINT_URL": store, "AWS_ALLOW_HTTP": "true",
                     "AWS_ACCESS_KEY_ID": "rehearsal", "AWS_SECRET_ACCESS_KEY": "rehearsal"}
        secrets = {"typeahead-store-write": store_env, "typeahead-store-read": store_env}
        config = next(iter(c for n, c in fleet.configmaps.items() if "PARTITIONS" in c))
        partitions = int(config["PARTITIONS"])
        logs = config["LOGS_URL"]
        check(logs.startswith("s3://typeahead/"), logs)
        logs_key = logs[len("s3://typeahead/"):]
        now_hour = int(time.time()) // 3600

        def upload_logs(name, first_hour, hours, seed):
            http(f"{store}/typeahead/{logs_key}{name}", log_text(first_hour, hours, seed).encode(),
                 "PUT")

        # The builder: the CronJob's container, run once as its Job would.
        cron = fleet.find("CronJob")[0]
        job_pod = cron["spec"]["jobTemplate"]["spec"]["template"]["spec"]
        check(cron["spec"]["concurrencyPolicy"] == "Forbid", "the CronJob's concurrencyPolicy is Forbid")
        builder_account = fleet.check_identity(job_pod, "typeahead-store-write")
        bucket_key = config["BUCKET_URL"][len("s3://typeahead/"):]

        def hourly_build(run, first_hour):
            """Uploads 6 hours of logs and runs the Job's container; returns the manifest."""
            upload_logs(f"hour-{run}.tsv", first_hour, 6, 1)
            container = job_pod["containers"][0]
            code, _ = fleet.start(f"builder-{run}", job_pod, container, 0, secrets, wait=True)
            if code != 0:
                sys.exit(f"rehearsal: the builder exited {code}; see {scratch}/builder-{run}.log")
            return json.loads(http(f"{store}/typeahead/{bucket_key}/manifest.json")[1])

        print("builder:")
        manifest = hourly_build(1, now_hour - 30)
        check(len(manifest["partitions"]) == partitions, manifest)

        # The servers: the StatefulSet's pods, 0..replicas-1.
        sts = fleet.find("StatefulSet", SERVER_NAME)[0]
        fleet.server_service = fleet.headless_service(sts)
        pod = sts["spec"]["template"]["spec"]
        replicas = sts["spec"]["replicas"]
        serving_account = fleet.check_identity(pod, "typeahead-store-read")
        check(serving_account != builder_account, serving_account)
        print(f"servers ({replicas} pods, {partitions} partitions):")
        servers = []
        for i in range(replicas):
            _, ip = fleet.start(f"server-{i}", pod, pod["containers"][0], i, secrets)
            servers.append(ip)
        container = pod["containers"][0]
        port = container["ports"][0]["containerPort"]
        for i, ip in enumerate(servers):
            ready = wait_until(f"server-{i} ready", lambda ip=ip: json.loads(
                http(f"http://{ip}:{port}{container['readinessProbe']['httpGet']['path']}")[1]), 120)
            want = manifest["partitions"][i % partitions]["checksum"]
            check(ready["version"] == want, (i, ready, want))
            live = container["livenessProbe"]["httpGet"]["path"]
            check(http(f"http://{ip}:{port}{live}")[0] == 200, f"{ip}:{port}{live} answers 200")
            # An IPv6 cluster reaches the same listener.
            ip6 = fleet.ipv6[ip]
            check(http(f"http://[{ip6}]:{port}{live}")[0] == 200, f"[{ip6}]:{port} answers 200")

        # The aggregators: the Deployment's pods, finding the servers by the Service's name.
        deploy = fleet.find("Deployment", "typeahead-aggregator")[0]
        apod = deploy["spec"]["template"]["spec"]
        acontainer = apod["containers"][0]
        aport = acontainer["ports"][0]["containerPort"]
        fleet.check_identity(apod, "typeahead-store-read", serving_account)
        # No spec.replicas (the autoscaler owns it): as many pods as it keeps at least.
        hpa = fleet.find("HorizontalPodAutoscaler", "typeahead-aggregator")
        count = deploy["spec"].get("replicas") or hpa[0]["spec"]["minReplicas"]
        print(f"aggregators ({count} pods):")
        aggregators = []
        for i in range(count):
            # The second finds the servers by their IPv6 addresses, as in an IPv6 cluster.
            found = servers if i % 2 == 0 else [fleet.ipv6[s] for s in servers]
            _, ip = fleet.start(f"aggregator-{i}", apod, acontainer, i, secrets, servers=found)
            aggregators.append(ip)
        per_partition = replicas // partitions
        probe = lambda kind: acontainer[kind]["httpGet"]["path"]  # noqa: E731
        ready, live = probe("readinessProbe"), probe("livenessProbe")
        every = [per_partition] * partitions
        for ip in aggregators:
            wait_until(f"aggregator {ip} sees every replica", lambda ip=ip: json.loads(
                http(f"http://{ip}:{aport}{ready}")[1])["healthy_replicas"] == every, 60)
            check(http(f"http://{ip}:{aport}{live}")[0] == 200, f"{ip}:{aport}{live} answers 200")
            status, body = http(f"http://{ip}:{aport}/v1/suggest?q=n")
            answer = json.loads(body)
            check(status == 200 and not answer["partial"] and answer["suggestions"], answer)
            over6 = json.loads(http(f"http://[{fleet.ipv6[ip]}]:{aport}/v1/suggest?q=n")[1])
            check(over6["suggestions"] == answer["suggestions"], ("over IPv6", over6))
            check(answer["version"] == manifest["generation"], answer)
            print(f"  {ip}: {[s['text'] for s in answer['suggestions'][:3]]}..., version {answer['version']}")

        # The next hour: a new generation reaches every aggregator.
        print("builder, an hour later:")
        second = hourly_build(2, now_hour - 24)
        check(second["generation"] != manifest["generation"], "the second build is a new generation")
        started = time.time()
        for ip in aggregators:
            wait_until(f"aggregator {ip} on the new generation", lambda ip=ip: json.loads(
                http(f"http://{ip}:{aport}/v1/suggest?q=n")[1])["version"] == second["generation"], 90)
        print(f"new generation {second['generation']} live on every aggregator after "
              f"{time.time() - started:.1f} s")
        for name, proc in fleet.procs:
            if proc.poll() is not None:
                sys.exit(f"rehearsal: {name} exited {proc.returncode}; see {scratch}/{name}.log")
        print(f"rehearsal passed: {opts.overlay}")
        passed = True
    finally:
        started = time.time()
        fleet.stop()
        if weed:
            stop(weed)
        print(f"stopped in {time.time() - started:.1f} s")
        # Kept for its logs when the rehearsal failed.
        if passed:
            shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
