# onesided-server in a small image, with the `onesided` CLI beside it (worlds, windows, the
# audit, the cluster's status, from inside the compose network). Built by docker-compose.yml;
# on its own:
#   docker build -t onesided-server .
#   docker run -p 50051:50051 -e ONESIDED_ADMIN_TOKEN=… -v onesided-data:/data onesided-server
#   docker exec CONTAINER onesided --addr http://127.0.0.1:50051 --token … cluster status
# `--build-arg COMMIT=$(git rev-parse HEAD)` puts the commit in onesided_build_info (the build
# context has no .git to read it from).

# Stage 1: build the release binaries (protoc comes vendored with the build; nothing to install).
FROM rust:1-bookworm AS builder
ARG COMMIT=""
WORKDIR /src
COPY . .
RUN ONESIDED_BUILD_COMMIT="$COMMIT" cargo build --release -p onesided-server -p onesided-cli --locked

# Stage 2: the binary alone, run as a non-root user. bash is listed for the compose health check
# (a TCP connect through bash's /dev/tcp: the image has no gRPC client).
FROM debian:bookworm-slim
RUN apt-get update \
    && apt-get install -y --no-install-recommends ca-certificates bash \
    && rm -rf /var/lib/apt/lists/*
RUN useradd --system --uid 10001 --user-group --home-dir /data --shell /usr/sbin/nologin onesided \
    && mkdir -p /data \
    && chown onesided:onesided /data
COPY --from=builder /src/target/release/onesided-server /usr/local/bin/onesided-server
COPY --from=builder /src/target/release/onesided /usr/local/bin/onesided
USER onesided
WORKDIR /data
VOLUME ["/data"]
ENV ONESIDED_LISTEN=0.0.0.0:50051 \
    ONESIDED_DATA_DIR=/data
EXPOSE 50051
# the web view and /metrics, when started with --http-listen 0.0.0.0:8080 (docker-compose.yml)
EXPOSE 8080
ENTRYPOINT ["onesided-server"]
