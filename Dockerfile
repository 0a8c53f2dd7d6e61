# onesided-server in a small image. Built by docker-compose.yml; on its own:
#   docker build -t onesided-server .
#   docker run -p 50051:50051 -e ONESIDED_ADMIN_TOKEN=… -v onesided-data:/data onesided-server

# Stage 1: build the release binary (protoc comes vendored with the build; nothing to install).
FROM rust:1-bookworm AS builder
WORKDIR /src
COPY . .
RUN cargo build --release -p onesided-server --locked

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
USER onesided
WORKDIR /data
VOLUME ["/data"]
ENV ONESIDED_LISTEN=0.0.0.0:50051 \
    ONESIDED_DATA_DIR=/data
EXPOSE 50051
# the web view and /metrics, when started with --http-listen 0.0.0.0:8080 (docker-compose.yml)
EXPOSE 8080
ENTRYPOINT ["onesided-server"]
