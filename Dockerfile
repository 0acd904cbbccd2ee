# syntax=docker/dockerfile:1
# The karpenter-tui image: the one binary on distroless, as a non-root user. Its default command is the in-cluster
# controller; give it --cloud aws|kwok (the Helm chart in charts/karpenter-tui passes its own arguments).
#
#   docker build --build-arg GIT_COMMIT=$(git rev-parse --short=12 HEAD) -t karpenter-tui:dev .
#
# The builder is Debian 12 (bookworm), like the runtime image, so the binary links against the glibc it runs on.

FROM rust:1.95-bookworm AS builder
# `.git` is not in the build context (.dockerignore): build.rs takes the commit from here instead.
ARG GIT_COMMIT=""
ENV KARPENTER_TUI_GIT_COMMIT=$GIT_COMMIT
WORKDIR /src
COPY . .
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/src/target \
    cargo build --release --locked --bin karpenter-tui \
    && cp target/release/karpenter-tui /usr/local/bin/karpenter-tui

FROM gcr.io/distroless/cc-debian12:nonroot
COPY --from=builder /usr/local/bin/karpenter-tui /usr/local/bin/karpenter-tui
# distroless's nonroot user, by number so that runAsNonRoot can verify it.
USER 65532:65532
ENTRYPOINT ["/usr/local/bin/karpenter-tui"]
CMD ["controller", "--in-cluster"]
