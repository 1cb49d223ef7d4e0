# The svc command as a Node single executable application (deno task sea): the operator image, for
# `svc migrate` (a deploy step) and `svc serve`. Build from the repository root:
#   docker build -f examples/containers/svc-node.Dockerfile -t svc-node .
# Everything the build needs comes from the npm registry: Deno through npx, svc's packages, postject.
# The executable is made of this stage's node (an official Node 22 build).
FROM node:22-bookworm AS build
WORKDIR /src
COPY . .
RUN npx --yes deno@2.9.6 task sea

# The executable is a node binary: it needs glibc, libstdc++ and libgcc (debian:bookworm-slim has them).
FROM debian:bookworm-slim
COPY --from=build /src/dist/svc-node /usr/local/bin/svc
USER nobody
EXPOSE 3000
# Ready when the database answers and the schema is current (exit 0); see svc health.
HEALTHCHECK --interval=10s --timeout=5s CMD ["/usr/local/bin/svc", "health"]
STOPSIGNAL SIGTERM
ENTRYPOINT ["/usr/local/bin/svc"]
CMD ["serve", "--host", "0.0.0.0", "--port", "3000"]
