#!/usr/bin/env bash
# A three-node Docker Swarm on this machine, for the swarm runtime's tests (issue 21).
#
#   bash .ci/swarm-up.sh [up]      # start the rig (cleaning up a half-left one first); prints DOCKER_HOST lines
#   bash .ci/swarm-up.sh smoke     # prove it: a host-network service pinned to each worker answers /health
#   bash .ci/swarm-up.sh down      # remove everything up made (services, swarm, dockerds, netns, veths, bridge, folder)
#   bash .ci/swarm-up.sh status    # docker node ls on the manager
#   bash .ci/swarm-up.sh stop-node N / start-node N   # stop or restart node N's engine (its data kept)
#
# Each node is its own network namespace, hal0-swarm-N, holding one end of a veth pair
# (eth0, 10.77.0.N/24); the other end (hal0swN) is a port of the bridge hal0sw0 in the root
# namespace, which has 10.77.0.254/24 so tests running here reach every node's address.
# No default route in any node namespace: traffic stays between these test hosts.
# Node 1 is the manager; node 2 is labelled gpu=rocm, node 3 npu=xdna.
#
# Each node runs its own dockerd (and the containerd that dockerd starts under its exec
# root) as docker-up.sh does: no bridge, no iptables, its own data root, exec root, pid file
# and socket under $HAL0_SWARM_DIR/nN. dockerd is started with `nsenter --net=...`, not
# `ip netns exec`: the latter remounts /sys, which hides /sys/fs/cgroup from dockerd
# (cgroup v1, cgroupfs driver here). Each also gets its own UTS namespace, so `docker node ls`
# shows the hostnames hal0-node-1..3 rather than one shared hostname.
#
# Images are never pulled: $HAL0_SWARM_IMAGES are copied from the engine at
# $HAL0_SWARM_SOURCE_HOST (default: $DOCKER_HOST, else docker-up.sh's socket) with
# docker save | docker load. Every failure exits non-zero with the failing engine's log tail.

set -euo pipefail

HAL0_SWARM_DIR="${HAL0_SWARM_DIR:-${RUNNER_TEMP:-/tmp}/hal0-swarm}"
HAL0_SWARM_NODES="${HAL0_SWARM_NODES:-3}"
HAL0_SWARM_NET="${HAL0_SWARM_NET:-10.77.0}" # a /24: node N is .N, the root namespace's bridge .254
HAL0_SWARM_WAIT_S="${HAL0_SWARM_WAIT_S:-60}"
HAL0_SWARM_IMAGES="${HAL0_SWARM_IMAGES:-hal0-fake-runner:local hal0-runner:local}"
HAL0_SWARM_SOURCE_HOST="${HAL0_SWARM_SOURCE_HOST:-${DOCKER_HOST:-unix://${RUNNER_TEMP:-/tmp}/hal0-docker/docker.sock}}"
BRIDGE=hal0sw0

T0=$(date +%s%N)
say() { echo "swarm-up: $*"; }
die() { echo "swarm-up: $*" >&2; exit 1; }
# Milliseconds since this script started.
elapsed() { echo "$((($(date +%s%N) - T0) / 1000000)) ms"; }
step() { say "$* (at $(elapsed))"; }

netns() { echo "hal0-swarm-$1"; }
addr() { echo "$HAL0_SWARM_NET.$1"; }
ndir() { echo "$HAL0_SWARM_DIR/n$1"; }
sock() { echo "unix://$(ndir "$1")/docker.sock"; }
# dk N ARGS...: the docker CLI against node N's engine.
dk() { local n=$1; shift; DOCKER_HOST="$(sock "$n")" docker "$@"; }
answers() { timeout 10 env DOCKER_HOST="$(sock "$1")" docker version --format '{{.Server.Version}}' >/dev/null 2>&1; }
nodes() { seq 1 "$HAL0_SWARM_NODES"; }

log_tail() {
  echo "--- $(ndir "$1")/dockerd.log (last ${2:-25} lines) ---" >&2
  tail -n "${2:-25}" "$(ndir "$1")/dockerd.log" >&2 || true
}

# ---------------------------------------------------------------- down

# Stops every process in node N's namespace (dockerd, its containerd, shims, runners):
# the namespace is this rig's own, so everything in it is ours.
stop_node() {
  local n=$1 ns pid pids waited=0
  ns="$(netns "$n")"
  ip netns list | grep -qw "^$ns" || return 0
  pid="$(cat "$(ndir "$n")/dockerd.pid" 2>/dev/null || true)"
  if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
    kill -TERM "$pid" 2>/dev/null || true
    while kill -0 "$pid" 2>/dev/null && [ "$waited" -lt 20 ]; do sleep 0.5; waited=$((waited + 1)); done
  fi
  pids="$(ip netns pids "$ns" 2>/dev/null || true)"
  if [ -n "$pids" ]; then
    say "killing what is left in $ns: $(echo "$pids" | tr '\n' ' ')"
    # shellcheck disable=SC2086 # one pid per word
    kill -KILL $pids 2>/dev/null || true
    sleep 0.5
  fi
}

# Unmounts whatever a dockerd left mounted under the rig's folder (it shares this mount namespace).
unmount_dir() {
  local m
  [ -d "$HAL0_SWARM_DIR" ] || return 0
  awk -v d="$HAL0_SWARM_DIR/" 'index($5, d) == 1 { print $5 }' /proc/self/mountinfo | sort -r | while read -r m; do
    umount -l "$m" 2>/dev/null || true
  done
}

down() {
  local n ns
  step "down: removing the rig in $HAL0_SWARM_DIR"
  # Services first, so no task is left behind by a manager that stops last.
  if answers 1; then
    local svcs
    svcs="$(dk 1 service ls -q 2>/dev/null || true)"
    # shellcheck disable=SC2086
    [ -z "$svcs" ] || dk 1 service rm $svcs >/dev/null 2>&1 || true
  fi
  for n in $(nodes); do stop_node "$n" & done
  wait
  step "down: engines stopped"
  unmount_dir
  for n in $(nodes); do
    ns="$(netns "$n")"
    ip netns list | grep -qw "^$ns" && ip netns del "$ns"
    # Deleting the namespace takes the veth pair with it, in the kernel's own time: the end here may be
    # gone between the show and the del, which is what down wants anyway.
    if ip link show "hal0sw$n" >/dev/null 2>&1; then ip link del "hal0sw$n" 2>/dev/null || ! ip link show "hal0sw$n" >/dev/null 2>&1; fi
  done
  ip link show "$BRIDGE" >/dev/null 2>&1 && ip link del "$BRIDGE"
  rm -rf "$HAL0_SWARM_DIR"
  step "down: done"
}

# ---------------------------------------------------------------- up

net_up() {
  local n ns
  ip link add "$BRIDGE" type bridge
  ip addr add "$(addr 254)/24" dev "$BRIDGE"
  ip link set "$BRIDGE" up
  for n in $(nodes); do
    ns="$(netns "$n")"
    ip netns add "$ns"
    ip link add "hal0sw$n" type veth peer name eth0 netns "$ns"
    ip link set "hal0sw$n" master "$BRIDGE" up
    ip -n "$ns" link set lo up
    ip -n "$ns" addr add "$(addr "$n")/24" dev eth0
    ip -n "$ns" link set eth0 up
  done
}

start_dockerd() {
  local n=$1 d
  d="$(ndir "$n")"
  mkdir -p "$d"
  # setsid: the engines outlive this script (down stops them); nsenter and unshare exec, so $! is dockerd.
  setsid nsenter --net="/run/netns/$(netns "$n")" unshare --uts \
    sh -c 'hostname "$0" && exec "$@"' "hal0-node-$n" \
    dockerd --bridge=none --iptables=false --ip-masq=false \
    --data-root "$d/data" --exec-root "$d/exec" --pidfile "$d/dockerd.pid" \
    -H "$(sock "$n")" >"$d/dockerd.log" 2>&1 </dev/null &
  echo $! >"$d/launcher.pid"
}

wait_engine() {
  local n=$1 waited=0 pid
  pid="$(cat "$(ndir "$n")/launcher.pid")"
  until answers "$n"; do
    kill -0 "$pid" 2>/dev/null || { log_tail "$n"; die "node $n: dockerd exited while starting"; }
    [ "$waited" -lt $((HAL0_SWARM_WAIT_S * 2)) ] || { log_tail "$n"; die "node $n: dockerd did not answer within ${HAL0_SWARM_WAIT_S} s"; }
    sleep 0.5
    waited=$((waited + 1))
  done
}

swarm_form() {
  local n token out
  if ! out="$(dk 1 swarm init --advertise-addr "$(addr 1)" --listen-addr "$(addr 1):2377" 2>&1)"; then
    echo "$out" >&2; log_tail 1; die "node 1: docker swarm init failed"
  fi
  token="$(dk 1 swarm join-token -q worker)"
  for n in $(seq 2 "$HAL0_SWARM_NODES"); do
    if ! out="$(dk "$n" swarm join --token "$token" --advertise-addr "$(addr "$n")" --listen-addr "$(addr "$n"):2377" "$(addr 1):2377" 2>&1)"; then
      echo "$out" >&2; log_tail "$n"; log_tail 1 10; die "node $n: docker swarm join failed"
    fi
  done
}

# The node id engine N has in the swarm.
node_id() { dk "$1" info --format '{{.Swarm.NodeID}}'; }

label_nodes() {
  dk 1 node update --label-add gpu=rocm "$(node_id 2)" >/dev/null
  [ "$HAL0_SWARM_NODES" -lt 3 ] || dk 1 node update --label-add npu=xdna "$(node_id 3)" >/dev/null
}

load_images() {
  local n tar="$HAL0_SWARM_DIR/images.tar"
  # shellcheck disable=SC2086 # a list of image names
  DOCKER_HOST="$HAL0_SWARM_SOURCE_HOST" docker save -o "$tar" $HAL0_SWARM_IMAGES ||
    die "could not save $HAL0_SWARM_IMAGES from $HAL0_SWARM_SOURCE_HOST (run .ci/docker-up.sh first)"
  for n in $(nodes); do dk "$n" load -q -i "$tar" >/dev/null & done
  for n in $(nodes); do wait -n || die "docker load failed on a node"; done
  rm -f "$tar"
}

up() {
  local n
  for c in dockerd docker ip nsenter unshare setsid curl; do command -v "$c" >/dev/null || die "missing $c"; done
  [ "$(id -u)" = 0 ] || die "needs root (network namespaces, dockerd)"
  if [ -e "$HAL0_SWARM_DIR" ] || ip link show "$BRIDGE" >/dev/null 2>&1 || ip netns list | grep -q '^hal0-swarm-'; then
    say "a rig is left from before; removing it first"
    down
  fi
  mkdir -p "$HAL0_SWARM_DIR"
  net_up
  step "network: bridge $BRIDGE ($(addr 254)), namespaces $(netns 1)..$(netns "$HAL0_SWARM_NODES")"
  for n in $(nodes); do start_dockerd "$n"; done
  for n in $(nodes); do wait_engine "$n"; done
  step "engines: $(dk 1 version --format '{{.Server.Version}}') x $HAL0_SWARM_NODES answer"
  swarm_form
  step "swarm: formed (manager $(addr 1))"
  label_nodes
  step "labels: node 2 gpu=rocm, node 3 npu=xdna"
  load_images
  step "images: $HAL0_SWARM_IMAGES loaded on every node"
  dk 1 node ls --format 'table {{.ID}}\t{{.Hostname}}\t{{.Status}}\t{{.Availability}}\t{{.ManagerStatus}}\t{{.EngineVersion}}'
  for n in $(nodes); do echo "export DOCKER_HOST=$(sock "$n")   # node $n, $(addr "$n")"; done
  step "up: done"
}

# ---------------------------------------------------------------- smoke

# wait_running SERVICE: until its one task is running (or fails loudly).
wait_running() {
  local svc=$1 waited=0 state
  while :; do
    state="$(dk 1 service ps "$svc" --format '{{.CurrentState}}|{{.Error}}' 2>/dev/null | head -n1)"
    case "$state" in Running*) return 0 ;; esac
    [ "$waited" -lt $((HAL0_SWARM_WAIT_S * 2)) ] || {
      dk 1 service ps --no-trunc "$svc" >&2; die "$svc: task not running within ${HAL0_SWARM_WAIT_S} s (last: $state)"
    }
    sleep 0.5
    waited=$((waited + 1))
  done
}

smoke() {
  local spec name n constraint port
  answers 1 || die "no rig (run: bash .ci/swarm-up.sh up)"
  # name node constraint port
  for spec in "hal0-smoke-rocm 2 node.labels.gpu==rocm 18081" "hal0-smoke-xdna 3 node.labels.npu==xdna 18082"; do
    read -r name n constraint port <<<"$spec"
    dk 1 service create --detach --quiet --no-resolve-image --name "$name" --network host --init \
      --constraint "$constraint" --restart-condition none \
      hal0-fake-runner:local --host "$(addr "$n")" --port "$port" >/dev/null
  done
  for spec in "hal0-smoke-rocm 2 18081" "hal0-smoke-xdna 3 18082"; do
    read -r name n port <<<"$spec"
    wait_running "$name"
    step "$name: running on $(dk 1 service ps "$name" --format '{{.Node}}')"
    curl -fsS --max-time 5 "http://$(addr "$n"):$port/health" || die "$name: /health at $(addr "$n"):$port did not answer"
    echo
  done
  dk 1 service rm hal0-smoke-rocm hal0-smoke-xdna >/dev/null
  step "smoke: passed"
}

# Stops node N's engine (dockerd, then anything left in its namespace); its data and swarm state stay.
stop_engine() {
  local n=${1:?node number}
  stop_node "$n"
  step "node $n: engine stopped"
}

# Starts node N's engine again (it rejoins the swarm from its own state).
start_engine() {
  local n=${1:?node number}
  ip netns list | grep -qw "^$(netns "$n")" || die "no namespace $(netns "$n") (run: bash .ci/swarm-up.sh up)"
  answers "$n" && die "node $n: engine already answers"
  start_dockerd "$n"
  wait_engine "$n"
  step "node $n: engine answers"
}

case "${1:-up}" in
  up) up ;;
  down) down ;;
  smoke) smoke ;;
  status) dk 1 node ls ;;
  stop-node) stop_engine "${2:-}" ;;
  start-node) start_engine "${2:-}" ;;
  *) die "usage: $0 [up|smoke|down|status|stop-node N|start-node N]" ;;
esac
