# Knooppunt in a container: `docker build --build-arg KNOOPPUNT_COMMIT=$(git rev-parse
# --short=12 HEAD) -t knooppunt .` (or `docker compose up --build`).

# Build stage: compile the knooppunt binary, stripped (no line tables: ~26 MB, not ~136 MB).
FROM rust:1.95-bookworm AS build
WORKDIR /src
COPY . .
# The commit `--version`, the start-up log and /v1/status name (.git is not copied).
ARG KNOOPPUNT_COMMIT=unknown
RUN CARGO_PROFILE_RELEASE_DEBUG=false CARGO_PROFILE_RELEASE_STRIP=true \
        cargo build --release --locked -p knooppunt \
    && mkdir -p /out/data

# Runtime stage: the binary, its default configuration, CA certificates and the C library
# (distroless: no shell, no package manager), run as the unprivileged user 10001 (the
# owner of the store in volumes made by earlier images).
FROM gcr.io/distroless/cc-debian12
ARG KNOOPPUNT_COMMIT=unknown
# What the image is (the OCI image annotations): registries and scanners show these.
LABEL org.opencontainers.image.title="Knooppunt" \
      org.opencontainers.image.description="A CloudEvents 1.0 event hub for the Dutch government (NL GOV profile)" \
      org.opencontainers.image.version="0.1.0" \
      org.opencontainers.image.revision="${KNOOPPUNT_COMMIT}" \
      org.opencontainers.image.licenses="EUPL-1.2" \
      org.opencontainers.image.documentation="README.md, docs/operating.md"
COPY --from=build /src/target/release/knooppunt /usr/local/bin/knooppunt
COPY config/knooppunt.toml /etc/knooppunt/knooppunt.toml
COPY --from=build --chown=10001:10001 /out /var/lib/knooppunt
USER 10001:10001
WORKDIR /var/lib/knooppunt
# In a container the hub listens on every interface and keeps its store in the volume. Any
# other key of the configuration can be set the same way (KNOOPPUNT_<SECTION>_<KEY>).
ENV KNOOPPUNT_SERVER_LISTEN=0.0.0.0:8080 \
    KNOOPPUNT_SERVER_DATA_DIR=/var/lib/knooppunt/data
EXPOSE 8080
VOLUME /var/lib/knooppunt
# The binary answers its own health check (there is no shell or curl in the image). A hub
# serving HTTPS with a private certificate: check server.metrics_listen's /healthz instead.
HEALTHCHECK --interval=10s --timeout=6s --start-period=30s --retries=3 \
    CMD ["knooppunt", "check", "--health", "http://127.0.0.1:8080"]
# SIGTERM (docker stop) finishes the requests and delivery attempts in flight, then exits.
STOPSIGNAL SIGTERM
ENTRYPOINT ["knooppunt"]
CMD ["serve", "--config", "/etc/knooppunt/knooppunt.toml"]
