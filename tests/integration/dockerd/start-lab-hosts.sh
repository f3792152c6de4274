#!/bin/bash
# Starts three private Docker engines (lab1, lab2, lab3) that play three GPU servers: each with
# its own data root, socket, bridge and network namespace (start-dockerd.sh), at 10.213.N.2 seen
# from here (a veth pair), reachable over TCP on 10.213.N.2:2376 with Docker's mutual TLS; their
# published ports are there too, apart from this machine's. Certificates are made here with
# openssl, once, in $GPULAB_DOCKERD_ROOT/gpulab-lab-tls/: a CA, a server certificate for the three
# addresses, a client certificate, and a second CA ("other-ca.pem") that signed nothing the
# engines trust. Engines that run are reused and any that is not (one SIGKILLed by a test) is
# started again on its data root, so tests run it again to bring a killed engine back
# (soak_hosts_test.cpp); one running outside its namespace (an older layout) is stopped first.
# Prints one line per engine: NAME TCP_URL UNIX_URL ADDRESS. Exit 77: cannot run here (not root,
# no dockerd, openssl or nsenter); the tests skip.
# Usage: start-lab-hosts.sh           stop: stop-dockerd.sh --purge lab1 lab2 lab3
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
base="${GPULAB_DOCKERD_ROOT:-/tmp}"
tls="$base/gpulab-lab-tls"
command -v openssl >/dev/null || { echo "no openssl CLI" >&2; exit 77; }
command -v nsenter >/dev/null || { echo "no nsenter (util-linux)" >&2; exit 77; }

mkdir -p "$tls"
exec 8>"$tls.lock"
flock 8
if [ ! -f "$tls/done-netns" ]; then
  (
    cd "$tls"
    q() { "$@" >/dev/null 2>&1; }
    q openssl req -x509 -newkey rsa:2048 -nodes -keyout ca-key.pem -out ca.pem -days 30 -subj /CN=gpulab-lab-ca
    q openssl req -newkey rsa:2048 -nodes -keyout server-key.pem -out server.csr -subj /CN=gpulab-lab
    printf 'subjectAltName=IP:10.213.1.2,IP:10.213.2.2,IP:10.213.3.2\nextendedKeyUsage=serverAuth\n' >server.ext
    q openssl x509 -req -in server.csr -CA ca.pem -CAkey ca-key.pem -CAcreateserial -out server-cert.pem -days 30 -extfile server.ext
    q openssl req -newkey rsa:2048 -nodes -keyout key.pem -out client.csr -subj /CN=gpulab-service
    printf 'extendedKeyUsage=clientAuth\n' >client.ext
    q openssl x509 -req -in client.csr -CA ca.pem -CAkey ca-key.pem -CAcreateserial -out cert.pem -days 30 -extfile client.ext
    q openssl req -x509 -newkey rsa:2048 -nodes -keyout other-ca-key.pem -out other-ca.pem -days 30 -subj /CN=not-the-lab-ca
    touch done-netns
  )
fi
flock -u 8

pids=()
for i in 1 2 3; do
  root="$base/gpulab-dockerd-lab$i"
  pid=$(cat "$root/dockerd.pid" 2>/dev/null || true)
  if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null &&
    [ "$(stat -L -c %i "/run/netns/gpulab-lab$i" 2>/dev/null)" != "$(stat -L -c %i "/proc/$pid/ns/net")" ]; then
    "$here/stop-dockerd.sh" "lab$i"
  fi
  # No iptables: containers need no route out, and the userland proxy still holds each
  # published port on its host (a port taken twice still fails), at less cost per start.
  GPULAB_DOCKERD_IPTABLES=0 GPULAB_DOCKERD_NETNS="10.213.$i" GPULAB_DOCKERD_TCP="10.213.$i.2:2376" \
    GPULAB_DOCKERD_TLS_DIR="$tls" "$here/start-dockerd.sh" "lab$i" >/dev/null &
  pids+=($!)
done
rc=0
for p in "${pids[@]}"; do wait "$p" || rc=$?; done
[ "$rc" = 0 ] || exit "$rc"
for i in 1 2 3; do
  touch "$base/gpulab-dockerd-lab$i/ctest-owned"  # ctest-fixture.sh stop stops them at the end
  echo "lab$i tcp://10.213.$i.2:2376 unix://$base/gpulab-dockerd-lab$i/docker.sock 10.213.$i.2"
done
