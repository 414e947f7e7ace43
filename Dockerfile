# syntax=docker/dockerfile:1
# One image for every role: `outrigger proxy` (the sidecar, the default command), `outrigger webhook`
# and `outrigger iptables` (the transparent-capture init step). Compiled JavaScript only: no
# TypeScript, no dev dependencies, no npm at run time. Runs as a non-root user with a read-only root
# filesystem (nothing is written outside the volumes the injector mounts).
#
#   docker build -t ghcr.io/outrigger-mesh/outrigger:0.1.0 .
#
# Pin NODE_IMAGE by digest in a release pipeline; the tag keeps this file readable.
ARG NODE_IMAGE=node:24.21.0-slim

FROM ${NODE_IMAGE} AS build
WORKDIR /src
COPY package.json package-lock.json ./
# --ignore-scripts: the pinned `node` devDependency would fetch a second Node (this image has one),
# and `prepare` would compile before the sources are here. koffi's binaries come from its prebuilt
# per-platform optional packages, so no install script is needed.
RUN npm ci --ignore-scripts --no-audit --no-fund
COPY tsconfig.json tsconfig.build.json ./
COPY src ./src
# Called by path: node_modules/.bin/node is the devDependency's shim, which --ignore-scripts leaves unset.
RUN node node_modules/typescript/bin/tsc -p tsconfig.build.json

FROM ${NODE_IMAGE} AS deps
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --omit=dev --ignore-scripts --no-audit --no-fund && rm -rf /root/.npm

FROM ${NODE_IMAGE}
# iptables (with iptables-restore) for the init step. npm, npx, corepack and yarn are removed:
# nothing runs them, and every binary in a sidecar image ships into every pod.
RUN apt-get update \
  && apt-get install -y --no-install-recommends iptables \
  && rm -rf /var/lib/apt/lists/* \
  && rm -rf /usr/local/lib/node_modules/npm /usr/local/lib/node_modules/corepack \
    /usr/local/bin/npm /usr/local/bin/npx /usr/local/bin/corepack /opt/yarn-* \
    /usr/local/bin/yarn /usr/local/bin/yarnpkg
WORKDIR /app
ENV NODE_ENV=production
COPY --from=deps /app/node_modules ./node_modules
COPY --from=build /src/dist ./dist
# package.json marks dist/ as ES modules; proto/ holds the snapshot schema loaded at run time;
# manifests/ is what `outrigger install` prints and `outrigger demo` routes by.
COPY package.json ./
COPY proto ./proto
COPY manifests ./manifests
COPY bin ./bin
# The sidecar's UID: the injected securityContext and the iptables owner match use the same number
# (option proxyUid); the init container overrides it with root for iptables.
USER 2102:2102
EXPOSE 7400 7401 7402 8443
# --max-semi-space-size=4: V8 would otherwise let the young generation grow to 64 MB under load.
# 4 MiB semi-spaces cost ~22 % less CPU per request than 2 MiB and peaked lower under load in the
# same benchmark run (fewer objects promoted to the old generation); docs/benchmarks.md, "Memory".
ENTRYPOINT ["node", "--max-semi-space-size=4", "/app/dist/main.js"]
CMD ["proxy"]
