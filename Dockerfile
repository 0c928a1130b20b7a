# The machine-api-provider image, for those with a container engine:
#
#   docker build -t machine-api-provider:latest .
#
# `make image` builds the equivalent without one (hack/image: an OCI image
# tarball, reproducible). Both: a static binary (CGO_ENABLED=0, -trimpath,
# no build ID) at /machine-api-provider on distroless static, running as
# nonroot (65532:65532).

# The Go version go.mod requires (go 1.26.0), any patch release.
ARG GO_VERSION=1.26

FROM --platform=$BUILDPLATFORM docker.io/library/golang:${GO_VERSION} AS build
ARG TARGETOS=linux
ARG TARGETARCH
WORKDIR /src
# Modules first, so that a source change does not download them again.
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod go mod download
COPY api/ api/
COPY cmd/ cmd/
COPY pkg/ pkg/
RUN --mount=type=cache,target=/go/pkg/mod --mount=type=cache,target=/root/.cache/go-build \
    CGO_ENABLED=0 GOOS=$TARGETOS GOARCH=$TARGETARCH \
    go build -trimpath -buildvcs=false -ldflags '-s -w -buildid=' \
        -o /out/machine-api-provider ./cmd/machine-api-provider

FROM gcr.io/distroless/static:nonroot
COPY --from=build /out/machine-api-provider /machine-api-provider
# Go reads this file if it exists (OpenShift mounts the cluster's trust
# bundle there) and, either way, the image's roots in /etc/ssl/certs.
ENV SSL_CERT_FILE=/etc/pki/ca-trust/extracted/pem/tls-ca-bundle.pem
USER 65532:65532
ENTRYPOINT ["/machine-api-provider"]
