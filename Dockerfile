# syntax=docker/dockerfile:1
# One image for every role: `outrigger proxy` (the sidecar, the default command), `outrigger webhook`
# and `outrigger iptables` (the transparent-capture init step). Bundled JavaScript only: no
# TypeScript, no dev dependencies, no npm at run time. Runs as a non-root user with a read-only root
# filesystem (nothing is written outside the volumes the injector mounts).
#
#   docker build -t ghcr.io/outrigger-mesh/outrigger:0.1.0 .
#   scripts/build-image      (no registry needed: makes NODE_IMAGE from Debian packages and npm)
#
# NODE_IMAGE is only the build stages' base: the image itself starts FROM scratch and holds node,
# iptables and the shared libraries they load (see scripts/image-rootfs), not a Debian system.
# Pin NODE_IMAGE by digest in a release pipeline; the tag keeps this file readable.
ARG NODE_IMAGE=node:24.21.0-slim

FROM ${NODE_IMAGE} AS build
WORKDIR /src
COPY package.json package-lock.json ./
# --ignore-scripts: the pinned `node` devDependency would fetch a second Node (this image has one),
# and `prepare` would bundle before the sources are here. koffi's binaries come from its prebuilt
# per-platform optional packages, so no install script is needed.
RUN npm ci --ignore-scripts --no-audit --no-fund
# src/ bundled by esbuild into a few files (a sidecar then keeps less source in its heap than with
# one module per file; docs/benchmarks.md, "Memory"). esbuild reads tsconfig.json for TypeScript's
# semantics (class fields). The type check runs in CI, not here.
COPY tsconfig.json ./
COPY scripts/bundle.ts ./scripts/
COPY src ./src
RUN node scripts/bundle.ts /app/dist
# The application's own files, gathered here to become one layer. package.json marks dist/ as ES
# modules; proto/ holds the snapshot schema loaded at run time; manifests/ is what `outrigger
# install` prints and `outrigger demo` routes by.
COPY package.json /app/
COPY proto /app/proto
COPY manifests /app/manifests
COPY bin /app/bin

FROM ${NODE_IMAGE} AS deps
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --omit=dev --ignore-scripts --no-audit --no-fund && rm -rf /root/.npm
# Files Node never loads: type declarations and TypeScript sources (Node refuses to strip types
# under node_modules), source maps (the ENTRYPOINT does not enable them), documentation, C/C++
# sources of prebuilt addons, Bare-runtime prebuilds and packages' test folders. Licences stay.
RUN find node_modules -type f \( -name '*.d.ts' -o -name '*.d.mts' -o -name '*.d.cts' \
    -o -name '*.ts' -o -name '*.mts' -o -name '*.cts' -o -name '*.map' -o -name '*.bare' \
    -o -name '*.c' -o -name '*.cc' -o -name '*.cpp' -o -name '*.h' -o -name '*.hh' -o -name '*.hpp' \
    -o \( -iname '*.md' ! -iname 'licen[cs]e*' ! -iname 'notice*' \) \) -delete \
  && find node_modules -maxdepth 3 -type d -regextype posix-extended \
    -regex 'node_modules/([^@/][^/]*|@[^/]+/[^/]+)/(test|tests|__tests__)' -prune -exec rm -rf {} + \
  && find node_modules -type d -empty -delete

FROM ${NODE_IMAGE} AS system
# iptables (with iptables-restore) for the init step, ca-certificates for the CA bundle, jemalloc
# (preloaded below), binutils for strip. Only what scripts/image-rootfs copies out of this stage ships.
RUN apt-get update \
  && apt-get install -y --no-install-recommends iptables ca-certificates libjemalloc2 binutils \
  && rm -rf /var/lib/apt/lists/*
COPY scripts/image-rootfs /usr/local/sbin/image-rootfs
RUN image-rootfs /rootfs

# Three layers, from the least to the most often changed: the system (node, iptables, libraries),
# the production dependencies, the application.
FROM scratch
COPY --from=system /rootfs/ /
COPY --from=deps /app/node_modules /app/node_modules
COPY --from=build /app/ /app/
ENV PATH=/usr/local/bin:/usr/sbin:/usr/bin NODE_ENV=production
# jemalloc instead of glibc's malloc: one arena, small thread caches, freed pages returned after a
# second. One sidecar under load: 62-65 MB private instead of 94, 115-118 MB resident instead of
# 147, and 62 instead of 94 after the load, at less CPU per request (docs/benchmarks.md, "Memory").
# The injector sets the same MALLOC_CONF on the sidecar.
ENV LD_PRELOAD=/usr/local/lib/libjemalloc.so.2 \
    MALLOC_CONF=narenas:1,tcache_max:4096,background_thread:true,dirty_decay_ms:1000,muzzy_decay_ms:0
WORKDIR /app
# The sidecar's UID: the injected securityContext and the iptables owner match use the same number
# (option proxyUid); the init container overrides it with root for iptables.
USER 2102:2102
EXPOSE 7400 7401 7402 8443
# --max-semi-space-size=4: V8 would otherwise let the young generation grow to 64 MB under load.
# 4 MiB semi-spaces cost ~22 % less CPU per request than 2 MiB and peaked lower under load in the
# same benchmark run (fewer objects promoted to the old generation); docs/benchmarks.md, "Memory".
ENTRYPOINT ["node", "--max-semi-space-size=4", "/app/dist/main.js"]
CMD ["proxy"]
