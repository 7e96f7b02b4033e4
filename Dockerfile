# The one gpupool binary (controller, agent, control plane and CLI) on a distroless glibc base,
# running as a non-root user. The node agent's DaemonSet runs it as root (deploy/kubernetes/agent.yaml
# says why); everything else runs it as built.
#
#   docker build --build-arg VERSION=v0.1.0 -t REGISTRY/gpupool:v0.1.0 .
#
# go-nvml loads libnvidia-ml.so.1 with dlopen through cgo, so the binary is built with cgo against
# glibc; the NVIDIA container runtime mounts the driver's libraries into the agent's container.
# Base images are pinned by tag; the Go tag is go.mod's Go version (a test keeps them equal).
FROM docker.io/library/golang:1.26.8-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY api ./api
COPY cmd ./cmd
COPY internal ./internal
ARG VERSION=""
RUN CGO_ENABLED=1 go build -trimpath -buildvcs=false -ldflags "-s -w -X main.version=${VERSION}" -o /out/gpupool ./cmd/gpupool

FROM gcr.io/distroless/base-debian12:nonroot
COPY --from=build /out/gpupool /usr/local/bin/gpupool
USER 65532:65532
ENTRYPOINT ["/usr/local/bin/gpupool"]
