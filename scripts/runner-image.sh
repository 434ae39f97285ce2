#!/usr/bin/env bash
# Builds hal0-runner:local, the image the docker runtime's example box and tests run:
# FROM scratch + this machine's node binary + every library `ldd` lists for it (at
# the same paths, the dynamic loader included) + fixtures/runner/fake-llama-server.mjs at
# /runner/ + the llama-server facts it reads at start (fixtures/llama-server/help.txt, its
# flag table, and version.txt) at /llama-server/, where it looks: ../llama-server/ from itself.
# No registry is needed (none is reachable here). The engine is $DOCKER_HOST's.
#
# The same rootfs is tagged a second time with fixtures/runner/fake-runner.mjs as the entrypoint
# (GENERIC_TAG, default hal0-fake-runner:local): the stand-in for runners that are not llama-server.
#
#   usage: scripts/runner-image.sh [TAG [GENERIC_TAG]]     (defaults hal0-runner:local, hal0-fake-runner:local; npm run runner-image)
set -euo pipefail
cd "$(dirname "$0")/.."

tag="${1:-hal0-runner:local}"
generic_tag="${2:-hal0-fake-runner:local}"
node_bin="$(readlink -f "$(node -p process.execPath)")"
ctx="$(mktemp -d "${TMPDIR:-/tmp}/hal0-runner-image.XXXXXX")"
trap 'rm -rf "$ctx"' EXIT

# Copies a host file into the image's tree at the same path, following symlinks.
put() {
  mkdir -p "$ctx/rootfs$(dirname "$2")"
  cp -L "$1" "$ctx/rootfs$2"
}

put "$node_bin" /usr/local/bin/node
# ldd rows: "libx.so => /path (0x…)", "/lib64/ld-linux-x86-64.so.2 (0x…)", "linux-vdso.so.1 (0x…)" (no file).
libs="$(ldd "$node_bin" | awk '$2 == "=>" && $3 ~ /^\// { print $3 } $1 ~ /^\// { print $1 }' | sort -u)"
[ -n "$libs" ] || { echo "runner-image: ldd listed no libraries for $node_bin (a static node?)" >&2; }
for lib in $libs; do put "$lib" "$lib"; done
put fixtures/runner/fake-llama-server.mjs /runner/fake-llama-server.mjs
put fixtures/runner/fake-runner.mjs /runner/fake-runner.mjs
put fixtures/llama-server/help.txt /llama-server/help.txt
put fixtures/llama-server/version.txt /llama-server/version.txt
mkdir -p "$ctx/rootfs/tmp"

# One image per stand-in: the same layers (the second build reuses every one), another entrypoint.
# The classic builder: it needs no buildx plugin and pulls nothing for FROM scratch.
# Its deprecation notice is noise on success; on failure everything it said is shown.
build_image() { # TAG TITLE DESCRIPTION SCRIPT
  cat > "$ctx/Dockerfile" <<DOCKERFILE
FROM scratch
COPY rootfs/ /
LABEL org.opencontainers.image.title="$2" \\
      org.opencontainers.image.description="$3"
ENTRYPOINT ["/usr/local/bin/node", "/runner/$4"]
DOCKERFILE
  if ! out="$(DOCKER_BUILDKIT=0 docker build --quiet --tag "$1" "$ctx" 2>&1)"; then
    echo "$out" >&2
    echo "runner-image: docker build of $1 failed (engine: ${DOCKER_HOST:-the default socket})" >&2
    exit 1
  fi
}
build_image "$tag" hal0-runner "node + fixtures/runner/fake-llama-server.mjs: a stand-in for llama-server" fake-llama-server.mjs
build_image "$generic_tag" hal0-fake-runner "node + fixtures/runner/fake-runner.mjs: a stand-in for runners that are not llama-server" fake-runner.mjs
size="$(docker image inspect --format '{{.Size}}' "$tag")"
echo "runner-image: built $tag and $generic_tag from $node_bin ($(node --version)), $(echo $libs | wc -w) libraries, $((size / 1024 / 1024)) MiB"
