# Hugging Face Docker Space (sdk: docker, app_port: 8501): the explorer on the bundled samples.
# The image installs the built wheel (not the source tree), so it runs exactly what `pip install`
# gives a user. Spaces run the container as user 1000; uploads work inside the Space's iframe
# (see --public in docs/deploy.md).
FROM python:3.11-slim AS build
WORKDIR /src
COPY pyproject.toml setup.py README.md LICENSE NOTICE app.py ./
COPY graph ./graph
COPY views ./views
COPY sample_traces ./sample_traces
# gcc builds the optional C speedups of the cold load into the wheel (setup.py); the runtime
# image needs no compiler (the extension links only the C library).
RUN apt-get update && apt-get install -y --no-install-recommends gcc libc6-dev && rm -rf /var/lib/apt/lists/*
RUN pip install --no-cache-dir build && python -m build --wheel --outdir /dist .

FROM python:3.11-slim
RUN useradd --create-home --uid 1000 user
COPY --from=build /dist /dist
RUN pip install --no-cache-dir "$(ls /dist/rollout_graph-*.whl)[app]" && rm -rf /dist
USER user
ENV HOME=/home/user \
    PYTHONUNBUFFERED=1
WORKDIR /home/user

EXPOSE 8501
CMD ["rollout-graph", "view", "--public", "--port", "8501"]
