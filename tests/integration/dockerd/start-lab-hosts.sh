#!/bin/bash
# Starts three private Docker engines (lab1, lab2, lab3) that play three GPU servers: each with
# its own data root, socket and bridge (start-dockerd.sh), reachable over TCP on 127.0.0.1:2376N
# with Docker's mutual TLS. Certificates are made here with openssl, once, in
# $GPULAB_DOCKERD_ROOT/gpulab-lab-tls/: a CA, a server certificate for IP 127.0.0.1, a client
# certificate, and a second CA ("other-ca.pem") that signed nothing the engines trust.
# Not in network namespaces: dockerd under `ip netns exec` loses the cgroup mounts it needs
# (DESIGN.md); the hosts' published ports are kept apart by binding them on 127.0.0.2-4 instead.
# Engines that run are reused and any that is not (one SIGKILLed by a test) is started again on
# its data root, so tests run it again to bring a killed engine back (soak_hosts_test.cpp).
# Prints one line per engine: NAME TCP_URL UNIX_URL. Exit 77: cannot run here (not root, no
# dockerd or openssl); the tests skip.
# Usage: start-lab-hosts.sh           stop: stop-dockerd.sh --purge lab1 lab2 lab3
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
base="${GPULAB_DOCKERD_ROOT:-/tmp}"
tls="$base/gpulab-lab-tls"
command -v openssl >/dev/null || { echo "no openssl CLI" >&2; exit 77; }

mkdir -p "$tls"
exec 8>"$tls.lock"
flock 8
if [ ! -f "$tls/done" ]; then
  (
    cd "$tls"
    q() { "$@" >/dev/null 2>&1; }
    q openssl req -x509 -newkey rsa:2048 -nodes -keyout ca-key.pem -out ca.pem -days 30 -subj /CN=gpulab-lab-ca
    q openssl req -newkey rsa:2048 -nodes -keyout server-key.pem -out server.csr -subj /CN=127.0.0.1
    printf 'subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth\n' >server.ext
    q openssl x509 -req -in server.csr -CA ca.pem -CAkey ca-key.pem -CAcreateserial -out server-cert.pem -days 30 -extfile server.ext
    q openssl req -newkey rsa:2048 -nodes -keyout key.pem -out client.csr -subj /CN=gpulab-service
    printf 'extendedKeyUsage=clientAuth\n' >client.ext
    q openssl x509 -req -in client.csr -CA ca.pem -CAkey ca-key.pem -CAcreateserial -out cert.pem -days 30 -extfile client.ext
    q openssl req -x509 -newkey rsa:2048 -nodes -keyout other-ca-key.pem -out other-ca.pem -days 30 -subj /CN=not-the-lab-ca
    touch done
  )
fi
flock -u 8

pids=()
for i in 1 2 3; do
  # No iptables: containers need no route out, and the userland proxy still holds each
  # published port on its host (a port taken twice still fails), at less cost per start.
  GPULAB_DOCKERD_IPTABLES=0 GPULAB_DOCKERD_TCP="127.0.0.1:2376$i" GPULAB_DOCKERD_TLS_DIR="$tls" \
    "$here/start-dockerd.sh" "lab$i" >/dev/null &
  pids+=($!)
done
rc=0
for p in "${pids[@]}"; do wait "$p" || rc=$?; done
[ "$rc" = 0 ] || exit "$rc"
for i in 1 2 3; do
  touch "$base/gpulab-dockerd-lab$i/ctest-owned"  # ctest-fixture.sh stop stops them at the end
  echo "lab$i tcp://127.0.0.1:2376$i unix://$base/gpulab-dockerd-lab$i/docker.sock"
done
