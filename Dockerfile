# syntax=docker/dockerfile:1
#
# The flotilla-agent image: one static Go binary (CGO off, -trimpath) on
# distroless/static, running as the non-root user 65532 — the user the
# manifests' securityContext expects. No shell, no package manager.
#
#   docker build -t ghcr.io/flotilla-gitops/flotilla-agent:v0.1.0 \
#     --build-arg VERSION=v0.1.0 --build-arg COMMIT=$(git rev-parse --short HEAD) .
#
# The hub CLI, for CI jobs that prefer an image to `go install`:
#
#   docker build --target flotilla -t ghcr.io/flotilla-gitops/flotilla:v0.1.0 .
#
# Multi-platform: docker buildx build --platform linux/amd64,linux/arm64 …
# (Go cross-compiles; nothing runs under emulation).

ARG GO_VERSION=1.26

FROM --platform=$BUILDPLATFORM golang:${GO_VERSION} AS source
WORKDIR /src
ENV CGO_ENABLED=0 GOTOOLCHAIN=local
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod go mod download
COPY . .

FROM source AS build-agent
ARG TARGETOS TARGETARCH VERSION=dev COMMIT=unknown
RUN --mount=type=cache,target=/go/pkg/mod --mount=type=cache,target=/root/.cache/go-build \
    GOOS=$TARGETOS GOARCH=$TARGETARCH go build -trimpath \
      -ldflags "-s -w -X github.com/flotilla-gitops/flotilla/pkg/version.Version=${VERSION} -X github.com/flotilla-gitops/flotilla/pkg/version.Commit=${COMMIT}" \
      -o /out/flotilla-agent ./agent/flotilla-agent

FROM source AS build-hub
ARG TARGETOS TARGETARCH VERSION=dev COMMIT=unknown
RUN --mount=type=cache,target=/go/pkg/mod --mount=type=cache,target=/root/.cache/go-build \
    GOOS=$TARGETOS GOARCH=$TARGETARCH go build -trimpath \
      -ldflags "-s -w -X github.com/flotilla-gitops/flotilla/pkg/version.Version=${VERSION} -X github.com/flotilla-gitops/flotilla/pkg/version.Commit=${COMMIT}" \
      -o /out/flotilla ./hub/flotilla

FROM gcr.io/distroless/static-debian12:nonroot AS flotilla
COPY --from=build-hub /out/flotilla /flotilla
USER 65532:65532
ENTRYPOINT ["/flotilla"]

# Last, so it is what a plain `docker build .` produces.
FROM gcr.io/distroless/static-debian12:nonroot AS agent
COPY --from=build-agent /out/flotilla-agent /flotilla-agent
USER 65532:65532
ENTRYPOINT ["/flotilla-agent"]
