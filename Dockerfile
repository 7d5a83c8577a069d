# syntax=docker/dockerfile:1
#
# The cube image, for people who build with Docker. It matches what
# "go run ./cube/image/cmd/build-image" assembles without a daemon (see
# cube/image/rootfs.go for the layout; cube/image/dockerfile_test.go keeps the
# two in step):
#
#   docker build --build-arg VERSION=$(git describe --tags --always --dirty) \
#     --build-arg REVISION=$(git rev-parse HEAD) -t ghcr.io/elasticctr/cube:dev .
#   docker buildx build --platform linux/amd64,linux/arm64 ...   # both architectures
#
# It needs BuildKit (the default builder since Docker 23).

ARG GO_VERSION=1.26

FROM --platform=$BUILDPLATFORM golang:${GO_VERSION} AS build
ARG TARGETOS
ARG TARGETARCH
ARG VERSION=dev
WORKDIR /src
COPY . .
RUN --mount=type=cache,target=/go/pkg/mod \
    --mount=type=cache,target=/root/.cache/go-build \
    CGO_ENABLED=0 GOOS=${TARGETOS:-linux} GOARCH=${TARGETARCH:-amd64} \
    go build -trimpath -ldflags "-s -w -X main.version=${VERSION}" -o /out/nonroot/cube ./cube/cmd/cube
# Owned by 65532: /cube and /data. Owned by root: /etc/passwd and /etc/group.
RUN mkdir -p /out/nonroot/data /out/root/etc \
 && chmod 0755 /out/nonroot/cube /out/nonroot/data /out/root/etc \
 && printf 'root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/data:/sbin/nologin\n' > /out/root/etc/passwd \
 && printf 'root:x:0:\nnonroot:x:65532:\n' > /out/root/etc/group \
 && chmod 0644 /out/root/etc/passwd /out/root/etc/group

FROM scratch
ARG VERSION=dev
ARG REVISION=unknown
ARG SOURCE=https://github.com/elasticctr/terraform-provider-ctr
ARG CREATED=1970-01-01T00:00:00Z
ARG LICENSES=NOASSERTION
COPY --from=build --chown=0:0 /out/root/ /
COPY --from=build --chown=65532:65532 /out/nonroot/ /
USER 65532:65532
WORKDIR /data
ENV PATH=/
EXPOSE 8027/tcp 8099/tcp 8080/tcp
LABEL org.opencontainers.image.title="cube" \
      org.opencontainers.image.description="cube, the sparse-parameter engine for Paddle Serving: build, serve and query sharded dictionaries" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}" \
      org.opencontainers.image.source="${SOURCE}" \
      org.opencontainers.image.licenses="${LICENSES}" \
      org.opencontainers.image.created="${CREATED}"
ENTRYPOINT ["/cube"]
CMD ["server", "--data", "/data", "--listen", ":8027"]
