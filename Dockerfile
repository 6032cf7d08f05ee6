# One image holds every atmost binary (ingest, dispatcher, sweeper, reconciler, platformsim,
# atmost); compose.yaml picks the one a service runs with `command:`.
#
#   docker build -t atmost .
#   docker run --rm atmost atmost version

FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=devel
RUN CGO_ENABLED=0 go build -trimpath -buildvcs=false \
      -ldflags "-s -w -X github.com/atmost/atmost/internal/version.Version=${VERSION}" \
      -o /out/ ./cmd/...

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/ /usr/local/bin/
ENV PATH=/usr/local/bin
USER nonroot:nonroot
