# flashsale: the storefront (`flashsale`) and the load runner (`loadtest`).
#
#   docker build -t flashsale .                    # the app image (last stage)
#   docker build -t flashsale-loadtest --target loadtest .
#
# The builder is Debian bookworm like the runtime: mattn/go-sqlite3 needs cgo,
# so the binaries link against glibc and must not be built on a newer glibc
# (golang:1.26 alone is trixie) than the one they run on.
# Plain Dockerfile syntax (no BuildKit-only RUN --mount), so the legacy
# builder of docker-compose v1 builds it as well as `docker compose`.
#
# The base images are arguments only so that a machine without a registry
# can build on local stand-ins (deploy/offline/compose.yml sets them); the
# defaults are the official images.
ARG GOLANG_IMAGE=golang:1.26-bookworm
ARG DEBIAN_IMAGE=debian:bookworm-slim

FROM ${GOLANG_IMAGE} AS build
WORKDIR /src
ENV CGO_ENABLED=1 GOFLAGS=-trimpath
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN go build -ldflags="-s -w" -o /out/flashsale . \
 && go build -ldflags="-s -w" -o /out/loadtest ./loadtest/cmd/loadtest

# runtime: glibc, CA certificates (rediss:// and postgres TLS), curl for the
# health check, a non-root user. No redis-server: in a container the app is
# always given -redis (FLASHSALE_REDIS), so it never starts local nodes.
FROM ${DEBIAN_IMAGE} AS runtime
RUN apt-get update \
 && apt-get install -y --no-install-recommends ca-certificates curl \
 && rm -rf /var/lib/apt/lists/* \
 && useradd --system --uid 10001 --user-group --create-home --home-dir /home/flashsale flashsale \
 && install -d -o flashsale -g flashsale /home/flashsale/out
COPY --from=build /out/flashsale /out/loadtest /usr/local/bin/
WORKDIR /home/flashsale
USER flashsale

# loadtest: the runner, plus socat. The runner sends load only to loopback
# URLs, so the entrypoint relays 127.0.0.1 ports to the app and Redis
# containers named in LOADTEST_APPS and LOADTEST_REDIS (deploy/loadtest/).
# redis-server lets the runner start its own nodes (and sentinels) inside
# the container for the node and failover scenarios: --entrypoint loadtest
# with -app-bin /usr/local/bin/flashsale (docs/operations.md, labs on compose).
FROM runtime AS loadtest
USER root
RUN apt-get update \
 && apt-get install -y --no-install-recommends socat redis-server \
 && rm -rf /var/lib/apt/lists/*
COPY deploy/loadtest/entrypoint.sh /usr/local/bin/loadtest-entrypoint
RUN chmod 0755 /usr/local/bin/loadtest-entrypoint
USER flashsale
ENTRYPOINT ["loadtest-entrypoint"]
CMD ["-quick"]
# Which sources this image was built from (a digest of the build context,
# given by whoever builds: the compose test checks it before it runs the
# image). Last, so a new digest rebuilds nothing but this label.
ARG SOURCE_DIGEST=""
LABEL flashsale.source-digest=$SOURCE_DIGEST

# app (the default target): the storefront. Listen on all interfaces inside
# the container; the compose file decides what is published.
FROM runtime AS app
ENV FLASHSALE_ADDR=0.0.0.0:8080
EXPOSE 8080
HEALTHCHECK --interval=5s --timeout=3s --start-period=20s --retries=5 \
  CMD curl -fsS -o /dev/null http://127.0.0.1:8080/readyz || exit 1
STOPSIGNAL SIGTERM
ENTRYPOINT ["flashsale"]
ARG SOURCE_DIGEST=""
LABEL flashsale.source-digest=$SOURCE_DIGEST
