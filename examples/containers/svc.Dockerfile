# The svc command as the single binary of `deno compile` (deno task compile): the operator image, for
# `svc migrate` (a deploy step) and `svc serve`. Build from the repository root:
#   docker build -f examples/containers/svc.Dockerfile -t svc .
# deno compile downloads denort, its base runtime, once; a build without that access sets DENORT_BIN
# (see docs/guide/operations.md).
FROM denoland/deno:2.9.6 AS build
WORKDIR /src
COPY . .
RUN deno task compile

# Any glibc image will do: the binary needs glibc and libgcc only.
FROM gcr.io/distroless/cc-debian12
COPY --from=build /src/dist/svc /usr/local/bin/svc
USER nonroot
EXPOSE 3000
# Ready when the database answers and the schema is current (exit 0); see svc health.
HEALTHCHECK --interval=10s --timeout=5s CMD ["/usr/local/bin/svc", "health"]
STOPSIGNAL SIGTERM
ENTRYPOINT ["/usr/local/bin/svc"]
CMD ["serve", "--host", "0.0.0.0", "--port", "3000"]
