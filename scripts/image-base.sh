#!/bin/sh
# The runtime base of Punk's images (Dockerfile, each base stage): tini as PID 1 and the user 65532 (named nonroot,
# as in distroless images; HOME /tmp, no shell), on a Debian image, leaving no apt lists behind.
set -eu
apt-get update
apt-get install -y --no-install-recommends tini
rm -rf /var/lib/apt/lists/*
groupadd --gid 65532 nonroot
useradd --uid 65532 --gid 65532 --home-dir /tmp --no-create-home --shell /usr/sbin/nologin nonroot
