# Build stage: compile the knooppunt binary.
FROM rust:1.95-bookworm AS build
WORKDIR /src
COPY . .
RUN cargo build --release -p knooppunt

# Runtime stage: a small image with the binary and the default configuration, run as non-root.
FROM debian:bookworm-slim
RUN useradd --system --uid 10001 --home-dir /var/lib/knooppunt knooppunt \
    && mkdir -p /var/lib/knooppunt /etc/knooppunt \
    && chown knooppunt /var/lib/knooppunt
COPY --from=build /src/target/release/knooppunt /usr/local/bin/knooppunt
COPY config/knooppunt.toml /etc/knooppunt/knooppunt.toml
USER knooppunt
WORKDIR /var/lib/knooppunt
ENTRYPOINT ["knooppunt"]
CMD ["serve", "--config", "/etc/knooppunt/knooppunt.toml"]
