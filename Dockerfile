# syntax=docker/dockerfile:1
# The typeahead image: one static-enough binary (the web page is embedded in it) on a
# distroless base (glibc, CA certificates for HTTPS object stores, no shell), running as
# non-root. Build: `docker build -t typeahead .` from the repository root.

FROM rust:1-bookworm AS build
WORKDIR /src
COPY . .
RUN cargo build --release --locked --bin typeahead \
    && strip target/release/typeahead

FROM gcr.io/distroless/cc-debian12:nonroot
COPY --from=build /src/target/release/typeahead /usr/local/bin/typeahead
USER 65532:65532
EXPOSE 8080 8090
HEALTHCHECK NONE
ENTRYPOINT ["/usr/local/bin/typeahead"]
CMD ["--help"]
