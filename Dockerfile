# syntax=docker/dockerfile:1
# Punk's container images, one target each (docs/images.md):
#   docker build --target <target> -t ghcr.io/punk-dev/punk-<target>:0.1.0 .
# targets: operator, mcp-front, gateway, governance, ledger, bridge, runner-npm, runner-pypi.
# A final stage only copies the layout `node scripts/assemble-image.mjs <target> /layout` builds; the test
# e2e/src/images.test.ts builds the same layouts without Docker and runs them. Every image runs as 65532:65532
# under tini, with the app in /opt/punk owned by root, and writes nowhere but /tmp (HOME=/tmp), so it runs with a
# read-only root filesystem and an emptyDir at /tmp.

ARG NODE_VERSION=24
ARG DEBIAN_RELEASE=bookworm
ARG PYTHON_VERSION=3.14
ARG UV_VERSION=0.12.9
# OCI labels: the root package.json version, the git commit, the repository (`--build-arg` overrides them).
ARG VERSION=0.1.0
ARG REVISION=unknown
ARG SOURCE=https://github.com/punk-dev/punk

FROM ghcr.io/astral-sh/uv:${UV_VERSION} AS uv

# ---- build: every workspace compiled (tsc -b), the dashboard built (Vite) and the bridge's single executable (Node SEA, glibc).
FROM node:${NODE_VERSION}-${DEBIAN_RELEASE} AS build
WORKDIR /src
COPY package.json package-lock.json ./
COPY services/lib/package.json services/lib/
COPY services/governance/package.json services/governance/
COPY services/ledger/package.json services/ledger/
COPY services/gateway/package.json services/gateway/
COPY ui/package.json ui/
COPY services/mcp-front/package.json services/mcp-front/
COPY services/cli/package.json services/cli/
COPY services/bridge/package.json services/bridge/
COPY operator/package.json operator/
RUN --mount=type=cache,target=/root/.npm npm ci --no-audit --no-fund
COPY . .
RUN npm run build && npm run build:sea -w @punk/bridge

# ---- layouts: what each image holds under /opt/punk (production dependencies only, no tests, no sources).
FROM build AS layout-operator
RUN --mount=type=cache,target=/root/.npm node scripts/assemble-image.mjs operator /layout

FROM build AS layout-mcp-front
RUN --mount=type=cache,target=/root/.npm node scripts/assemble-image.mjs mcp-front /layout

FROM build AS layout-gateway
RUN --mount=type=cache,target=/root/.npm node scripts/assemble-image.mjs gateway /layout

FROM build AS layout-governance
RUN --mount=type=cache,target=/root/.npm node scripts/assemble-image.mjs governance /layout

FROM build AS layout-ledger
RUN --mount=type=cache,target=/root/.npm node scripts/assemble-image.mjs ledger /layout

# The bridge and both runners carry the same layout: bin/punk-bridge.
FROM build AS layout-bridge
RUN node scripts/assemble-image.mjs bridge /layout

# ---- runtime bases: tini as PID 1 and the user 65532 (scripts/image-base.sh), HOME on /tmp.
FROM node:${NODE_VERSION}-${DEBIAN_RELEASE}-slim AS node-base
RUN --mount=type=bind,source=scripts/image-base.sh,target=/usr/local/lib/image-base.sh sh /usr/local/lib/image-base.sh
ENV HOME=/tmp TMPDIR=/tmp NODE_ENV=production
ARG VERSION
ARG REVISION
ARG SOURCE
LABEL org.opencontainers.image.vendor="Punk" org.opencontainers.image.version="${VERSION}" org.opencontainers.image.revision="${REVISION}" \
      org.opencontainers.image.source="${SOURCE}" org.opencontainers.image.documentation="${SOURCE}/blob/main/docs/images.md"
WORKDIR /opt/punk
ENTRYPOINT ["/usr/bin/tini", "--"]

# Punk's own processes need node only: npm, npx, corepack and yarn are removed.
FROM node-base AS service-base
RUN rm -rf /usr/local/lib/node_modules /usr/local/bin/npm /usr/local/bin/npx /usr/local/bin/corepack /usr/local/bin/yarn /usr/local/bin/yarnpkg /opt/yarn-*
# The listener of /healthz, /readyz and the service's routes on every address, port 8080, and /metrics on 9090 (as the chart sets).
ENV PUNK_HOST=0.0.0.0 PUNK_PORT=8080 PUNK_METRICS_PORT=9090
EXPOSE 8080 9090
USER 65532:65532

# ---- the operator and the services: node /opt/punk/<workspace>/dist/main.js, HTTP on PUNK_PORT (8080).
FROM service-base AS operator
LABEL org.opencontainers.image.title="punk-operator" \
      org.opencontainers.image.description="Punk operator: reconciles McpServer, McpCredential and McpPolicy objects"
COPY --from=layout-operator /layout /opt/punk
# A young generation of at most 2 x 4 MiB: a cold start's short-lived request objects then die young instead of
# piling up in the old generation (bench/operator.mjs: peak RSS of 1,000 servers 392 -> 224 MiB). An old generation of
# at most 512 MiB, whatever the node's memory: V8 grows the heap between collections by up to 4x on a large machine
# and by about 1.4x under this cap, so a cold start's garbage is collected sooner (peak RSS of 1,000 servers 200 ->
# 174 MiB at the same CPU); 5,000 servers: peak RSS 245 MiB. docs/operator.md, "The image's V8 settings".
ENV NODE_OPTIONS="--max-semi-space-size=4 --max-old-space-size=512"
CMD ["node", "/opt/punk/operator/dist/main.js"]

FROM service-base AS mcp-front
LABEL org.opencontainers.image.title="punk-mcp-front" \
      org.opencontainers.image.description="Punk MCP front: the Streamable HTTP endpoint clients connect to"
COPY --from=layout-mcp-front /layout /opt/punk
CMD ["node", "/opt/punk/services/mcp-front/dist/main.js"]

FROM service-base AS gateway
LABEL org.opencontainers.image.title="punk-gateway" \
      org.opencontainers.image.description="Punk gateway: upstream MCP clients, catalog and call relay"
COPY --from=layout-gateway /layout /opt/punk
# In a cluster the gateway serves the operator's McpServers; this directory of manifests is empty (mount more here).
ENV PUNK_MANIFESTS=/opt/punk/manifests
CMD ["node", "/opt/punk/services/gateway/dist/main.js"]

FROM service-base AS governance
LABEL org.opencontainers.image.title="punk-governance" \
      org.opencontainers.image.description="Punk governance: policy decisions on MCP calls"
COPY --from=layout-governance /layout /opt/punk
CMD ["node", "/opt/punk/services/governance/dist/main.js"]

FROM service-base AS ledger
LABEL org.opencontainers.image.title="punk-ledger" \
      org.opencontainers.image.description="Punk ledger: the tamper-evident record of MCP calls"
COPY --from=layout-ledger /layout /opt/punk
CMD ["node", "/opt/punk/services/ledger/dist/main.js"]

# ---- the bridge: the single executable and cp (the init container copies it into a stdio server's pod).
FROM debian:${DEBIAN_RELEASE}-slim AS bridge
LABEL org.opencontainers.image.title="punk-bridge" \
      org.opencontainers.image.description="Punk bridge: stdio MCP servers over Streamable HTTP, and the egress proxy"
RUN --mount=type=bind,source=scripts/image-base.sh,target=/usr/local/lib/image-base.sh sh /usr/local/lib/image-base.sh
ENV HOME=/tmp TMPDIR=/tmp PATH=/opt/punk/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
ARG VERSION
ARG REVISION
ARG SOURCE
LABEL org.opencontainers.image.vendor="Punk" org.opencontainers.image.version="${VERSION}" org.opencontainers.image.revision="${REVISION}" \
      org.opencontainers.image.source="${SOURCE}" org.opencontainers.image.documentation="${SOURCE}/blob/main/docs/images.md"
COPY --from=layout-bridge /layout /opt/punk
WORKDIR /tmp
USER 65532:65532
EXPOSE 8080 3128
ENTRYPOINT ["/usr/bin/tini", "--", "/opt/punk/bin/punk-bridge"]
CMD ["--help"]

# ---- runners of `package:` servers: the bridge in front of `npx -y <name>@<version>` or `uvx <name>==<version>`.
FROM node-base AS runner-npm
LABEL org.opencontainers.image.title="punk-runner-npm" \
      org.opencontainers.image.description="Punk runner of npm package MCP servers: node, npm, npx and the bridge"
COPY --from=layout-bridge /layout /opt/punk
ENV PATH=/opt/punk/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    npm_config_cache=/tmp/.npm \
    npm_config_update_notifier=false \
    npm_config_fund=false \
    XDG_CACHE_HOME=/tmp/.cache \
    XDG_CONFIG_HOME=/tmp/.config \
    XDG_DATA_HOME=/tmp/.local/share
WORKDIR /tmp
USER 65532:65532
EXPOSE 8080
CMD ["punk-bridge", "--help"]

FROM python:${PYTHON_VERSION}-slim-${DEBIAN_RELEASE} AS runner-pypi
LABEL org.opencontainers.image.title="punk-runner-pypi" \
      org.opencontainers.image.description="Punk runner of PyPI package MCP servers: Python, uv, uvx and the bridge"
RUN --mount=type=bind,source=scripts/image-base.sh,target=/usr/local/lib/image-base.sh sh /usr/local/lib/image-base.sh
COPY --from=uv /uv /uvx /usr/local/bin/
COPY --from=layout-bridge /layout /opt/punk
# uv runs packages on the image's Python: the sandbox's egress reaches the package index only, not Python downloads.
ENV HOME=/tmp TMPDIR=/tmp \
    PATH=/opt/punk/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    PYTHONDONTWRITEBYTECODE=1 \
    UV_PYTHON_DOWNLOADS=never \
    UV_CACHE_DIR=/tmp/.cache/uv \
    UV_TOOL_DIR=/tmp/.local/share/uv/tools \
    UV_TOOL_BIN_DIR=/tmp/.local/bin \
    XDG_CACHE_HOME=/tmp/.cache \
    XDG_CONFIG_HOME=/tmp/.config \
    XDG_DATA_HOME=/tmp/.local/share
ARG VERSION
ARG REVISION
ARG SOURCE
LABEL org.opencontainers.image.vendor="Punk" org.opencontainers.image.version="${VERSION}" org.opencontainers.image.revision="${REVISION}" \
      org.opencontainers.image.source="${SOURCE}" org.opencontainers.image.documentation="${SOURCE}/blob/main/docs/images.md"
WORKDIR /tmp
USER 65532:65532
EXPOSE 8080
ENTRYPOINT ["/usr/bin/tini", "--"]
CMD ["punk-bridge", "--help"]
