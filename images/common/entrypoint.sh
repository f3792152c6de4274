#!/bin/sh
# Lab container entrypoint: applies the SSH login the container was given (a password, put in
# /run/gpulab/ssh_password before the first start, or a public key from the environment), starts
# sshd, then runs the command or stays up.
set -e
# The password comes as a file (never in the environment, which `docker inspect` shows); it is
# applied once and deleted. GPULAB_SSH_PASSWORD is still read for older callers.
secret=/run/gpulab/ssh_password
if [ -f "$secret" ]; then
  GPULAB_SSH_PASSWORD=$(cat "$secret")
  rm -f "$secret"
fi
mkdir -p /run/sshd /root/.ssh
chmod 700 /root/.ssh
ssh-keygen -A >/dev/null 2>&1 || true
conf=/etc/ssh/sshd_config.d/gpulab.conf
mkdir -p /etc/ssh/sshd_config.d
: > "$conf"
if [ -n "${GPULAB_SSH_PUBKEY:-}" ]; then
  printf '%s\n' "$GPULAB_SSH_PUBKEY" >> /root/.ssh/authorized_keys
  chmod 600 /root/.ssh/authorized_keys
  echo "PermitRootLogin prohibit-password" >> "$conf"
fi
marker=/etc/ssh/gpulab-password-login
if [ -n "${GPULAB_SSH_PASSWORD:-}" ]; then
  echo "root:${GPULAB_SSH_PASSWORD}" | chpasswd
  touch "$marker"
fi
if [ -f "$marker" ]; then
  # Also on later starts (restart, recreate): the password stays in /etc/shadow.
  echo "PermitRootLogin yes" >> "$conf"
  echo "PasswordAuthentication yes" >> "$conf"
else
  # No password given: keys only, never a default password.
  echo "PasswordAuthentication no" >> "$conf"
fi
unset GPULAB_SSH_PASSWORD
# Logins see the same environment as the container (GPU visibility, PATH).
env | grep -E '^(PATH|LD_LIBRARY_PATH|CUDA_VISIBLE_DEVICES|HIP_VISIBLE_DEVICES|ROCR_VISIBLE_DEVICES|NVIDIA_VISIBLE_DEVICES|GPULAB_[A-Z_]*)=' \
  | grep -v '^GPULAB_SSH_' > /etc/environment || true
/usr/sbin/sshd -e
if [ "$#" -gt 0 ]; then
  exec "$@"
fi
# PID 1 gets no default signal actions: `sleep` as PID 1 ignored the engine's SIGTERM, so every
# stop or restart waited the whole stop timeout (10 s) for the SIGKILL. The shell stays PID 1
# and exits on TERM (wait returns as soon as the trap fires).
trap 'exit 0' TERM INT
sleep infinity &
wait $!
