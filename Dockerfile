# A small non-root image of the controller:
#   docker build -t nodepool-fanout:dev .
# then `kubectl apply -k deploy/` (deploy/deployment.yaml runs image nodepool-fanout:dev).
FROM rust:1.95-bookworm AS build
WORKDIR /src
COPY Cargo.toml Cargo.lock rustfmt.toml ./
COPY src ./src
COPY benches ./benches
COPY tests ./tests
COPY crds ./crds
COPY examples ./examples
COPY charts-fixtures ./charts-fixtures
RUN cargo build --release --locked --bin nodepool-fanout

FROM gcr.io/distroless/cc-debian12:nonroot
COPY --from=build /src/target/release/nodepool-fanout /usr/local/bin/nodepool-fanout
# Numeric: with runAsNonRoot the kubelet refuses a user it cannot verify is
# not root, and a name ("nonroot") it cannot verify. 65532 is distroless's
# nonroot; deploy/deployment.yaml runs as the same (tests/offline/deploy.rs checks).
USER 65532:65532
ENTRYPOINT ["/usr/local/bin/nodepool-fanout"]
CMD ["run"]
