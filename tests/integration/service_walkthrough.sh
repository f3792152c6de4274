#!/bin/bash
# The GPU Docker Service demo guide (reference/gpu-docker-service_rocm.md), run as written with
# real curl against `gpulab serve` on a private dockerd: two containers with GPUs and SSH ports,
# update, stop/start/restart, snapshots, delete, restore from a snapshot, backup, and restore
# from the backup with both GPUs. Auth is on, so every curl carries the token header.
# Usage: service_walkthrough.sh GPULAB_BINARY     Exit 77: no dockerd here (skip).
set -euo pipefail
GPULAB=$(realpath "$1")
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d -t gpulab-walkthrough.XXXXXX)
svc_pid=""
remove_containers() {
  for n in experiment-01 experiment-02 experiment-01-restored dual-gpu-container; do
    docker rm -f "$n" >/dev/null 2>&1 || true
  done
}
cleanup() {
  if [ -n "$svc_pid" ]; then kill "$svc_pid" 2>/dev/null || true; wait "$svc_pid" 2>/dev/null || true; fi
  if [ -n "${DOCKER_HOST:-}" ]; then remove_containers; fi
  rm -rf "$work"
}
trap cleanup EXIT
fail() { echo "FAIL: $*" >&2; [ -f "$work/service.log" ] && tail -20 "$work/service.log" >&2; exit 1; }

set +e
DOCKER_HOST=$("$here/dockerd/start-dockerd.sh" main 2>"$work/start-dockerd.err")
rc=$?
set -e
cat "$work/start-dockerd.err" >&2
# The skip names why (not root, no namespaces): tests/allowed-skips.txt judges the reason.
[ $rc = 77 ] && { echo "SKIP: no dockerd here: $(tail -n 1 "$work/start-dockerd.err")"; exit 77; }
[ $rc = 0 ] || fail "dockerd did not start"
export DOCKER_HOST
# A run killed before its trap (the machine restarted) left these names on the test engine.
remove_containers

# The lab image: a static busybox root (no registry in CI), kept running. The shell is PID 1,
# which has no default signal actions: without the trap it ignored the stop's SIGTERM and the
# stop and the restart below each waited the whole stop timeout (10 s). Made again when the
# engine holds one with another command.
image=gpulab-test/walkthrough-lab:latest
cmd="[\"/bin/sh\",\"-c\",\"trap 'exit 0' TERM; while true; do sleep 1; done\"]"
if [ "$(docker image inspect -f '{{json .Config.Cmd}}' "$image" 2>/dev/null)" != "$cmd" ]; then
  mkdir -p "$work/root/bin"
  cp "$(command -v busybox)" "$work/root/bin/busybox"
  for app in sh sleep cat echo ls; do ln -s busybox "$work/root/bin/$app"; done
  tar -C "$work/root" -cf - . | docker import --change "CMD $cmd" - "$image" >/dev/null
fi

base=3300   # the guide's SSH_PORT_BASE=3300 -> 3311, 3322
cat > "$work/config.json" <<JSON
{"listen": "127.0.0.1:0", "db": "$work/service.db", "backup_dir": "$work/backups",
 "docker_host": "$DOCKER_HOST", "auth_required": true, "device_mode": "none",
 "gpus": [{"uuid": "GPU-walk-0", "index": 0, "vendor": "amd"},
          {"uuid": "GPU-walk-1", "index": 1, "vendor": "amd"}]}
JSON
TOKEN=$("$GPULAB" serve --config "$work/config.json" --add-user demo 2>/dev/null)
SSH_PORT_BASE=$base "$GPULAB" serve --config "$work/config.json" --port-file "$work/port" \
  >"$work/service.log" 2>&1 &
svc_pid=$!
for _ in $(seq 100); do [ -s "$work/port" ] && break; sleep 0.1; done
[ -s "$work/port" ] || fail "service did not start"
API="http://localhost:$(cat "$work/port")/api/v1/gpu-docker"
H=(-H "Content-Type: application/json" -H "Authorization: Bearer $TOKEN")
# The guide asks for 2 and 4 CPUs and 8g/16g; the engine refuses more CPUs than the host has.
ncpu=$(nproc); cpus2=$(( ncpu < 2 ? ncpu : 2 )); cpus4=$(( ncpu < 4 ? ncpu : 4 ))

check() {  # check <json> <jq expression that must be true> <what>
  echo "$1" | jq -e "$2" >/dev/null || fail "$3: $1"
  echo "ok: $3"
}

out=$(curl -s "${H[@]}" "$API/status")
check "$out" '.success and .message == "GPU status retrieved successfully" and .data.gpu_type == "rocm" and .data.available_gpu_indices == [0,1] and .data.used_gpu_indices == []' "status: both GPUs available"

out=$(curl -s -X POST "$API/create" "${H[@]}" -d '{
    "name": "experiment-01",
    "image": "'"$image"'",
    "port": ["3002:3002", "4002:4002"],
    "gpu_count": 1,
    "cpus": "'"$cpus2"'",
    "memory": "8g"
  }')
check "$out" '.success and .message == "Container created successfully" and .data.name == "experiment-01" and .data.ssh_port == 3311 and .data.gpu_devices == [0] and .data.port_mappings == ["3002:3002","4002:4002"]' "create experiment-01 -> ssh 3311, GPU 0"

out=$(curl -s -X POST "$API/create" "${H[@]}" -d '{
    "name": "experiment-02",
    "image": "'"$image"'",
    "port": ["5002:5002", "6002:6002"],
    "gpu_count": 1,
    "cpus": "'"$cpus4"'",
    "memory": "16g"
  }')
check "$out" '.success and .data.ssh_port == 3322 and .data.gpu_devices == [1] and .data.port_mappings == ["5002:5002","6002:6002"]' "create experiment-02 -> ssh 3322, GPU 1"

out=$(curl -s -X POST "$API/create" "${H[@]}" -d '{"name": "experiment-03", "image": "'"$image"'", "port": ["3002:3002", "4002:4002"], "gpu_count": 0}')
check "$out" '(.success | not) and .error_code == "PORT_CONFLICT" and .message == "Port(s) already in use: [3002, 4002]"' "port conflict as in the guide"
out=$(curl -s -X POST "$API/create" "${H[@]}" -d '{"name": "experiment-03", "image": "'"$image"'", "gpu_count": 1}')
check "$out" '(.success | not) and .error_code == "GPU_ALLOCATION_FAILED" and .message == "GPU allocation failed"' "no GPU left as in the guide"

out=$(curl -s "${H[@]}" "$API/list")
check "$out" '.success and (.data.containers | length) == 2 and ([.data.containers[].gpu_devices[]] | sort) == [0,1]' "list shows both with their GPUs"

out=$(curl -s -X POST "$API/update-resources" "${H[@]}" -d '{
    "name": "experiment-01",
    "cpus": "1"
  }')
check "$out" '.success and .data.cpus == "1"' "update-resources"

for verb in stop start restart; do
  out=$(curl -s -X POST "$API/$verb" "${H[@]}" -d '{"name": "experiment-02"}')
  check "$out" '.success' "$verb experiment-02"
done
[ "$(docker inspect -f '{{.State.Running}}' experiment-02)" = true ] || fail "experiment-02 not running"

out=$(curl -s -X POST "$API/snapshot" "${H[@]}" -d '{
    "name": "experiment-01",
    "snapshot_name": "exp01-checkpoint"
  }')
check "$out" '.success' "snapshot experiment-01"
out=$(curl -s -X POST "$API/snapshot" "${H[@]}" -d '{
    "name": "experiment-02",
    "snapshot_name": "exp02-checkpoint"
  }')
check "$out" '.success' "snapshot experiment-02"
out=$(curl -s "${H[@]}" "$API/snapshots")
check "$out" '.success and ([.data.snapshots[].snapshot_name] | sort) == ["exp01-checkpoint","exp02-checkpoint"]' "list snapshots"

out=$(curl -s -X POST "$API/delete" "${H[@]}" -d '{"name": "experiment-01"}')
check "$out" '.success' "delete experiment-01"
out=$(curl -s -X POST "$API/restore-snapshot" "${H[@]}" -d '{
    "snapshot_name": "exp01-checkpoint",
    "name": "experiment-01-restored",
    "gpu_count": 1,
    "port": ["3003:3003"]
  }')
check "$out" '.success and .data.gpu_devices == [0] and .data.port_mappings == ["3003:3003"]' "restore-snapshot on the freed GPU"

out=$(curl -s -X POST "$API/backup" "${H[@]}" -d '{
    "name": "experiment-02",
    "backup_name": "exp02-backup"
  }')
check "$out" '.success' "backup experiment-02"
[ -f "$work/backups/backup_exp02-backup.tar" ] || fail "no backup_exp02-backup.tar in the backup dir"
echo "ok: backup file $(du -h "$work/backups/backup_exp02-backup.tar" | cut -f1)"

# "Delete all containers first", then restore with both GPUs.
for n in experiment-02 experiment-01-restored; do
  out=$(curl -s -X POST "$API/delete" "${H[@]}" -d '{"name": "'"$n"'"}')
  check "$out" '.success' "delete $n"
done
out=$(curl -s -X POST "$API/restore" "${H[@]}" -d '{
    "backup_path": "exp02-backup.tar",
    "name": "dual-gpu-container",
    "gpu_count": 2,
    "port": ["3004:3004"]
  }')
check "$out" '.success and .data.gpu_devices == [0,1]' "restore from backup with both GPUs"
out=$(curl -s "${H[@]}" "$API/status")
check "$out" '.data.used_gpu_indices == [0,1] and .data.container_gpu_mapping["dual-gpu-container"] == [0,1]' "status shows the dual-GPU container"

out=$(curl -s -X POST "$API/create" -H "Content-Type: application/json" -d '{"name": "x", "image": "'"$image"'"}')
check "$out" '.error_code == "UNAUTHORIZED"' "no token, no service"
echo "walkthrough: all steps passed"
