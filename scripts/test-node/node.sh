# shellcheck shell=bash
# A real node for the test cluster: containerd + runc + CNI bridge, a kubelet, kube-proxy
# (iptables) and optionally CoreDNS, all inside a network namespace this file creates, plus
# kube-scheduler. Sourced by scripts/test-cluster ('up --with-node'); uses its log/die/STATE/... .
#
# Isolation, and why:
# - Network: everything node-side runs in the network namespace NODE_NETNS, whose only interface
#   at start is its own lo (the node IP is put there). Nothing is added to the host's namespace.
#   The host reaches the node through files, not addresses: the API server's 'cluster' egress
#   (logs, exec, port-forward) goes through an HTTP CONNECT proxy on a unix socket that a relay
#   inside the namespace serves; the node reaches the API server through a relay that listens on
#   the namespace's 127.0.0.1:API_PORT and hands each connection, over a second unix socket, to a
#   relay in the host namespace that dials the host's 127.0.0.1:API_PORT. So the same kubeconfig
#   URL works on both sides, and the node has no route anywhere else (an image pull cannot leave).
# - Mounts: containerd and the kubelet run in a private mount namespace (a copy of the host's,
#   so /sys/fs/cgroup stays visible, unlike with 'ip netns exec'). Every mount they make (rootfs
#   overlays, volumes, the pods' network namespace files) lives and dies with it, and paths they
#   hard-code (/run/containerd/s for shim sockets, /var/lib/cni, /var/log/containers) are tmpfs
#   there. The kernel settings the kubelet insists on (vm.overcommit_memory=1, kernel.panic=10,
#   kernel.panic_on_oops=1, ...) are host-wide: inside that namespace, files holding the values
#   it expects are bind-mounted over them, and protectKernelDefaults makes it fail rather than
#   write, so a node never changes the host's kernel settings.
# - Cgroups (v1, cgroupfs driver): the kubelet's cgroup root is /outrigger-<id>, one per
#   cluster, so two nodes never share 'kubepods'; 'down' removes it.

NODE_NAME=outrigger-node
NODE_IP=10.200.0.2
POD_CIDR=10.244.0.0/24
CLUSTER_DNS=10.96.0.10
SERVICE_CIDR=10.96.0.0/16 # the API server's --service-cluster-ip-range
PAUSE_IMAGE=localhost/outrigger-test/pause:1
BUSYBOX_IMAGE=localhost/outrigger-test/busybox:1
IMAGES_DIR="$CACHE/images"
NODE_SRC="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# Paths the kubelet or containerd write to whatever their configuration says; each gets a tmpfs
# in the node's mount namespace (the directory is created on the host if it is missing).
NODE_PRIVATE_DIRS="/run/containerd /var/lib/cni /var/log/containers"

node_dir() { echo "$STATE/node"; }

load_node_env() {
  # shellcheck disable=SC1091
  [ -f "$STATE/node.env" ] && . "$STATE/node.env"
}

node_tools_missing() {
  local t out=""
  for t in containerd ctr runc nsenter unshare ip iptables iptables-restore gcc podman; do
    command -v "$t" >/dev/null || out="$out $t"
  done
  [ -x /usr/lib/cni/bridge ] && [ -x /usr/lib/cni/host-local ] && [ -x /usr/lib/cni/loopback ] ||
    out="$out containernetworking-plugins"
  echo "${out# }"
}

require_node() {
  [ "$(id -u)" = 0 ] || die "--with-node needs root (network, mount namespaces and cgroups)"
  local missing
  missing="$(node_tools_missing)"
  [ -z "$missing" ] || die "--with-node needs: $missing (apt-get install -y containerd runc containernetworking-plugins podman gcc busybox-static iptables)"
  # Static: the test image is FROM scratch, with no libc to load. (ldd fails on a static binary.)
  [ -x /bin/busybox ] && ! ldd /bin/busybox >/dev/null 2>&1 ||
    die "--with-node needs a static /bin/busybox (apt-get install -y busybox-static)"
  [ -d /sys/fs/cgroup/memory ] || die "--with-node expects cgroup v1 hierarchies under /sys/fs/cgroup (cgroupfs driver)"
  local c
  for c in kubelet kube-proxy kube-scheduler; do
    [ -x "$K8S_BIN/$c" ] || die "$c is not built for $GOVER: run 'scripts/test-cluster build node'"
  done
}

# --- images (built once with podman, imported into the node's containerd, never pulled) -------

# build_image NAME TAR CONTEXT: podman in a throw-away store, so the host's image store is untouched.
build_image() {
  local name="$1" tar="$2" ctx="$3" store
  # Short paths: podman refuses a run root longer than 50 characters.
  store="$(mktemp -d /tmp/ortimg.XXXXXX)"
  local p=(podman --root "$store/root" --runroot "$store/run" --tmpdir "$store/tmp")
  # No RUN steps: the image is files only, so the build needs no network and no container.
  "${p[@]}" build --network none -q -t "$name" "$ctx" >/dev/null || die "podman build $name failed"
  "${p[@]}" save --format oci-archive -o "$tar.tmp" "$name" >/dev/null 2>&1 || die "podman save $name failed"
  "${p[@]}" rmi -a -f >/dev/null 2>&1 || true
  rm -rf "$store"
  mv "$tar.tmp" "$tar"
}

ensure_node_images() {
  mkdir -p "$IMAGES_DIR"
  local ctx
  if [ ! -f "$IMAGES_DIR/pause-1.tar" ]; then
    log "building $PAUSE_IMAGE (static pause from scripts/test-node/pause.c)"
    ctx="$(mktemp -d)"
    gcc -static -Os -s -o "$ctx/pause" "$NODE_SRC/pause.c" || die "gcc -static pause.c failed (install libc6-dev)"
    printf 'FROM scratch\nCOPY pause /pause\nENTRYPOINT ["/pause"]\n' >"$ctx/Containerfile"
    build_image "$PAUSE_IMAGE" "$IMAGES_DIR/pause-1.tar" "$ctx"
    rm -rf "$ctx"
  fi
  if [ ! -f "$IMAGES_DIR/busybox-1.tar" ]; then
    log "building $BUSYBOX_IMAGE (Debian's static busybox)"
    ctx="$(mktemp -d)"
    mkdir -p "$ctx/rootfs/bin" "$ctx/rootfs/tmp" "$ctx/rootfs/etc"
    cp /bin/busybox "$ctx/rootfs/bin/busybox"
    local a
    for a in sh cat echo env hostname httpd ls mkdir nc nslookup sleep wget; do ln -s busybox "$ctx/rootfs/bin/$a"; done
    printf 'root:x:0:0:root:/:/bin/sh\nnobody:x:65534:65534:nobody:/:/bin/sh\n' >"$ctx/rootfs/etc/passwd"
    chmod 1777 "$ctx/rootfs/tmp"
    printf 'FROM scratch\nCOPY rootfs/ /\nENV PATH=/bin\nCMD ["/bin/sh"]\n' >"$ctx/Containerfile"
    build_image "$BUSYBOX_IMAGE" "$IMAGES_DIR/busybox-1.tar" "$ctx"
    rm -rf "$ctx"
  fi
}

node_ctr() { ctr --address "$(node_dir)/containerd.sock" -n k8s.io "$@"; }

# ctr_import ARCHIVE [NAME]: `ctr images import`, again when it lost its own index blob. With
# --index-name, ctr writes the archive's index.json as a new blob and then references it; seen here
# once in ~25 imports (containerd 1.6.20), that blob was gone in between ("content digest <the
# index.json's sha256>: not found"), as if collected before the image record held it. Another import
# writes it anew; any other failure is not retried.
ctr_import() {
  local i out
  for i in 1 2 3; do
    out="$(node_ctr images import ${2:+--index-name "$2"} "$1" 2>&1)" && return 0
    case "$out" in *"content digest"*"not found"*) log "ctr import of $1 lost its index blob; importing again ($i)" ;; *) break ;; esac
  done
  printf '%s\n' "$out" >&2
  return 1
}

import_image() {
  ctr_import "$1" "$2" >/dev/null || die "ctr images import $1 failed"
}

# --- PKI ---------------------------------------------------------------------------------------

# make_cert NAME SUBJECT USAGE [SAN]: a key and certificate signed by the cluster's CA.
make_cert() {
  local d="$STATE/pki" name="$1" subj="$2" usage="$3" san="${4:-}"
  [ -f "$d/$name.crt" ] && return
  (
    cd "$d"
    # P-256: as good for these identities as RSA, and generated in milliseconds instead of seconds.
    openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -subj "$subj" \
      -keyout "$name.key" -out "$name.csr" 2>/dev/null
    { printf 'extendedKeyUsage=%s\n' "$usage"; [ -z "$san" ] || printf 'subjectAltName=%s\n' "$san"; } >"$name.ext"
    openssl x509 -req -in "$name.csr" -CA ca.crt -CAkey ca.key -CAcreateserial -days 3650 \
      -extfile "$name.ext" -out "$name.crt" 2>/dev/null
    chmod 600 "$name.key"
    rm -f "$name.csr" "$name.ext"
  ) || die "making certificate $name failed"
}

make_node_pki() {
  make_cert kubelet-client "/O=system:nodes/CN=system:node:$NODE_NAME" clientAuth
  make_cert kubelet-serving "/CN=system:node:$NODE_NAME" serverAuth "IP:$NODE_IP,DNS:$NODE_NAME"
  # The API server's identity towards kubelets; RBAC grants it system:kubelet-api-admin below.
  make_cert apiserver-kubelet-client "/CN=outrigger-test:apiserver-kubelet-client" clientAuth
  make_cert kube-scheduler "/CN=system:kube-scheduler" clientAuth
  make_cert kube-proxy "/CN=system:kube-proxy" clientAuth
  make_cert coredns "/CN=outrigger-test:coredns" clientAuth
}

# write_cert_kubeconfig NAME: $STATE/NAME.kubeconfig with the client certificate pki/NAME.crt.
write_cert_kubeconfig() {
  local p="$STATE/pki" name="$1"
  (
    umask 077
    cat >"$STATE/$name.kubeconfig" <<KCFG
apiVersion: v1
kind: Config
clusters:
- name: outrigger-test
  cluster:
    server: https://127.0.0.1:$API_PORT
    certificate-authority: $p/ca.crt
users:
- name: $name
  user:
    client-certificate: $p/$name.crt
    client-key: $p/$name.key
contexts:
- name: outrigger-test
  context: {cluster: outrigger-test, user: $name}
current-context: outrigger-test
KCFG
  )
}

# Flags the API server gets when the cluster has a node (apiserver-start repeats them).
node_apiserver_flags() {
  local p="$STATE/pki"
  printf '%s\n' \
    "--kubelet-client-certificate=$p/apiserver-kubelet-client.crt" \
    "--kubelet-client-key=$p/apiserver-kubelet-client.key" \
    "--kubelet-certificate-authority=$p/ca.crt" \
    "--kubelet-preferred-address-types=InternalIP" \
    "--egress-selector-config-file=$STATE/egress-selector.yaml" \
    "--enable-admission-plugins=NodeRestriction" \
    "--audit-policy-file=$STATE/audit-policy.yaml" \
    "--audit-log-path=$STATE/audit.log"
}

prepare_node_apiserver() {
  make_node_pki
  cat >"$STATE/egress-selector.yaml" <<YAML
apiVersion: apiserver.k8s.io/v1beta1
kind: EgressSelectorConfiguration
egressSelections:
- name: cluster
  connection:
    proxyProtocol: HTTPConnect
    transport:
      uds:
        udsName: $(node_dir)/egress.sock
YAML
  # Who called, with which credential: service accounts' requests (kube-system's controllers
  # excepted) at Metadata level, whose user.extra names the token's JTI and the pod it is bound to.
  cat >"$STATE/audit-policy.yaml" <<YAML
apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
- level: None
  userGroups: ["system:serviceaccounts:kube-system"]
- level: Metadata
  userGroups: ["system:serviceaccounts"]
- level: None
YAML
}

# --- namespaces and cgroups --------------------------------------------------------------------

node_netns_path() { echo "/var/run/netns/$NODE_NETNS"; }
in_node_net() { nsenter --net="$(node_netns_path)" -- "$@"; }
in_node() { nsenter --mount="/proc/$(cat "$STATE/node-mntns.pid")/ns/mnt" --net="$(node_netns_path)" -- "$@"; }

create_node_netns() {
  ip netns add "$NODE_NETNS" || die "ip netns add $NODE_NETNS failed"
  ip -n "$NODE_NETNS" link set lo up
  ip -n "$NODE_NETNS" addr add "$NODE_IP/32" dev lo
  # The namespace has no default route, and a connect() to a ClusterIP fails on the route lookup
  # before kube-proxy's OUTPUT rule can rewrite it; any route will do, as the DNAT re-routes.
  ip -n "$NODE_NETNS" route add "$SERVICE_CIDR" dev lo
  in_node_net sysctl -qw net.ipv4.ip_forward=1
}

# The values the kubelet's setupKernelTunables expects (k8s.io/component-helpers/node/util/sysctl).
KUBELET_SYSCTLS="vm/overcommit_memory=1 vm/panic_on_oom=0 kernel/panic=10 kernel/panic_on_oops=1 kernel/keys/root_maxkeys=1000000 kernel/keys/root_maxbytes=25000000"

start_node_mntns() {
  local n d kv k v script="set -e"
  n="$(node_dir)"
  mkdir -p "$n/sysctl"
  for d in $NODE_PRIVATE_DIRS; do
    [ -d "$d" ] || mkdir -p -m 755 "$d"
    script="$script; mount -t tmpfs -o mode=755 outrigger-node $d"
  done
  for kv in $KUBELET_SYSCTLS; do
    k="${kv%%=*}"; v="${kv#*=}"
    echo "$v" >"$n/sysctl/${k//\//.}"
    script="$script; mount --bind $n/sysctl/${k//\//.} /proc/sys/$k"
  done
  script="$script; touch $n/mntns.ready; exec sleep infinity"
  setsid nohup unshare --mount --propagation private -- sh -c "$script" >>"$n/mntns.log" 2>&1 </dev/null &
  echo $! >"$STATE/node-mntns.pid"
  local i
  for ((i = 0; i < 40; i++)); do [ -f "$n/mntns.ready" ] && return 0; sleep 0.25; done
  cat "$n/mntns.log" >&2
  die "the node's mount namespace did not come up"
}

make_node_cgroups() {
  local h
  for h in /sys/fs/cgroup/*/; do
    [ -f "$h/cgroup.procs" ] || continue
    mkdir -p "$h$NODE_CGROUP"
    # cpuset children start empty and refuse tasks until given the parent's CPUs and memory nodes.
    if [ -f "$h/cpuset.cpus" ]; then
      cat "$h/cpuset.cpus" >"$h$NODE_CGROUP/cpuset.cpus"
      cat "$h/cpuset.mems" >"$h$NODE_CGROUP/cpuset.mems"
    fi
  done
}

remove_node_cgroups() {
  [ -n "${NODE_CGROUP:-}" ] || return 0
  local h pid
  for h in /sys/fs/cgroup/*/; do
    [ -d "$h$NODE_CGROUP" ] || continue
    # Anything still in a pod cgroup was started by this node; it goes before the directory can.
    for pid in $(find "$h$NODE_CGROUP" -name cgroup.procs -exec cat {} + 2>/dev/null); do kill -KILL "$pid" 2>/dev/null || true; done
    find "$h$NODE_CGROUP" -depth -type d -exec rmdir {} + 2>/dev/null || true
    [ ! -d "$h$NODE_CGROUP" ] || sleep 0.5
    find "$h$NODE_CGROUP" -depth -type d -exec rmdir {} + 2>/dev/null || true
    [ ! -d "$h$NODE_CGROUP" ] || log "warning: could not remove cgroup $h$NODE_CGROUP"
  done
}

# --- daemons -----------------------------------------------------------------------------------

# start_node_daemon NAME WHERE ARGV...: WHERE is host, net (network namespace) or node (network +
# mount namespace). nsenter execs the program, so the recorded pid is the daemon's own.
start_node_daemon() {
  local name="$1" where="$2"; shift 2
  local pre=()
  case "$where" in
    net) pre=(nsenter --net="$(node_netns_path)" --) ;;
    node) pre=(nsenter --mount="/proc/$(cat "$STATE/node-mntns.pid")/ns/mnt" --net="$(node_netns_path)" --) ;;
  esac
  cd "$STATE"
  # umask 022: the admin kubeconfig left this shell at 077, and containerd would unpack image
  # layers with 0700 directories that a container's non-root user cannot enter.
  (umask 022 && exec setsid nohup "${pre[@]}" "$@") >>"$(node_dir)/$name.log" 2>&1 </dev/null &
  echo $! >"$STATE/$name.pid"
}

wait_node_log() {
  local name="$1" pattern="$2" secs="$3" i
  for ((i = 0; i < secs * 4; i++)); do
    grep -q -- "$pattern" "$(node_dir)/$name.log" 2>/dev/null && return 0
    pid_alive "$STATE/$name.pid" || break
    sleep 0.25
  done
  log "$name did not start within ${secs}s; last lines of $(node_dir)/$name.log:"
  tail -n 30 "$(node_dir)/$name.log" >&2 || true
  die "$name failed to start"
}

start_relays() {
  local n relay
  n="$(node_dir)"
  relay="$NODE_SRC/relay.ts"
  start_node_daemon relay-host host node "$relay" --forward "unix:$n/api.sock=tcp:127.0.0.1:$API_PORT"
  # The API server is also at the node's address: the endpoint of the 'kubernetes' Service, which
  # pods (an injected sidecar, the in-cluster webhook) reach through kube-proxy. The egress proxy
  # dials the node, pods and ClusterIPs (a webhook behind a Service is called at its ClusterIP).
  start_node_daemon relay-node net node "$relay" --forward "tcp:127.0.0.1:$API_PORT=unix:$n/api.sock" \
    --forward "tcp:$NODE_IP:$API_PORT=unix:$n/api.sock" \
    --connect-proxy "unix:$n/egress.sock" --allow "$NODE_IP/32,$POD_CIDR,$SERVICE_CIDR"
  local i
  for ((i = 0; i < 40; i++)); do
    [ -S "$n/api.sock" ] && [ -S "$n/egress.sock" ] && in_node_net curl -fsS --max-time 2 --cacert "$STATE/pki/ca.crt" \
      -H "Authorization: Bearer $(cat "$STATE/pki/$ADMIN_TOKEN_FILE_NAME")" "https://127.0.0.1:$API_PORT/readyz" >/dev/null 2>&1 && return 0
    sleep 0.25
  done
  die "the API server is not reachable from the node's network namespace (see $n/relay-*.log)"
}

write_containerd_config() {
  local n
  n="$(node_dir)"
  mkdir -p "$n/cni/net.d" "$n/cni/ipam"
  cat >"$n/cni/net.d/10-outrigger.conflist" <<JSON
{
  "cniVersion": "1.0.0",
  "name": "outrigger-node",
  "plugins": [
    {
      "type": "bridge",
      "bridge": "cni0",
      "isGateway": true,
      "ipMasq": false,
      "hairpinMode": true,
      "ipam": {
        "type": "host-local",
        "ranges": [[{ "subnet": "$POD_CIDR" }]],
        "routes": [{ "dst": "0.0.0.0/0" }],
        "dataDir": "$n/cni/ipam"
      }
    }
  ]
}
JSON
  # restrict_oom_score_adj: this kernel refuses a negative oom_score_adj, and the CRI gives the
  # pause container -998 (runc then fails with "can't get final child's PID from pipe: EOF").
  cat >"$n/containerd.toml" <<TOML
version = 2
root = "$n/containerd/root"
state = "$n/containerd/state"
# The opt plugin would create /opt/containerd on the host.
disabled_plugins = ["io.containerd.internal.v1.opt", "io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.aufs", "io.containerd.tracing.processor.v1.otlp"]

[grpc]
  address = "$n/containerd.sock"

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "$PAUSE_IMAGE"
  restrict_oom_score_adj = true
  netns_mounts_under_state_dir = true
  stream_server_address = "127.0.0.1"
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
        Root = "$n/containerd/runc"
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "$n/cni/net.d"
TOML
}

start_containerd() {
  write_containerd_config
  start_node_daemon containerd node containerd --config "$(node_dir)/containerd.toml"
  local i
  for ((i = 0; i < 120; i++)); do
    node_ctr version >/dev/null 2>&1 && return 0
    pid_alive "$STATE/containerd.pid" || break
    sleep 0.25
  done
  tail -n 30 "$(node_dir)/containerd.log" >&2
  die "containerd failed to start"
}

write_kubelet_config() {
  local n p="$STATE/pki"
  n="$(node_dir)"
  mkdir -p "$n/kubelet" "$n/pod-logs" "$n/volume-plugins" "$n/kubelet-certs"
  cat >"$n/kubelet.yaml" <<YAML
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: $NODE_IP
port: 10250
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: 10248
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: $p/ca.crt}
authorization:
  mode: Webhook
tlsCertFile: $p/kubelet-serving.crt
tlsPrivateKeyFile: $p/kubelet-serving.key
containerRuntimeEndpoint: unix://$n/containerd.sock
cgroupDriver: cgroupfs
cgroupRoot: /$NODE_CGROUP
failCgroupV1: false
failSwapOn: false
protectKernelDefaults: true
oomScoreAdj: 0
clusterDNS: [$CLUSTER_DNS]
clusterDomain: cluster.local
resolvConf: ""
podCIDR: $POD_CIDR
podLogsDir: $n/pod-logs
volumePluginDir: $n/volume-plugins
enforceNodeAllocatable: []
evictionHard: {}
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
localStorageCapacityIsolation: false
registerNode: true
YAML
}

start_kubelet() {
  write_kubelet_config
  write_cert_kubeconfig kubelet-client
  local n
  n="$(node_dir)"
  start_node_daemon kubelet node "$K8S_BIN/kubelet" --config="$n/kubelet.yaml" \
    --kubeconfig="$STATE/kubelet-client.kubeconfig" --root-dir="$n/kubelet" --cert-dir="$n/kubelet-certs" \
    --hostname-override="$NODE_NAME" --node-ip="$NODE_IP" --v=1
}

start_kube_proxy() {
  write_cert_kubeconfig kube-proxy
  local n
  n="$(node_dir)"
  cat >"$n/kube-proxy.yaml" <<YAML
apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection:
  kubeconfig: $STATE/kube-proxy.kubeconfig
mode: iptables
hostnameOverride: $NODE_NAME
bindAddress: $NODE_IP
clusterCIDR: $POD_CIDR
healthzBindAddress: 127.0.0.1:10256
metricsBindAddress: 127.0.0.1:10249
nodePortAddresses: [primary]
oomScoreAdj: 0
# conntrack limits are host-wide: leave them alone.
conntrack:
  maxPerCore: 0
  min: 0
  tcpEstablishedTimeout: 0s
  tcpCloseWaitTimeout: 0s
iptables:
  minSyncPeriod: 0s
  syncPeriod: 30s
YAML
  start_node_daemon kube-proxy net "$K8S_BIN/kube-proxy" --config="$n/kube-proxy.yaml" --v=1
}

start_scheduler() {
  write_cert_kubeconfig kube-scheduler
  local kc="$STATE/kube-scheduler.kubeconfig"
  start_node_daemon kube-scheduler host "$K8S_BIN/kube-scheduler" --kubeconfig="$kc" \
    --authentication-kubeconfig="$kc" --authorization-kubeconfig="$kc" \
    --leader-elect=false --secure-port=0 --v=1
}

admin_kubectl() { "$K8S_BIN/kubectl" --kubeconfig "$STATE/admin.kubeconfig" "$@"; }

# The API server runs with no endpoint reconciler (several test clusters share the host's
# loopback), so the node gives the 'kubernetes' Service its endpoint: the relay on the node's
# address. The Service's port (443, named https) targets the API server's secure port.
apply_api_endpoints() {
  node_slice kubernetes-node default kubernetes '[{name: https, port: '"$API_PORT"', protocol: TCP}]' |
    admin_kubectl apply -f - >/dev/null || die "giving the kubernetes Service its endpoint failed"
}

# An EndpointSlice of SERVICE in NAMESPACE whose one endpoint is the node's address (a process on
# the node stands behind the Service), with PORTS as a YAML flow sequence.
node_slice() {
  local name="$1" namespace="$2" service="$3" ports="$4"
  cat <<YAML
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: $name
  namespace: $namespace
  labels: {kubernetes.io/service-name: $service, endpointslice.kubernetes.io/managed-by: outrigger-test}
addressType: IPv4
endpoints: [{addresses: ["$NODE_IP"], conditions: {ready: true}, nodeName: $NODE_NAME}]
ports: $ports
YAML
}

apply_node_rbac() {
  admin_kubectl apply -f - >/dev/null <<YAML || die "applying the node's RBAC failed"
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: "outrigger-test:apiserver-kubelet-client"}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: "system:kubelet-api-admin"}
subjects: [{apiGroup: rbac.authorization.k8s.io, kind: User, name: "outrigger-test:apiserver-kubelet-client"}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: "outrigger-test:coredns"}
rules:
- {apiGroups: [""], resources: [services, pods, namespaces], verbs: [list, watch]}
- {apiGroups: [discovery.k8s.io], resources: [endpointslices], verbs: [list, watch]}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: "outrigger-test:coredns"}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: "outrigger-test:coredns"}
subjects: [{apiGroup: rbac.authorization.k8s.io, kind: User, name: "outrigger-test:coredns"}]
YAML
}

wait_node_ready() {
  local i status=""
  # Ready, and the not-ready taint the node was registered with lifted by the node lifecycle
  # controller: until then the scheduler places no pod on it.
  for ((i = 0; i < 360; i++)); do
    status="$(admin_kubectl get node "$NODE_NAME" -o 'jsonpath={.status.conditions[?(@.type=="Ready")].status} {.spec.taints[*].key}' 2>/dev/null || true)"
    [ "$status" = "True " ] && return 0
    pid_alive "$STATE/kubelet.pid" || break
    sleep 0.25
  done
  log "node $NODE_NAME is not Ready (Ready=$status); last lines of $(node_dir)/kubelet.log:"
  tail -n 40 "$(node_dir)/kubelet.log" >&2 || true
  die "the kubelet failed to register a Ready node"
}

# CoreDNS runs as a process on the node (not a pod: the pod network has no route to the API
# server), answering on the node IP; kube-dns's ClusterIP reaches it through kube-proxy.
start_coredns() {
  write_cert_kubeconfig coredns
  local n
  n="$(node_dir)"
  cat >"$n/Corefile" <<COREFILE
.:53 {
    bind $NODE_IP
    errors
    kubernetes cluster.local in-addr.arpa ip6.arpa {
        kubeconfig $STATE/coredns.kubeconfig outrigger-test
        pods insecure
        fallthrough in-addr.arpa ip6.arpa
    }
    cache 5
}
COREFILE
  admin_kubectl apply -f - >/dev/null <<YAML || die "creating the kube-dns Service failed"
apiVersion: v1
kind: Service
metadata: {name: kube-dns, namespace: kube-system, labels: {k8s-app: kube-dns}}
spec:
  clusterIP: $CLUSTER_DNS
  ports:
  - {name: dns, port: 53, protocol: UDP, targetPort: 53}
  - {name: dns-tcp, port: 53, protocol: TCP, targetPort: 53}
---
$(node_slice kube-dns-node kube-system kube-dns '[{name: dns, port: 53, protocol: UDP}, {name: dns-tcp, port: 53, protocol: TCP}]')
YAML
  start_node_daemon coredns net "$COREDNS_BIN/coredns" -conf "$n/Corefile"
  wait_node_log coredns "CoreDNS-" 60
}

# Jaeger, when built, runs as a process on the node too, answering OTLP/HTTP on the node's address;
# the Service observability/jaeger (the name sidecars export to by default) points at it. Its
# query API (16686) answers on that address, inside the node's namespace only.
start_jaeger() {
  local n
  n="$(node_dir)"
  cat >"$n/jaeger.yaml" <<YAML
service:
  extensions: [jaeger_storage, jaeger_query]
  pipelines:
    traces: {receivers: [otlp], exporters: [jaeger_storage_exporter]}
  telemetry:
    metrics: {level: none}
extensions:
  jaeger_storage:
    backends: {mem: {memory: {max_traces: 100000}}}
  jaeger_query:
    storage: {traces: mem}
    http: {endpoint: "$NODE_IP:16686"}
    grpc: {endpoint: "$NODE_IP:16685"}
receivers:
  otlp:
    protocols:
      http: {endpoint: "$NODE_IP:4318"}
exporters:
  jaeger_storage_exporter: {trace_storage: mem}
YAML
  admin_kubectl apply -f - >/dev/null <<YAML || die "creating the jaeger Service failed"
apiVersion: v1
kind: Namespace
metadata: {name: observability}
---
apiVersion: v1
kind: Service
metadata: {name: jaeger, namespace: observability}
spec:
  ports:
  - {name: otlp-http, port: 4318, protocol: TCP, targetPort: 4318}
  - {name: query, port: 16686, protocol: TCP, targetPort: 16686}
---
$(node_slice jaeger-node observability jaeger '[{name: otlp-http, port: 4318, protocol: TCP}, {name: query, port: 16686, protocol: TCP}]')
YAML
  start_node_daemon jaeger net "$JAEGER_BIN/jaeger" --config "$n/jaeger.yaml"
  local i
  for ((i = 0; i < 120; i++)); do
    in_node_net curl -fsS --max-time 1 "http://$NODE_IP:16686/api/services" >/dev/null 2>&1 && return 0
    pid_alive "$STATE/jaeger.pid" || break
    sleep 0.25
  done
  tail -n 30 "$n/jaeger.log" >&2 || true
  die "jaeger failed to start on the node"
}

start_node() {
  local with_dns="$1" start=$SECONDS
  mkdir -p "$(node_dir)"
  log "node: images"
  ensure_node_images
  # Names derived from the state directory: one node per cluster, several clusters side by side.
  local id
  id="$(printf '%s' "$STATE" | sha256sum | cut -c1-8)"
  printf 'NODE_NETNS=ortnode-%s\nNODE_CGROUP=outrigger-%s\nNODE_NAME=%s\nNODE_IP=%s\nPOD_CIDR=%s\nCLUSTER_DNS=%s\nCOREDNS=%s\nJAEGER=%s\nBUSYBOX_IMAGE=%s\nPAUSE_IMAGE=%s\n' \
    "$id" "$id" "$NODE_NAME" "$NODE_IP" "$POD_CIDR" "$CLUSTER_DNS" "$with_dns" "$([ -x "$JAEGER_BIN/jaeger" ] && echo 1 || echo 0)" "$BUSYBOX_IMAGE" "$PAUSE_IMAGE" >"$STATE/node.env"
  load_node_env
  log "node: network namespace $NODE_NETNS (node IP $NODE_IP on its lo), mount namespace, cgroup /$NODE_CGROUP"
  [ -e "$(node_netns_path)" ] || create_node_netns
  pid_alive "$STATE/node-mntns.pid" || start_node_mntns
  make_node_cgroups
  start_relays
  apply_node_rbac
  apply_api_endpoints
  log "node: containerd $(containerd --version | awk '{print $3}')"
  start_containerd
  import_image "$IMAGES_DIR/pause-1.tar" "$PAUSE_IMAGE"
  import_image "$IMAGES_DIR/busybox-1.tar" "$BUSYBOX_IMAGE"
  log "node: kubelet, kube-proxy (iptables), kube-scheduler v$K8S_VERSION"
  start_kubelet
  start_kube_proxy
  start_scheduler
  wait_node_ready
  wait_node_log kube-proxy "Caches are synced" 60
  # The scheduler logs nothing when ready at this verbosity; pods wait for it like for any scheduler.
  pid_alive "$STATE/kube-scheduler.pid" || { tail -n 20 "$(node_dir)/kube-scheduler.log" >&2; die "kube-scheduler exited"; }
  if [ "$with_dns" = 1 ]; then
    log "node: coredns v$COREDNS_VERSION on $NODE_IP:53, Service kube-system/kube-dns $CLUSTER_DNS"
    start_coredns
  fi
  if [ -x "$JAEGER_BIN/jaeger" ]; then
    log "node: jaeger v$JAEGER_VERSION on $NODE_IP (OTLP/HTTP 4318, query 16686), Service observability/jaeger"
    start_jaeger
  fi
  log "node $NODE_NAME Ready in $((SECONDS - start)) s"
}

# --- teardown ----------------------------------------------------------------------------------

# Pids of every process in the node's network or mount namespace: the daemons and the shims,
# all started by this node. (Containers have namespaces of their own: remove_node_cgroups finds
# them through the node's cgroups.)
node_ns_pids() {
  {
    ip netns pids "$NODE_NETNS" 2>/dev/null || true
    if pid_alive "$STATE/node-mntns.pid"; then
      find -L /proc/[0-9]*/ns/mnt -maxdepth 0 -samefile "/proc/$(cat "$STATE/node-mntns.pid")/ns/mnt" 2>/dev/null | cut -d/ -f3
    fi
  } | sort -u
}

stop_node() {
  load_node_env || return 0
  local i start=$SECONDS
  log "node: stopping $NODE_NAME (pods, daemons, namespaces $NODE_NETNS, cgroup /$NODE_CGROUP)"
  # Pods first, through the kubelet, so each sandbox is stopped the CRI way (CNI DEL, netns removed).
  if pid_alive "$STATE/kubelet.pid" && pid_alive "$STATE/apiserver.pid"; then
    admin_kubectl delete pods -A --field-selector "spec.nodeName=$NODE_NAME" --grace-period=1 --wait=false >/dev/null 2>&1 || true
    for ((i = 0; i < 120; i++)); do
      [ -z "$(node_ctr tasks ls -q 2>/dev/null)" ] && break
      sleep 0.25
    done
  fi
  stop_pid jaeger
  stop_pid coredns
  stop_pid kube-scheduler
  stop_pid kube-proxy
  stop_pid kubelet
  if pid_alive "$STATE/containerd.pid"; then
    local t c
    for t in $(node_ctr tasks ls -q 2>/dev/null); do node_ctr tasks kill -s SIGKILL "$t" >/dev/null 2>&1 || true; done
    for t in $(node_ctr tasks ls -q 2>/dev/null); do node_ctr tasks delete -f "$t" >/dev/null 2>&1 || true; done
    for c in $(node_ctr containers ls -q 2>/dev/null); do node_ctr containers delete "$c" >/dev/null 2>&1 || true; done
  fi
  stop_pid containerd
  stop_pid relay-node
  stop_pid relay-host
  local pids
  pids="$(node_ns_pids | grep -vx "$(cat "$STATE/node-mntns.pid" 2>/dev/null || echo none)" || true)"
  [ -z "$pids" ] || { log "node: killing leftover processes $pids"; kill -KILL $pids 2>/dev/null || true; }
  remove_node_cgroups
  stop_pid node-mntns KILL
  [ ! -e "$(node_netns_path)" ] || ip netns del "$NODE_NETNS" || log "warning: ip netns del $NODE_NETNS failed"
  log "node: stopped in $((SECONDS - start)) s"
}
