#!/bin/sh
# Lab container entrypoint: applies the SSH login the container was given (a password or a
# public key, from the environment), starts sshd, then runs the command or stays up.
set -e
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
if [ -n "${GPULAB_SSH_PASSWORD:-}" ]; then
  echo "root:${GPULAB_SSH_PASSWORD}" | chpasswd
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
exec sleep infinity
