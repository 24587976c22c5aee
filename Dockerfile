# AdTally container image: build with the official Swift image, run on slim Debian.
# The Swift runtime is linked statically (--static-swift-stdlib); the only shared libraries the
# binary needs beyond Debian's base are libpq5 (PostgreSQL client) and, for TLS to the database,
# the CA bundle. Migrations are copied beside the binary, where `adtally` looks for them first.

# ---- build stage: same Swift major.minor as the toolchain the project is tested with (6.3)
FROM swift:6.3-bookworm AS build
RUN apt-get update \
    && apt-get install -y --no-install-recommends libpq-dev pkg-config \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /src
# Manifest first so that dependency resolution is cached apart from source changes.
COPY Package.swift ./
COPY Sources ./Sources
COPY Tests ./Tests
RUN swift build -c release --static-swift-stdlib --product adtally \
    && install -D "$(swift build -c release --show-bin-path)/adtally" /out/adtally
COPY migrations /out/migrations

# ---- runtime stage
FROM debian:bookworm-slim AS runtime
RUN apt-get update \
    && apt-get install -y --no-install-recommends libpq5 ca-certificates tzdata \
    && rm -rf /var/lib/apt/lists/* \
    && useradd --system --uid 10001 --no-create-home --shell /usr/sbin/nologin adtally
WORKDIR /app
COPY --from=build /out/adtally /app/adtally
COPY --from=build /out/migrations /app/migrations
USER adtally
ENV HOST=0.0.0.0 PORT=8080 LOG_LEVEL=info
EXPOSE 8080
# No curl in the slim image: the binary probes its own /healthz.
HEALTHCHECK --interval=10s --timeout=3s --start-period=30s --retries=3 CMD ["/app/adtally", "healthcheck"]
STOPSIGNAL SIGTERM
ENTRYPOINT ["/app/adtally"]
CMD ["serve"]
