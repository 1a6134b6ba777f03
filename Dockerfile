# The image of `flint server` in kubernetes mode (charts/flint) and of
# `flint fetcher` beside each function pod:
#   docker build -t <registry>/flint:0.1.0 . && docker push <registry>/flint:0.1.0
# Node.js 24 runs the TypeScript sources directly (type stripping), as in
# development, so there is no build step; only runtime dependencies are
# installed. bubblewrap sandboxes builds where the cluster lets it; python3
# and pip are what the Python builder runs. It runs as root, as Fission's
# fetcher does: the fetcher writes files the environment container, whose
# user it cannot know, must read. test/container-image.test.ts checks what it
# copies and that nothing the runtime imports is a dev dependency.
FROM node:24-bookworm-slim
RUN apt-get update \
 && apt-get install -y --no-install-recommends bubblewrap ca-certificates python3 python3-pip \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /opt/flint
COPY package.json package-lock.json ./
RUN npm ci --omit=dev --no-audit --no-fund && npm cache clean --force
COPY bin ./bin
COPY src ./src
COPY charts/flint/values.yaml ./charts/flint/values.yaml
RUN ln -s /opt/flint/bin/flint.js /usr/local/bin/flint
ENTRYPOINT ["node", "/opt/flint/bin/flint.js"]
CMD ["server"]
