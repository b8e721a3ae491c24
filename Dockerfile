# Knooppunt in a container: `docker build -t knooppunt .` (or `docker compose up --build`).

# Build stage: compile the knooppunt binary.
FROM rust:1.95-bookworm AS build
WORKDIR /src
COPY . .
RUN cargo build --release --locked -p knooppunt

# Runtime stage: a small image with the binary and the default configuration, run as non-root.
FROM debian:bookworm-slim
# CA certificates: deliveries to https sinks check the sink's certificate against them.
RUN apt-get update \
    && apt-get install -y --no-install-recommends ca-certificates \
    && rm -rf /var/lib/apt/lists/* \
    && useradd --system --uid 10001 --home-dir /var/lib/knooppunt knooppunt \
    && mkdir -p /var/lib/knooppunt/data /etc/knooppunt \
    && chown -R knooppunt /var/lib/knooppunt
COPY --from=build /src/target/release/knooppunt /usr/local/bin/knooppunt
COPY config/knooppunt.toml /etc/knooppunt/knooppunt.toml
USER knooppunt
WORKDIR /var/lib/knooppunt
# In a container the hub listens on every interface and keeps its store in the volume. Any
# other key of the configuration can be set the same way (KNOOPPUNT_<SECTION>_<KEY>).
ENV KNOOPPUNT_SERVER_LISTEN=0.0.0.0:8080 \
    KNOOPPUNT_SERVER_DATA_DIR=/var/lib/knooppunt/data
EXPOSE 8080
VOLUME /var/lib/knooppunt
# SIGTERM (docker stop) finishes the requests and delivery attempts in flight, then exits.
STOPSIGNAL SIGTERM
ENTRYPOINT ["knooppunt"]
CMD ["serve", "--config", "/etc/knooppunt/knooppunt.toml"]
