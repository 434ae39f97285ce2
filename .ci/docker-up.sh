#!/usr/bin/env bash
# A Docker engine for the tests, and the runner image they run (hal0-runner:local).
#
#   . .ci/docker-up.sh && hal0_docker_up     # .ci/run: DOCKER_HOST is exported to the caller
#   bash .ci/docker-up.sh                    # by hand: prints the DOCKER_HOST line to export
#
# An engine that already answers (at $DOCKER_HOST, else the default socket) is
# used as it is. Otherwise docker.io is installed if missing (apt) and a private
# dockerd is started: no bridge, no iptables, its own data root, exec root and
# socket under $HAL0_DOCKER_DIR (default ${RUNNER_TEMP:-/tmp}/hal0-docker).
# No image is ever pulled: the runner image is built locally (scripts/runner-image.sh).
# Any failure returns non-zero, loudly: in CI a missing engine fails the run.

HAL0_DOCKER_DIR="${HAL0_DOCKER_DIR:-${RUNNER_TEMP:-/tmp}/hal0-docker}"
HAL0_DOCKER_WAIT_S="${HAL0_DOCKER_WAIT_S:-60}"
# The pid of the dockerd this script started (empty when it reused an engine); hal0_docker_down stops only that one.
HAL0_DOCKERD_PID=""

hal0_docker_answers() {
  timeout 10 docker version --format '{{.Server.Version}}' >/dev/null 2>&1
}

hal0_docker_install() {
  command -v dockerd >/dev/null && command -v docker >/dev/null && return 0
  echo "docker-up: installing docker.io (apt)"
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq docker.io >/dev/null
}

hal0_dockerd_start() {
  local dir="$HAL0_DOCKER_DIR"
  mkdir -p "$dir"
  # A pid file left by a dockerd that died would stop a new one from starting.
  if [ -f "$dir/dockerd.pid" ] && ! kill -0 "$(cat "$dir/dockerd.pid")" 2>/dev/null; then rm -f "$dir/dockerd.pid"; fi
  echo "docker-up: starting dockerd (data and sockets in $dir, log $dir/dockerd.log)"
  dockerd --bridge=none --iptables=false --ip-masq=false \
    --data-root "$dir/data" --exec-root "$dir/exec" --pidfile "$dir/dockerd.pid" \
    -H "unix://$dir/docker.sock" >"$dir/dockerd.log" 2>&1 &
  HAL0_DOCKERD_PID=$!
  local waited=0
  until hal0_docker_answers; do
    if ! kill -0 "$HAL0_DOCKERD_PID" 2>/dev/null; then
      echo "docker-up: dockerd exited while starting; its log ends with:" >&2
      tail -n 20 "$dir/dockerd.log" >&2
      HAL0_DOCKERD_PID=""
      return 1
    fi
    if [ "$waited" -ge "$HAL0_DOCKER_WAIT_S" ]; then
      echo "docker-up: dockerd did not answer within ${HAL0_DOCKER_WAIT_S} s; its log ends with:" >&2
      tail -n 20 "$dir/dockerd.log" >&2
      return 1
    fi
    sleep 1
    waited=$((waited + 1))
  done
}

hal0_docker_up() {
  local root
  root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
  if [ -n "${DOCKER_HOST:-}" ] && hal0_docker_answers; then
    echo "docker-up: using the engine at $DOCKER_HOST"
  elif [ -z "${DOCKER_HOST:-}" ] && hal0_docker_answers; then
    export DOCKER_HOST="unix:///var/run/docker.sock"
    echo "docker-up: using the engine at $DOCKER_HOST"
  else
    hal0_docker_install || { echo "docker-up: could not install docker.io" >&2; return 1; }
    export DOCKER_HOST="unix://$HAL0_DOCKER_DIR/docker.sock"
    if hal0_docker_answers; then
      echo "docker-up: using the engine already running at $DOCKER_HOST"
    else
      hal0_dockerd_start || return 1
    fi
  fi
  echo "docker-up: engine $(docker version --format '{{.Server.Version}}') at $DOCKER_HOST"
  bash "$root/scripts/runner-image.sh" || { echo "docker-up: could not build the runner image" >&2; return 1; }
}

# Stops the dockerd hal0_docker_up started, if it started one (its containers stop with it).
hal0_docker_down() {
  [ -n "$HAL0_DOCKERD_PID" ] || return 0
  kill -TERM "$HAL0_DOCKERD_PID" 2>/dev/null || return 0
  local waited=0
  while kill -0 "$HAL0_DOCKERD_PID" 2>/dev/null && [ "$waited" -lt 30 ]; do sleep 1; waited=$((waited + 1)); done
  kill -0 "$HAL0_DOCKERD_PID" 2>/dev/null && kill -KILL "$HAL0_DOCKERD_PID" 2>/dev/null
  echo "docker-up: stopped dockerd (pid $HAL0_DOCKERD_PID)"
  HAL0_DOCKERD_PID=""
}

if [ "${BASH_SOURCE[0]}" = "$0" ]; then
  set -euo pipefail
  hal0_docker_up
  echo "export DOCKER_HOST=$DOCKER_HOST"
fi
