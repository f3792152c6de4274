#!/bin/sh
# Installs the Debian/Ubuntu packages listed in $1 (one per line) that the image does not have
# yet; a base that already has them all needs no network.
set -e
missing=""
for p in $(grep -v '^#' "$1"); do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
if [ -n "$missing" ]; then
  echo "installing:$missing"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $missing
  rm -rf /var/lib/apt/lists/*
else
  echo "all runtime packages present"
fi
