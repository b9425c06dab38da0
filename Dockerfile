# syntax=docker/dockerfile:1
# Tollgate: a multi-stage image. The build stage bundles the sources (dist/bin/tollgate.mjs); the
# runtime stage has production dependencies only, runs as the unprivileged `node` user, keeps its data
# (the billing spool; the embedded database when DATABASE_URL is unset) in /var/lib/tollgate, and
# reports its health from GET /readyz.

FROM node:20-bookworm-slim AS build
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --no-audit --no-fund
COPY tsconfig.json ./
COPY bin ./bin
COPY src ./src
COPY migrations ./migrations
# The first run of the command builds the bundle.
RUN node bin/tollgate.mjs --help > /dev/null

FROM node:20-bookworm-slim
ENV NODE_ENV=production \
    TOLLGATE_HOST=0.0.0.0 \
    TOLLGATE_PORT=8787 \
    TOLLGATE_DATA_DIR=/var/lib/tollgate
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --omit=dev --no-audit --no-fund && npm cache clean --force
COPY bin ./bin
COPY src ./src
COPY migrations ./migrations
# Copied after the sources, so the bundle is the newest file and is used as it is.
COPY --from=build /app/dist ./dist
RUN mkdir -p /var/lib/tollgate && chown node:node /var/lib/tollgate && chmod 0700 /var/lib/tollgate
USER node
VOLUME ["/var/lib/tollgate"]
EXPOSE 8787
HEALTHCHECK --interval=10s --timeout=3s --start-period=30s --retries=3 \
  CMD ["node", "-e", "fetch(`http://127.0.0.1:${process.env.TOLLGATE_PORT}/readyz`).then((r) => process.exit(r.ok ? 0 : 1), () => process.exit(1))"]
ENV MALLOC_ARENA_MAX=1
ENTRYPOINT ["node", "--max-semi-space-size=16", "--heap-growing-percent=100", "bin/tollgate.mjs"]
CMD ["serve"]
