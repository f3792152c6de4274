#!/bin/bash
# Lab images and containerized training on a real engine (issue 7):
#   errors      - missing recipe files, engine down, unsupported partition (fixture), no data
#   image       - cpu-lab builds on a locally made Debian base; a container from it starts through
#                 `gpulab serve`; a real ssh login runs `gpulab gpu-test --device cpu` inside
#   ddp         - `gpulab ddp 2 script_single_node ...` trains 2 ranks in a container, writes its
#                 log file, removes the container; interactive mode leaves one you can ssh into
#   ddp_service - the same run through a running `gpulab serve`: its GPUs and SSH port are a lease
#                 in the service's books while it runs, never given to an API create, then freed
# Usage: lab_test.sh CASE GPULAB_BINARY      Exit 77: this machine cannot run it (skip).
set -euo pipefail
case_=${1:?case}
G=$(realpath "${2:?gpulab binary}")
here=$(cd "$(dirname "$0")" && pwd)
src=$(cd "$here/../../.." && pwd)
work=$(mktemp -d -t gpulab-lab.XXXXXX)
svc_pid=""
cleanup() {
  [ -n "$svc_pid" ] && { kill "$svc_pid" 2>/dev/null || true; wait "$svc_pid" 2>/dev/null || true; }
  if [ -n "${DOCKER_HOST:-}" ]; then
    # Only the ddp containers of this run (they mount $work): other tests share the engine.
    docker ps -aq --filter label=gpulab.kind=ddp |
      xargs -r docker inspect -f '{{.Id}} {{range .Mounts}}{{.Source}} {{end}}' 2>/dev/null |
      grep -F " $work/" | cut -d' ' -f1 | xargs -r docker rm -f >/dev/null 2>&1 || true
    docker rm -f "lab-$$" "lab2-$$" >/dev/null 2>&1 || true
  fi
  rm -rf "$work"
}
trap cleanup EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
expect() {  # expect <exit code> <text> -- command...
  local want=$1 text=$2; shift 3
  set +e; out=$("$@" 2>&1); rc=$?; set -e
  echo "$out" | sed 's/^/    /'
  [ "$rc" = "$want" ] || fail "exit $rc, wanted $want: $*"
  grep -qF -- "$text" <<<"$out" || fail "no '$text' in the output of: $*"
}
ssh_run() {  # ssh_run <port> <password> <command>; at most $ssh_limit s (a hang once cost 25 min)
  timeout -k 5 "${ssh_limit:-120}" sshpass -p "$2" ssh -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -o LogLevel=ERROR \
    -o ConnectTimeout=5 -p "$1" root@127.0.0.1 "$3"
}
wait_ssh() {  # retries until sshd in the container answers
  for _ in $(seq 60); do ssh_limit=15 ssh_run "$1" "$2" true 2>/dev/null && return 0; sleep 1; done
  fail "no ssh login on port $1"
}
fashion_data() {
  mkdir -p "$work/data/fashion-mnist" "$work/log"
  cp /usr/share/datasets/fashion-mnist/*.gz "$work/data/fashion-mnist/"
}
engine() {
  set +e
  DOCKER_HOST=$("$here/../dockerd/start-dockerd.sh" main 2>"$work/start-dockerd.err")
  local rc=$?
  set -e
  cat "$work/start-dockerd.err" >&2
  # The skip names why (not root, no namespaces): tests/allowed-skips.txt judges the reason.
  [ $rc = 77 ] && { echo "SKIP: no dockerd here: $(tail -n 1 "$work/start-dockerd.err")"; exit 77; }
  [ $rc = 0 ] || fail "dockerd did not start"
  export DOCKER_HOST
  "$here/../dockerd/make-test-images.sh" "$DOCKER_HOST" debian-ssh >/dev/null
}
# The cpu lab image on the Debian sshd base the harness builds (the recipe installs the runtime
# packages gpulab needs from Debian's mirror; the engine caches that layer between runs).
lab_image() {
  expect 0 "CPU image built successfully: cpu-lab" -- \
    "$G" image build --vendor cpu --base gpulab-test/debian-ssh:latest -y --quiet-build
  docker image inspect cpu-lab:latest >/dev/null || fail "cpu-lab:latest not tagged"
}

case "$case_" in
  errors)
    echo "== missing recipe files"
    cp -r "$src/images" "$work/images" && rm "$work/images/cpu/Dockerfile"
    [ -S /tmp/gpulab-dockerd-main/docker.sock ] && dh=unix:///tmp/gpulab-dockerd-main/docker.sock || dh=""
    if [ -n "$dh" ] && curl -sf --unix-socket /tmp/gpulab-dockerd-main/docker.sock http://e/_ping >/dev/null; then
      expect 2 "images/cpu/Dockerfile" -- "$G" image build --vendor cpu -y --recipes "$work/images" --docker-host "$dh"
    else
      echo "    (no running engine: the missing-file check is covered in the image case)"
    fi
    echo "== engine not running"
    expect 3 "Docker service is not running" -- \
      "$G" image build --vendor cpu -y --docker-host unix://$work/no-engine.sock
    fashion_data
    expect 3 "Docker service is not running" -- \
      "$G" ddp --data "$work/data" --log "$work/log" --docker-host unix://$work/no-engine.sock 1 script_single_node "--model resnet18"
    echo "== unsupported partition (captured MI300X in NPS2/CPX)"
    expect 2 "Current configuration: NPS2, CPX" -- \
      "$G" ddp --detect-root "$src/tests/fixtures/mi300x-nps2-cpx" --data "$work/data" --log "$work/log" 2 script_single_node "--model resnet18"
    echo "== missing data"
    expect 2 "Training data not found" -- "$G" ddp --data "$work/nodata" --log "$work/log" 1
    expect 2 "gpulab data get" -- "$G" ddp --data "$work/nodata" --log "$work/log" 1
    echo "== bad arguments"
    expect 2 "between 1 and 8" -- "$G" ddp --data "$work/data" 9
    expect 2 "master's address" -- "$G" ddp --data "$work/data" 2 script_multi_node "--model resnet18"
    ;;
  image)
    command -v sshpass >/dev/null || { echo "SKIP: no sshpass"; exit 77; }
    engine
    lab_image
    echo "== a container through gpulab serve, then ssh + gpu-test inside"
    cat >"$work/config.json" <<JSON
{"listen": "127.0.0.1:0", "db": "$work/service.db", "backup_dir": "$work/backups",
 "docker_host": "$DOCKER_HOST", "auth_required": true, "device_mode": "none",
 "image_allowlist": ["cpu-lab:*"], "gpus": []}
JSON
    token=$("$G" serve --config "$work/config.json" --add-user labuser 2>/dev/null)
    "$G" serve --config "$work/config.json" --ssh-port-base 4400 --port-file "$work/port" >"$work/service.log" 2>&1 &
    svc_pid=$!
    for _ in $(seq 100); do [ -s "$work/port" ] && break; sleep 0.1; done
    [ -s "$work/port" ] || { cat "$work/service.log"; fail "service did not start"; }
    api="http://127.0.0.1:$(cat "$work/port")/api/v1/gpu-docker"
    resp=$(curl -s -X POST "$api/create" -H "Content-Type: application/json" -H "Authorization: Bearer $token" \
      -d "{\"name\": \"lab-$$\", \"image\": \"cpu-lab:latest\", \"gpu_count\": 0}")
    echo "    $resp"
    [ "$(jq -r .success <<<"$resp")" = true ] || { tail -20 "$work/service.log"; fail "create through the service"; }
    port=$(jq -r .data.ssh_port <<<"$resp")
    pw=$(jq -r '.data.ssh_password // empty' <<<"$resp")
    [ -n "$pw" ] || fail "the service returned no ssh password"
    wait_ssh "$port" "$pw"
    out=$(ssh_run "$port" "$pw" "gpulab gpu-test --device cpu --size 128 --iterations 5")
    echo "$out" | sed 's/^/    /'
    grep -q "Successful iterations: 5/5" <<<"$out" || fail "gpu-test inside the lab container"
    grep -q "All tests completed" <<<"$out" || fail "gpu-test report"
    curl -s -X POST "$api/delete" -H "Content-Type: application/json" -H "Authorization: Bearer $token" \
      -d "{\"name\": \"lab-$$\"}" | jq -e .success >/dev/null || fail "delete"
    ;;
  ddp)
    command -v sshpass >/dev/null || { echo "SKIP: no sshpass"; exit 77; }
    [ -e /usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz ] || { echo "SKIP: no dataset-fashion-mnist"; exit 77; }
    engine
    docker image inspect cpu-lab:latest >/dev/null 2>&1 || lab_image
    fashion_data
    echo "== script_single_node: 2 ranks in a container"
    set +e
    "$G" ddp --no-service --data "$work/data" --log "$work/log" 2 script_single_node \
      "--model resnet18 --dataset fashion-mnist --num_epochs 1 --input_size 32 --batch_size 32 --subset 512 --num_workers 1" \
      | tee "$work/ddp.out"
    rc=${PIPESTATUS[0]}
    set -e
    [ "$rc" = 0 ] || fail "ddp script run exited $rc"
    grep -q "Allocation: directly on the engine (--no-service)" "$work/ddp.out" || fail "ddp did not say it allocated directly"
    name=$(grep -o 'ddp-[A-Za-z0-9]*-2-cpu' "$work/ddp.out" | head -1)
    [ -n "$name" ] || fail "no seed-style container name in the output"
    grep -q "Hello from local_rank 1, global_rank 1" "$work/ddp.out" || fail "rank 1 did not say hello"
    grep -q "Training took" "$work/ddp.out" || fail "no 'Training took' line"
    log=$(ls "$work/log"/*_"$name".log) || fail "no log/<date>_$name.log"
    grep -q "Training took" "$log" || fail "log file incomplete"
    docker ps -a --format '{{.Names}}' | grep -qx "$name" && fail "container $name was not removed"
    echo "== interactive: a container to ssh into"
    # No --service and nothing at the default URL: ddp falls back to the engine and says so.
    out=$(env -u GPULAB_SERVICE "$G" ddp --data "$work/data" --log "$work/log" 1)
    echo "$out" | sed 's/^/    /'
    grep -q "Allocation: directly on the engine (no gpulab serve answers at http://127.0.0.1:8000)" <<<"$out" \
      || fail "ddp did not say it fell back to the engine"
    docker inspect "$(grep -o 'ddp-[A-Za-z0-9]*-1-cpu' <<<"$out" | head -1)" | grep -q "$(grep 'SSH password:' <<<"$out" | awk '{print $NF}')" \
      && fail "the SSH password shows in docker inspect"
    name=$(grep -o 'ddp-[A-Za-z0-9]*-1-cpu' <<<"$out" | head -1)
    port=$(grep -o 'ssh root@localhost -p [0-9]*' <<<"$out" | awk '{print $4}')
    pw=$(grep 'SSH password:' <<<"$out" | awk '{print $NF}')
    [ -n "$name" ] && [ -n "$port" ] && [ -n "$pw" ] || fail "summary box incomplete"
    echo "== ssh into $name on port $port"
    wait_ssh "$port" "$pw"
    ssh_run "$port" "$pw" "ls /workspace/data/fashion-mnist && gpulab --version" | sed 's/^/    /' ||
      fail "the command over ssh failed or hung"
    # As the seed's `docker run --rm`: stopping it removes it (issue 13).
    echo "== docker stop $name"
    timeout -k 5 60 docker stop "$name" >/dev/null || fail "docker stop $name failed or hung"
    for _ in $(seq 50); do docker inspect "$name" >/dev/null 2>&1 || break; sleep 0.2; done
    docker inspect "$name" >/dev/null 2>&1 && fail "interactive container $name stayed after docker stop"
    ;;
  ddp_service)
    # gpulab ddp through a running gpulab serve: the service books the run's GPUs and SSH port
    # (a lease), hands neither to an API create while the run lasts, and frees both after it.
    # The 3 declared AMD GPUs map harmless host nodes (/dev/zero as /dev/kfd, /dev/null, /dev/full
    # as render nodes): this proves the booking and the device mapping, not GPU compute.
    command -v jq >/dev/null || { echo "SKIP: no jq"; exit 77; }
    [ -e /usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz ] || { echo "SKIP: no dataset-fashion-mnist"; exit 77; }
    engine
    docker image inspect cpu-lab:latest >/dev/null 2>&1 || lab_image
    fashion_data
    cat >"$work/config.json" <<JSON
{"listen": "127.0.0.1:0", "db": "$work/service.db", "backup_dir": "$work/backups",
 "docker_host": "$DOCKER_HOST", "auth_required": true, "device_mode": "map",
 "amd_kfd_path": "/dev/zero", "amd_kfd_in_container": "/dev/kfd", "reconcile_interval_seconds": 1,
 "image_allowlist": ["cpu-lab:*"],
 "gpus": [{"uuid": "GPU-lab-0", "index": 0, "vendor": "amd", "render_node": "/dev/null", "render_node_in_container": "/dev/dri/renderD128"},
          {"uuid": "GPU-lab-1", "index": 1, "vendor": "amd", "render_node": "/dev/full", "render_node_in_container": "/dev/dri/renderD129"},
          {"uuid": "GPU-lab-2", "index": 2, "vendor": "amd", "render_node": "/dev/zero", "render_node_in_container": "/dev/dri/renderD130"}]}
JSON
    token=$("$G" serve --config "$work/config.json" --add-user ddpuser 2>/dev/null)
    "$G" serve --config "$work/config.json" --ssh-port-base 4700 --port-file "$work/port" >"$work/service.log" 2>&1 &
    svc_pid=$!
    for _ in $(seq 100); do [ -s "$work/port" ] && break; sleep 0.1; done
    [ -s "$work/port" ] || { cat "$work/service.log"; fail "service did not start"; }
    url="http://127.0.0.1:$(cat "$work/port")"
    api="$url/api/v1/gpu-docker"
    call() { curl -s -H "Authorization: Bearer $token" -H "Content-Type: application/json" "$@"; }
    echo "== gpulab ddp 2 script_single_node through gpulab serve"
    GPULAB_TOKEN=$token "$G" ddp --service "$url" --data "$work/data" --log "$work/log" 2 script_single_node \
      "--model resnet18 --dataset fashion-mnist --num_epochs 1 --input_size 32 --batch_size 32 --subset 512 --num_workers 1" \
      >"$work/ddp.out" 2>&1 &
    ddp_pid=$!
    lease_json=""
    for _ in $(seq 120); do
      lease_json=$(call "$api/leases")
      [ "$(jq -r '.data.leases[0].container // empty' <<<"$lease_json")" != "" ] && break
      sleep 0.5
    done
    echo "    leases: $lease_json"
    lease=$(jq -r '.data.leases[0].name' <<<"$lease_json")
    cname=$(jq -r '.data.leases[0].container' <<<"$lease_json")
    lport=$(jq -r '.data.leases[0].ssh_port' <<<"$lease_json")
    lgpus=$(jq -c '.data.leases[0].gpu_devices' <<<"$lease_json")
    [ "$cname" != null ] && [ -n "$cname" ] || { cat "$work/ddp.out"; fail "no lease with a container while ddp runs"; }
    [ "$(jq length <<<"$lgpus")" = 2 ] || fail "the lease holds $lgpus, not 2 GPUs"
    [ "$lport" -gt 4700 ] || fail "the lease holds no SSH port ($lport)"
    status=$(call "$api/status"); echo "    status while ddp runs: $status"
    [ "$(jq -c '.data.used_gpu_indices' <<<"$status")" = "$lgpus" ] || fail "status does not show the lease's GPUs as used"
    [ "$(jq -c ".data.container_gpu_mapping[\"$lease\"]" <<<"$status")" = "$lgpus" ] || fail "status does not map the GPUs to the lease"
    docker inspect -f '{{index .Config.Labels "gpulab.lease"}} {{range .HostConfig.Devices}}{{.PathOnHost}}>{{.PathInContainer}} {{end}}' "$cname" | sed 's/^/    container: /'
    [ "$(docker inspect -f '{{index .Config.Labels "gpulab.lease"}}' "$cname")" = "$lease" ] || fail "container not labeled with its lease"
    docker port "$cname" 22 | grep -q ":$lport\$" || fail "container does not publish the lease's port $lport"
    echo "== an API create during the run gets neither its GPUs nor its port"
    resp=$(call -X POST "$api/create" -d "{\"name\": \"lab-$$\", \"image\": \"cpu-lab:latest\", \"gpu_count\": 1}")
    echo "    $resp"
    [ "$(jq -r .success <<<"$resp")" = true ] || fail "create during the ddp run"
    g=$(jq -r '.data.gpu_devices[0]' <<<"$resp")
    jq -e --argjson g "$g" 'index($g) == null' <<<"$lgpus" >/dev/null || fail "create got GPU $g that the lease holds"
    [ "$(jq -r .data.ssh_port <<<"$resp")" != "$lport" ] || fail "create got the lease's port"
    resp=$(call -X POST "$api/create" -d "{\"name\": \"lab2-$$\", \"image\": \"cpu-lab:latest\", \"gpu_count\": 1}")
    [ "$(jq -r .error_code <<<"$resp")" = GPU_ALLOCATION_FAILED ] || fail "a 4th GPU was handed out: $resp"
    set +e; wait "$ddp_pid"; rc=$?; set -e
    sed 's/^/    /' "$work/ddp.out" | grep -v "Epoch\|it/s" | tail -15
    [ "$rc" = 0 ] || fail "ddp through the service exited $rc"
    grep -q "Allocation: through gpulab serve at $url" "$work/ddp.out" || fail "ddp did not say it went through the service"
    grep -q "Training took" "$work/ddp.out" || fail "no 'Training took' line"
    grep -q "Released lease $lease" "$work/ddp.out" || fail "ddp did not release its lease"
    docker ps -a --format '{{.Names}}' | grep -qx "$cname" && fail "container $cname was not removed"
    status=$(call "$api/status"); echo "    status after the run: $status"
    [ "$(jq -c '.data.used_gpu_indices' <<<"$status")" = "[$g]" ] || fail "GPUs not released after the run"
    [ "$(jq '.data.leases | length' <<<"$(call "$api/leases")")" = 0 ] || fail "lease still listed"
    echo "== the freed GPUs go to the next create"
    resp=$(call -X POST "$api/create" -d "{\"name\": \"lab2-$$\", \"image\": \"cpu-lab:latest\", \"gpu_count\": 2}")
    [ "$(jq -c .data.gpu_devices <<<"$resp")" = "$lgpus" ] || fail "freed GPUs not given out again: $resp"
    for n in "lab-$$" "lab2-$$"; do call -X POST "$api/delete" -d "{\"name\": \"$n\"}" >/dev/null; done
    echo "== a named service that does not answer is an error, not a silent fallback"
    expect 3 "is not answering" -- "$G" ddp --service http://127.0.0.1:1 --data "$work/data" --log "$work/log" 1 script_single_node "--model resnet18"
    ;;
  *) fail "unknown case $case_" ;;
esac
echo "PASS: lab $case_"
